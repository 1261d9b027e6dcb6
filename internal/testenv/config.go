package testenv

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
)

// UploadConfig uploads a one-file configuration (main.tf) to a workspace
// without queuing a run, and waits until it is uploaded.
func UploadConfig(ctx context.Context, t testing.TB, c *tfe.Client, wsID, mainTF string) *tfe.ConfigurationVersion {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(mainTF), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := c.ConfigurationVersions.Create(ctx, wsID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cv, err = c.ConfigurationVersions.Read(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cv.Status == tfe.ConfigurationUploaded {
			return cv
		}
		if time.Now().After(deadline) {
			t.Fatalf("configuration version %s is %s after 30s", cv.ID, cv.Status)
		}
	}
}
