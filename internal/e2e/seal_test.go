package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
	_ "github.com/jackc/pgx/v5/stdlib" // reads PostgreSQL rows raw

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
resource "terraform_data" "secret" {
  input = "${var.secret}/${var.shared}/round-${var.round}"
}
output "marker" { value = "state-marker-${var.round}" }
output "secret" {
  value     = var.secret
  sensitive = true
}
`

// TestSecretsSealedAtRest runs a real terraform apply with sensitive
// workspace and variable-set variables, an SSH key and a notification
// token, then reads the raw database and every blob file: no secret
// appears. It rotates the key-encryption key, restarts with the new one
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

	c.run(dir, "apply", "-auto-approve")
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
	for _, want := range []string{secrets["sensitive variable"], secrets["variable-set value"], "state-marker-1"} {
		if !bytes.Contains(state1, []byte(want)) {
			t.Fatalf("the downloaded state lacks %q:\n%s", want, state1)
		}
	}

	// Stopped, so SQLite's WAL is folded into the file and nothing is
	// half-written.
	e.Stop(t)
	assertNoSecrets(t, e, secrets)

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
	pk, err := e.Server.SSHKeys.PrivateKey(ctx, key.ID)
	if err != nil || pk != secrets["SSH private key"] {
		t.Fatalf("after rotation the SSH key reads %q, %v", pk, err)
	}
	if _, err := e.Client.Variables.Update(ctx, ws.ID, round.ID, tfe.VariableUpdateOptions{Value: tfe.String("2")}); err != nil {
		t.Fatal(err)
	}
	c.run(dir, "apply", "-auto-approve")
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
	assertNoSecrets(t, e, secrets)

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

// assertNoSecrets reads every database row (PostgreSQL) or the database
// files (SQLite), and every blob file, looking for each secret.
func assertNoSecrets(t *testing.T, e *testenv.Env, secrets map[string]string) {
	t.Helper()
	var raw [][]byte
	var where []string
	if e.Opts.Store == "postgres" {
		raw = append(raw, postgresRows(t, e.Opts.Database))
		where = append(where, "PostgreSQL rows")
	} else {
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(e.Opts.Database + suffix)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			raw = append(raw, b)
			where = append(where, "SQLite file "+filepath.Base(e.Opts.Database+suffix))
		}
	}
	blobs := 0
	err := filepath.WalkDir(filepath.Join(e.Opts.DataDir, "blobs"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// fileblob's .attrs sidecars hold content type and checksum.
		if !strings.HasSuffix(path, ".attrs") {
			blobs++
		}
		if !strings.HasSuffix(path, ".attrs") && !seal.IsSealedHeader(b) {
			t.Errorf("blob %s is not sealed", path)
		}
		raw = append(raw, b)
		where = append(where, "blob "+path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if blobs < 3 { // configuration archive, plan, state, logs
		t.Fatalf("found %d blob files: the test is not looking in the right place", blobs)
	}
	// The scan can fail: the database does hold the variable's name.
	if !bytes.Contains(bytes.Join(raw, nil), []byte("shared")) {
		t.Fatal("the raw data lacks the variable set's name: the scan reads nothing")
	}
	for what, s := range secrets {
		// Keep the needle short enough to be found inside a JSON-escaped
		// string too.
		needle := s
		if i := strings.Index(s, "sshSecret"); i >= 0 {
			needle = s[i : i+len("sshSecret-7d1e5f3a9c")]
		}
		for i, b := range raw {
			if j := bytes.Index(b, []byte(needle)); j >= 0 {
				t.Errorf("the %s appears in plain text in %s: %q", what, where[i], b[max(0, j-300):min(len(b), j+100)])
			}
		}
	}
}

// postgresRows returns every row of every table as text.
func postgresRows(t *testing.T, dsn string) []byte {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var out bytes.Buffer
	for _, tb := range tables {
		r, err := db.Query(`SELECT t::text FROM "` + tb + `" t`)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(&out, s+"\n")
		}
		r.Close()
	}
	return out.Bytes()
}
