package stack_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// newStack makes an organization named org with a project "platform" and
// a stack named name in it; a non-empty engine version becomes the
// stack's terraform-version.
func newStack(t *testing.T, e *testenv.Env, org, name, engine string) (*tfe.Organization, *tfe.Project, *tfe.Stack) {
	t.Helper()
	ctx := context.Background()
	o := testenv.NewOrg(t, e.Client, org)
	prj, err := e.Client.Projects.Create(ctx, o.Name, tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Client.Stacks.Create(ctx, tfe.StackCreateOptions{Name: name, Project: &tfe.Project{ID: prj.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if engine != "" {
		setEngine(t, e, st.ID, engine)
	}
	return o, prj, st
}
