package e2e

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestKillDuringConfigUpload kills the server while a configuration archive
// is half sent. After a restart the version is still pending (never
// "uploaded" without its archive), earlier versions download whole, and the
// same upload URL can be used again.
func TestKillDuringConfigUpload(t *testing.T) {
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
			ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
			if err != nil {
				t.Fatal(err)
			}
			pack := func(noise int) []byte {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("output \"x\" { value = 1 }\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if noise > 0 {
					b := make([]byte, noise)
					_, _ = rand.Read(b) // incompressible, so the archive is big
					if err := os.WriteFile(filepath.Join(dir, "blob.bin"), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				a, err := slug.Pack(dir)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			first := pack(0)
			cv1, err := c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv1.UploadURL, bytes.NewReader(first)); err != nil {
				t.Fatal(err)
			}

			second := pack(8 << 20)
			cv2, err := c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
			if err != nil {
				t.Fatal(err)
			}
			p.killMidUpload(t, cv2.UploadURL, second)

			p = p.restart()
			c = p.Client
			got, err := c.ConfigurationVersions.Read(ctx, cv2.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tfe.ConfigurationPending {
				t.Fatalf("half-uploaded version is %s, want pending", got.Status)
			}
			list, err := c.ConfigurationVersions.List(ctx, ws.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, cv := range list.Items {
				if cv.Status != tfe.ConfigurationUploaded {
					continue
				}
				b, err := c.ConfigurationVersions.Download(ctx, cv.ID)
				if err != nil {
					t.Fatalf("uploaded version %s does not download after the crash: %v", cv.ID, err)
				}
				if cv.ID == cv1.ID && !bytes.Equal(b, first) {
					t.Fatalf("version %s changed across the crash", cv.ID)
				}
			}
			// The upload URL still works for a complete upload.
			if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv2.UploadURL, bytes.NewReader(second)); err != nil {
				t.Fatal(err)
			}
			b, err := c.ConfigurationVersions.Download(ctx, cv2.ID)
			if err != nil || !bytes.Equal(b, second) {
				t.Fatalf("download after the retried upload: %d bytes, %v", len(b), err)
			}
		})
	}
}
