package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
)

const sealConfig = `
variable "secret" {
  type      = string
  sensitive = true
}
variable "shared" {
  type      = string
  sensitive = true
}
variable "round" { type = string }
variable "passed" {
  type      = string
  sensitive = true
  default   = ""
}
resource "terraform_data" "secret" {
  input = "${var.secret}/${var.shared}/round-${var.round}"
}
resource "terraform_data" "passed" {
  input = var.passed
}
output "marker" { value = "state-marker-${var.round}" }
output "secret" {
  value     = var.secret
  sensitive = true
}
`

// TestSecretsSealedAtRest runs a real terraform apply with sensitive
// workspace and variable-set variables, a sensitive run-level variable
// (-var: the run's variables), an SSH key and a notification token, then
// reads the raw database and every blob file: no secret appears. (The
// stack counterpart, a deployment's sensitive input, is
// internal/stack's TestSensitiveInputs.) It rotates the key-encryption key, restarts with the new one
// and applies again (variables and state still open), and starts with
// the wrong key and with none: both fail naming the problem.
func TestSecretsSealedAtRest(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	eng := engines(t)[0]
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testSealedAtRest(t, st, eng)
		})
	}
}

func testSealedAtRest(t *testing.T, st string, eng testenv.Engine) {
	ctx := context.Background()
	kek1 := seal.GenerateKEK()
	e := testenv.New(t, testenv.Options{Store: st, KEK: kek1.String()})
	c := newEngineCLI(t, e, eng)
	const org = "acme"
	secrets := map[string]string{
		"sensitive variable": "wsSecret-9f3c1d7e2b",
		"variable-set value": "setSecret-4a8b6c2d0e",
		"SSH private key":    "-----BEGIN OPENSSH PRIVATE KEY-----\nsshSecret-7d1e5f3a9c\n-----END OPENSSH PRIVATE KEY-----",
		"notification token": "hookToken-2c6e0a4b8d",
		"notification URL":   "https://hooks.example.test/services/T0/B0/urlSecret-3e7a9c1b5d",
		"run task HMAC key":  "taskKey-5b9d3f1a7c",
		"run-level variable": "runVarSecret-8e2f4a6c1b",
	}
	// A run task service that accepts only requests signed with the
	// task's key: the key must open right after a rotation too.
	var signedRight, signedWrong atomic.Int32
	taskSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !notify.Verify(secrets["run task HMAC key"], body, r.Header.Get("X-TFC-Task-Signature")) {
			signedWrong.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		signedRight.Add(1)
	}))
	t.Cleanup(taskSrv.Close)
	// The state holds the sensitive variables' values (so a sealed state
	// blob is what keeps them out of the blob files); the non-sensitive
	// marker output is shown in run logs, so it is only checked in the
	// download.
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, org, "app") + sealConfig})
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Read(ctx, org, "app")
	if err != nil {
		t.Fatal(err)
	}
	terraformVar := tfe.Category(tfe.CategoryTerraform)
	if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("secret"), Value: tfe.String(secrets["sensitive variable"]), Category: terraformVar, Sensitive: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	round, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("round"), Value: tfe.String("1"), Category: terraformVar})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Client.VariableSets.Create(ctx, org, &tfe.VariableSetCreateOptions{Name: tfe.String("shared"), Global: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.VariableSetVariables.Create(ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("shared"), Value: tfe.String(secrets["variable-set value"]), Category: terraformVar, Sensitive: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	key, err := e.Client.SSHKeys.Create(ctx, org, tfe.SSHKeyCreateOptions{Name: tfe.String("deploy"), Value: tfe.String(secrets["SSH private key"])})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := e.Client.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
		Name: tfe.String("hook"), DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeSlack),
		Enabled: tfe.Bool(false), URL: tfe.String(secrets["notification URL"]), Token: tfe.String(secrets["notification token"]),
	})
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.Client.RunTasks.Create(ctx, org, tfe.RunTaskCreateOptions{Name: "scanner", URL: taskSrv.URL, Category: "task",
		HMACKey: tfe.String(secrets["run task HMAC key"])})
	if err != nil {
		t.Fatalf("creating a signed run task: %v", err)
	}

	c.run(dir, "apply", "-auto-approve", "-var", "passed="+secrets["run-level variable"])
	runs, err := e.Client.Runs.List(ctx, ws.ID, nil)
	if err != nil || len(runs.Items) == 0 {
		t.Fatalf("listing the runs: %v, %v", runs, err)
	}
	// The run holds its variable (sealed at rest, so it must open).
	passed, err := e.Server.Runs.System(ctx, runs.Items[0].ID)
	if err != nil || len(passed.Variables) != 1 || !strings.Contains(passed.Variables[0].Value, secrets["run-level variable"]) {
		t.Fatalf("the run's variables read back as %+v, %v", passed, err)
	}
	sv, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatalf("no state after the apply: %v", err)
	}
	state1, err := e.Client.StateVersions.Download(ctx, sv.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	// The state download is the plaintext terraform wrote: it holds the
	// secrets (state always does), which is why it is sealed at rest.
	for _, want := range []string{secrets["sensitive variable"], secrets["variable-set value"], secrets["run-level variable"], "state-marker-1"} {
		if !bytes.Contains(state1, []byte(want)) {
			t.Fatalf("the downloaded state lacks %q:\n%s", want, state1)
		}
	}

	// Stopped, so SQLite's WAL is folded into the file and nothing is
	// half-written.
	e.Stop(t)
	testenv.AssertNoSecrets(t, e, "shared", secrets)

	// Rotate, then start with the new key: everything still opens, and a
	// new apply reads the sealed variables.
	kek2 := seal.GenerateKEK()
	if err := rotateKEK(ctx, e.Opts.Database, kek1, kek2); err != nil {
		t.Fatalf("rotating: %v", err)
	}
	opts := e.Opts
	opts.KEK = kek2.String()
	e = testenv.New(t, opts)
	c = newEngineCLI(t, e, eng)
	state1Again, err := e.Client.StateVersions.Download(ctx, sv.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(state1, state1Again) {
		t.Fatal("after rotation the state download differs from what was stored")
	}
	// Changing the URL sends a new signed test request: the key read back
	// after the rotation must still sign it.
	if _, err := e.Client.RunTasks.Update(ctx, task.ID, tfe.RunTaskUpdateOptions{URL: tfe.String(taskSrv.URL + "/v2")}); err != nil {
		t.Fatalf("after rotation the run task's verification failed: %v", err)
	}
	if signedRight.Load() != 2 || signedWrong.Load() != 0 {
		t.Fatalf("task service saw %d correctly and %d wrongly signed requests, want 2 and 0", signedRight.Load(), signedWrong.Load())
	}
	// Re-encrypt under a new data key while this server runs: it goes on
	// reading everything sealed (the apply below reads the sealed
	// variables and state).
	reencrypt(ctx, t, e, kek2)
	if nc, err := e.Client.NotificationConfigurations.Read(ctx, hook.ID); err != nil || nc.URL != secrets["notification URL"] {
		t.Fatalf("after rotation the notification configuration reads %v, %v; want its URL back", nc, err)
	}
	if r, err := e.Server.Runs.System(ctx, passed.ID); err != nil || len(r.Variables) != 1 || !strings.Contains(r.Variables[0].Value, secrets["run-level variable"]) {
		t.Fatalf("after re-encryption the run's variables read %+v, %v", r, err)
	}
	pk, err := e.Server.SSHKeys.PrivateKey(ctx, key.ID)
	if err != nil || pk != secrets["SSH private key"] {
		t.Fatalf("after rotation the SSH key reads %q, %v", pk, err)
	}
	if _, err := e.Client.Variables.Update(ctx, ws.ID, round.ID, tfe.VariableUpdateOptions{Value: tfe.String("2")}); err != nil {
		t.Fatal(err)
	}
	// The run-level variable again: with it left out, terraform itself
	// prints the old value of terraform_data.passed's output in the plan.
	c.run(dir, "apply", "-auto-approve", "-var", "passed="+secrets["run-level variable"])
	sv2, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	state2, err := e.Client.StateVersions.Download(ctx, sv2.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	want := secrets["sensitive variable"] + "/" + secrets["variable-set value"] + "/round-2"
	if !bytes.Contains(state2, []byte(want)) {
		t.Fatalf("the apply after rotation did not see the sealed variables: state lacks %q:\n%s", want, state2)
	}
	e.Stop(t)
	testenv.AssertNoSecrets(t, e, "shared", secrets)

	// The old key, and no key at all, are start-up errors naming the
	// problem.
	_, err = server.New(ctx, server.Config{DataDir: e.Opts.DataDir, Database: e.Opts.Database, Addr: "127.0.0.1:0", KEK: kek1.String()})
	if err == nil || !strings.Contains(err.Error(), "wrong key-encryption key") || !strings.Contains(err.Error(), kek2.ID) {
		t.Fatalf("starting with the old key: %v, want a wrong-key error naming key %s", err, kek2.ID)
	}
	_, err = server.New(ctx, server.Config{DataDir: e.Opts.DataDir, Database: e.Opts.Database, Addr: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "missing key-encryption key") {
		t.Fatalf("starting without a key: %v, want a missing-key error", err)
	}
}

func rotateKEK(ctx context.Context, database string, old, next seal.KEK) error {
	db, err := store.Open(ctx, database)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := seal.Rotate(ctx, db, old, next)
	if err == nil && n != 1 {
		err = fmt.Errorf("re-wrapped %d data keys, want 1", n)
	}
	return err
}

// reencrypt runs what `terrace keys reencrypt` runs against e's database
// and blobs, beside the running server.
func reencrypt(ctx context.Context, t *testing.T, e *testenv.Env, kek seal.KEK) {
	t.Helper()
	db, err := store.Open(ctx, e.Opts.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys, err := seal.Open(ctx, db, seal.Source{Configured: kek.String()})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := blob.Open(ctx, filepath.Join(e.Opts.DataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	bs.Seal(keys)
	id, _, err := keys.Target(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := keys.Reseal(ctx, db, server.SealedColumns())
	if err != nil {
		t.Fatalf("re-sealing columns: %v", err)
	}
	blobs, err := bs.Reseal(ctx)
	if err != nil {
		t.Fatalf("re-sealing blobs: %v", err)
	}
	if rows < 5 || blobs < 3 {
		t.Fatalf("re-sealed %d values and %d blobs: fewer than the test stored", rows, blobs)
	}
	if err := seal.Finish(ctx, db, id); err != nil {
		t.Fatal(err)
	}
}
