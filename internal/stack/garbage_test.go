package stack_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestUploadRecordedBeforeItsArchive: a configuration's archive is in the
// garbage ledger (for a sweep after the staging grace) before any of it
// is written, so that a crash before the upload commits leaves at worst a
// blob a sweep removes; the commit takes it out of the ledger, and
// deleting the stack puts it back, for deletion at once.
func TestUploadRecordedBeforeItsArchive(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "ledger")
		prj, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "p"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "s", Project: &tfe.Project{ID: prj.ID}})
		if err != nil {
			t.Fatal(err)
		}
		admin := authz.WithModel(auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true}), e.Server.Authz)
		cfg, err := e.Server.Stacks.CreateConfiguration(admin, st.ID, stack.ConfigurationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		archive, err := slug.Pack("testdata/tfdata")
		if err != nil {
			t.Fatal(err)
		}
		ledger := func() []string {
			t.Helper()
			keys, err := store.Strings(ctx, e.Server.DB, `SELECT blob_key FROM stack_configuration_garbage WHERE blob_key LIKE ?`, "stack-configurations/"+st.ID+"/%")
			if err != nil {
				t.Fatal(err)
			}
			return keys
		}
		var during []string
		body := &firstRead{r: bytes.NewReader(archive), before: func() { during = ledger() }}
		up, err := e.Server.Stacks.Upload(ctx, cfg.ID, body)
		if err != nil {
			t.Fatal(err)
		}
		if up.Status != stack.ConfigCompleted {
			t.Fatalf("the configuration is %s", up.Status)
		}
		if len(during) != 1 || !strings.HasSuffix(during[0], ".tar.gz") {
			t.Fatalf("while the archive was written, the ledger held %v, want its key", during)
		}
		if after := ledger(); len(after) != 0 {
			t.Errorf("after the upload committed, the ledger holds %v", after)
		}
		if ok, err := e.Server.Blobs.Exists(ctx, during[0]); err != nil || !ok {
			t.Fatalf("the uploaded archive %s: exists %v, %v", during[0], ok, err)
		}
		if n, err := e.Server.Stacks.Ledger().Sweep(ctx); err != nil || n != 0 {
			t.Errorf("a sweep deleted %d archives (%v); the stack's is in use", n, err)
		}
		if ok, _ := e.Server.Blobs.Exists(ctx, during[0]); !ok {
			t.Fatal("a sweep deleted the archive of a stack still in use")
		}
		if err := e.Server.Stacks.DeleteStack(admin, st.ID, true); err != nil {
			t.Fatal(err)
		}
		if ok, _ := e.Server.Blobs.Exists(ctx, during[0]); ok {
			t.Error("the archive of a deleted stack is still there")
		}
		if left := ledger(); len(left) != 0 {
			t.Errorf("after the stack's deletion, the ledger holds %v", left)
		}
	})
}

// firstRead calls before once, at the first Read.
type firstRead struct {
	r      io.Reader
	before func()
}

func (f *firstRead) Read(p []byte) (int, error) {
	if f.before != nil {
		f.before()
		f.before = nil
	}
	return f.r.Read(p)
}
