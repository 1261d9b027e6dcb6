package server_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestPlainDataSealedAtStart: rows and blobs stored before encryption at
// rest (made here by writing them back in plain text and forgetting the
// conversions) are sealed at the next start and read back unchanged.
func TestPlainDataSealedAtStart(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := testenv.New(t, testenv.Options{Store: st})
			if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
				t.Fatal(err)
			}
			ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
			if err != nil {
				t.Fatal(err)
			}
			v, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("k"), Value: tfe.String("v"), Category: tfe.Category(tfe.CategoryEnv)})
			if err != nil {
				t.Fatal(err)
			}
			state := []byte(`{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"legacy-lineage","outputs":{"o":{"value":"legacy-output","type":"string"}},"resources":[]}`)
			sum := md5.Sum(state)
			if _, err := e.Client.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
				t.Fatal(err)
			}
			sv, err := e.Client.StateVersions.Upload(ctx, ws.ID, tfe.StateVersionUploadOptions{
				StateVersionCreateOptions: tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), MD5: tfe.String(hex.EncodeToString(sum[:])), Lineage: tfe.String("legacy-lineage")},
				RawState:                  state,
			})
			if err != nil {
				t.Fatal(err)
			}
			nc, err := e.Client.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
				Name: tfe.String("hook"), DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeSlack),
				Enabled: tfe.Bool(false), URL: tfe.String("https://hooks.example.test/services/T/B/sealed-later"),
			})
			if err != nil {
				t.Fatal(err)
			}
			e.Stop(t)

			// Back to plain text, as an older Terrace stored them.
			db, err := store.Open(ctx, e.Opts.Database)
			if err != nil {
				t.Fatal(err)
			}
			// A run as an older Terrace stored it: its variables inside
			// the doc.
			legacyDoc := `{"id":"run-legacyvars1","workspace_id":"` + ws.ID + `","organization":"acme","status":"discarded","timestamps":{},` +
				`"variables":[{"key":"k","value":"\"legacy-run-var\""},{"key":"s","value":"\"legacy-sensitive-input\"","sensitive":true}],` +
				`"plan":{"id":"plan-legacyvars1"},"apply":{"id":"apply-legacyvars1"},"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z"}`
			if _, err := db.Exec(ctx, `INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, plan_id, apply_id, created_at, updated_at, doc)
				VALUES ('run-legacyvars1', ?, 'acme', 'cv-none', 'discarded', ?, 'plan-legacyvars1', 'apply-legacyvars1', 0, 0, ?)`, ws.ID, false, legacyDoc); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				`UPDATE variables SET value = 'legacy-plain-value'`,
				`UPDATE state_version_outputs SET value = '"legacy-output"'`,
				`UPDATE notification_configurations SET url = 'https://hooks.example.test/services/T/B/legacy-url', delivery_responses = '[]', last_failure = ''`,
				`DELETE FROM seal_migrations`,
			} {
				if _, err := db.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			var stateFile string
			_ = filepath.WalkDir(filepath.Join(e.Opts.DataDir, "blobs", "state-versions"), func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".attrs") {
					stateFile = p
				}
				return err
			})
			if stateFile == "" {
				t.Fatal("no state blob file found")
			}
			if err := os.WriteFile(stateFile, state, 0o600); err != nil {
				t.Fatal(err)
			}

			e = testenv.New(t, e.Opts)
			b, err := os.ReadFile(stateFile)
			if err != nil {
				t.Fatal(err)
			}
			if !seal.IsSealedHeader(b) || bytes.Contains(b, []byte("legacy-lineage")) {
				t.Fatal("the plain state blob was not sealed at start")
			}
			db, err = store.Open(ctx, e.Opts.Database)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var doc string
			if err := db.QueryRow(ctx, `SELECT doc FROM runs WHERE id = 'run-legacyvars1'`).Scan(&doc); err != nil || strings.Contains(doc, "legacy-") {
				t.Fatalf("the legacy run's doc still holds its variables: %q, %v", doc, err)
			}
			lr, err := e.Server.Runs.System(ctx, "run-legacyvars1")
			if err != nil || len(lr.Variables) != 2 || lr.Variables[0].Value != `"legacy-run-var"` || lr.Variables[1].Value != `"legacy-sensitive-input"` || !lr.Variables[1].Sensitive {
				t.Fatalf("the legacy run's variables after sealing: %+v, %v", lr, err)
			}
			for _, q := range []string{`SELECT variables FROM runs WHERE id = 'run-legacyvars1'`, `SELECT value FROM variables`, `SELECT value FROM state_version_outputs`, `SELECT url FROM notification_configurations`, `SELECT delivery_responses FROM notification_configurations`} {
				var raw string
				if err := db.QueryRow(ctx, q).Scan(&raw); err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(raw, "tsl1.") || strings.Contains(raw, "legacy") {
					t.Fatalf("%s: %q was not sealed at start", q, raw)
				}
			}
			got, err := e.Client.Variables.Read(ctx, ws.ID, v.ID)
			if err != nil || got.Value != "legacy-plain-value" {
				t.Fatalf("variable after sealing: %+v, %v", got, err)
			}
			if got, err := e.Client.NotificationConfigurations.Read(ctx, nc.ID); err != nil || got.URL != "https://hooks.example.test/services/T/B/legacy-url" {
				t.Fatalf("notification configuration after sealing: %+v, %v", got, err)
			}
			dl, err := e.Client.StateVersions.Download(ctx, sv.DownloadURL)
			if err != nil || !bytes.Equal(dl, state) {
				t.Fatalf("state after sealing: %q, %v", dl, err)
			}
			outs, err := e.Client.StateVersions.ListOutputs(ctx, sv.ID, nil)
			if err != nil || len(outs.Items) != 1 || outs.Items[0].Value != "legacy-output" {
				t.Fatalf("outputs after sealing: %+v, %v", outs, err)
			}
		})
	}
}
