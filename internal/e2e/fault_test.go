package e2e

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
)

// stateDoc returns a valid terraform state with the given serial, padded
// with resources to roughly size bytes.
func stateDoc(lineage string, serial int64, size int) []byte {
	var res []map[string]any
	for i := 0; len(res) == 0 || i*120 < size; i++ {
		res = append(res, map[string]any{
			"mode": "managed", "type": "terraform_data", "name": fmt.Sprintf("r%d", i),
			"provider":  `provider["terraform.io/builtin/terraform"]`,
			"instances": []map[string]any{{"schema_version": 0, "attributes": map[string]any{"id": fmt.Sprintf("id-%d", i), "input": strings.Repeat("x", 40)}}},
		})
	}
	b, _ := json.Marshal(map[string]any{
		"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": lineage,
		"outputs": map[string]any{"serial": map[string]any{"value": serial, "type": "number"}}, "resources": res, "check_results": nil,
	})
	return b
}

// TestKillDuringStateUpload kills the server while terraform's state upload
// is half sent. After a restart the last finalized state is still current
// and complete, and the half-sent version is never visible as state.
func TestKillDuringStateUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) {
			database := ""
			if st == "postgres" {
				database = storetest.PostgresDSN(t)
			}
			p := startProc(t, t.TempDir(), database, "")
			ctx := mustCtx()
			c := p.Client
			if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
				t.Fatal(err)
			}
			ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("net"), ExecutionMode: tfe.String("local")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{Reason: tfe.String("test")}); err != nil {
				t.Fatal(err)
			}
			const lineage = "7d2c3e1a-0000-4000-8000-000000000001"
			first := stateDoc(lineage, 1, 2<<10)
			sum := md5.Sum(first)
			sv1, err := c.StateVersions.Upload(ctx, ws.ID, tfe.StateVersionUploadOptions{
				StateVersionCreateOptions: tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), Lineage: tfe.String(lineage), MD5: tfe.String(hex.EncodeToString(sum[:]))},
				RawState:                  first,
			})
			if err != nil {
				t.Fatal(err)
			}

			second := stateDoc(lineage, 2, 8<<20)
			sum = md5.Sum(second)
			pending, err := c.StateVersions.Create(ctx, ws.ID, tfe.StateVersionCreateOptions{Serial: tfe.Int64(2), Lineage: tfe.String(lineage), MD5: tfe.String(hex.EncodeToString(sum[:]))})
			if err != nil {
				t.Fatal(err)
			}
			if pending.UploadURL == "" {
				t.Fatal("state version create returned no hosted-state-upload-url")
			}
			p.killMidUpload(t, pending.UploadURL, second)

			p = p.restart()
			c = p.Client
			cur, err := c.StateVersions.ReadCurrent(ctx, ws.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.ID != sv1.ID || cur.Serial != 1 {
				t.Fatalf("current state after the crash is %s (serial %d), want %s (serial 1)", cur.ID, cur.Serial, sv1.ID)
			}
			got, err := c.StateVersions.Download(ctx, cur.DownloadURL)
			if err != nil || !bytes.Equal(got, first) {
				t.Fatalf("current state download after the crash: %d bytes, %v; want the first state intact", len(got), err)
			}
			if sv, err := c.StateVersions.Read(ctx, pending.ID); err == nil && sv.Status == tfe.StateVersionFinalized {
				t.Fatalf("the half-uploaded version %s is finalized", pending.ID)
			}
			list, err := c.StateVersions.List(ctx, &tfe.StateVersionListOptions{Organization: "acme", Workspace: "net"})
			if err != nil {
				t.Fatal(err)
			}
			for _, sv := range list.Items {
				if sv.Status != tfe.StateVersionFinalized {
					continue
				}
				b, err := c.StateVersions.Download(ctx, sv.DownloadURL)
				if err != nil || !json.Valid(b) {
					t.Fatalf("listed finalized version %s does not download whole: %v", sv.ID, err)
				}
			}
		})
	}
}
