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

// EnableModuleTests creates private module name/provider in org with its
// tests enabled, and returns its ID.
func EnableModuleTests(ctx context.Context, t testing.TB, c *tfe.Client, org, name, provider string) tfe.RegistryModuleID {
	t.Helper()
	id := tfe.RegistryModuleID{Organization: org, Name: name, Provider: provider, Namespace: org, RegistryName: tfe.PrivateRegistry}
	if _, err := c.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String(name), Provider: tfe.String(provider)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// StartTestRun uploads files (paths in the module, such as
// tests/x.tftest.hcl) as a test configuration of module id and starts a
// test run of them, as terraform test -cloud-run does through the API.
func StartTestRun(ctx context.Context, t testing.TB, c *tfe.Client, id tfe.RegistryModuleID, files map[string]string) *tfe.TestRun {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := c.ConfigurationVersions.CreateForRegistryModule(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	m, err := c.RegistryModules.Read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.TestRuns.Create(ctx, tfe.TestRunCreateOptions{ConfigurationVersion: cv, RegistryModule: m})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// WaitTestRun waits (a minute at most) until test run runID of module id
// is in one of the statuses want, or, with none, no longer queued or
// running; it returns the run.
func WaitTestRun(ctx context.Context, t testing.TB, c *tfe.Client, id tfe.RegistryModuleID, runID string, want ...tfe.TestRunStatus) *tfe.TestRun {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := c.TestRuns.Read(ctx, id, runID)
		if err == nil {
			if len(want) == 0 && r.Status != tfe.TestRunQueued && r.Status != tfe.TestRunRunning {
				return r
			}
			for _, w := range want {
				if r.Status == w {
					return r
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("test run %s did not become %v within a minute: %+v, %v", runID, want, r, err)
		}
	}
}
