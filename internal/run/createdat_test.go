package run_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunCreatedAtToTheMicrosecond: a run's created-at, in its own
// document and in the admin list, is when it was created to the
// microsecond, as the store keeps it, so that runs created within one
// second, or one millisecond (two workspaces' current runs, by which
// workspace lists sort), do not read as created at once.
func TestRunCreatedAtToTheMicrosecond(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("web")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, w.ID, `output "o" { value = 1 }`)
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: w, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		var micros int64
		if err := e.Server.DB.QueryRow(ctx, `SELECT created_at FROM runs WHERE id = ?`, r.ID).Scan(&micros); err != nil {
			t.Fatal(err)
		}
		want := core.FromMicros(micros)
		read, err := c.Runs.Read(ctx, r.ID)
		if err != nil || !read.CreatedAt.Equal(want) || !r.CreatedAt.Equal(want) {
			t.Fatalf("created-at %v (created), %v (read), %v; want %v", r.CreatedAt, read.CreatedAt, err, want)
		}
		l, err := c.Admin.Runs.List(ctx, nil)
		if err != nil || len(l.Items) != 1 || !l.Items[0].CreatedAt.Equal(want) {
			t.Fatalf("the admin list: %+v, %v; want the run created at %v", l, err, want)
		}
	})
}
