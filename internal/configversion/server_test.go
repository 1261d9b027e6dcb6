package configversion_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestThroughServer drives the wired server (composition root, real
// workspaces, token auth, capability mux) with go-tfe on both stores.
func TestThroughServer(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		org, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("a@example.com")})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := e.Client.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		cv, err := e.Client.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("output \"x\" { value = 1 }\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		archive, err := slug.Pack(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Client.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
			t.Fatal(err)
		}
		got, err := e.Client.ConfigurationVersions.Read(ctx, cv.ID)
		if err != nil || got.Status != tfe.ConfigurationUploaded {
			t.Fatalf("after upload: %v %+v", err, got)
		}
		// The workspace shows it as current.
		w, err := e.Client.Workspaces.ReadByID(ctx, ws.ID)
		if err != nil || w.CurrentConfigurationVersion == nil || w.CurrentConfigurationVersion.ID != cv.ID {
			t.Fatalf("workspace current configuration version: %v %+v", err, w.CurrentConfigurationVersion)
		}

		// A hostile archive through the real capability mux.
		bad, err := e.Client.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPut, bad.UploadURL, bytes.NewReader(traversal(t)))
		resp, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("hostile upload answered %d", resp.StatusCode)
		}
		if got, _ := e.Client.ConfigurationVersions.Read(ctx, bad.ID); got.Status != tfe.ConfigurationErrored || !strings.Contains(got.ErrorMessage, "escapes") {
			t.Fatalf("hostile upload left %+v", got)
		}

		// Restart: everything is in the stores.
		e = e.Restart(t)
		data, err := e.Client.ConfigurationVersions.Download(ctx, cv.ID)
		if err != nil || !bytes.Equal(data, archive) {
			t.Fatalf("download after restart: %v", err)
		}
		raw, _, err := e.Server.ConfigVersions.OpenArchiveUnchecked(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		raw.Close()

		// Deleting the workspace deletes its versions; the sweep their
		// archives. (The server's own sweep loop may get there first, so
		// the test looks at the blob, not at what this sweep counted.)
		var key string
		if err := e.Server.DB.QueryRow(ctx, `SELECT blob_key FROM configuration_versions WHERE id = ?`, cv.ID).Scan(&key); err != nil || key == "" {
			t.Fatalf("the archive's blob key: %q, %v", key, err)
		}
		if ok, err := e.Server.Blobs.Exists(ctx, key); err != nil || !ok {
			t.Fatalf("the archive's blob before deletion: exists %v, %v", ok, err)
		}
		if err := e.Client.Workspaces.DeleteByID(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.ConfigurationVersions.Read(ctx, cv.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("read after workspace deletion: %v", err)
		}
		if _, err := e.Server.ConfigVersions.Sweep(ctx); err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if ok, err := e.Server.Blobs.Exists(ctx, key); err != nil || ok {
			t.Fatalf("the archive's blob after the workspace was deleted and swept: exists %v, %v", ok, err)
		}
		var pending int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM configuration_version_garbage`).Scan(&pending); err != nil || pending != 0 {
			t.Fatalf("%d archives still wait for deletion after the sweep (%v)", pending, err)
		}
	})
}

func traversal(t *testing.T) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "../../evil.tf", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte("pwn"))
	tw.Close()
	gz.Close()
	return buf.Bytes()
}
