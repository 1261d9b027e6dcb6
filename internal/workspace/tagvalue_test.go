package workspace_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestTagValuesTheStoreCannotKeep: a tag binding value holding a control
// character (a NUL, which PostgreSQL cannot store in text) is a 422 that
// names the value's rule, on a workspace and on a project, on both stores,
// and nothing is written; it was a 500 on PostgreSQL.
func TestTagValuesTheStoreCannotKeep(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"v\x00", "line\nbreak", strings.Repeat("é", 257)} {
			_, err := c.Workspaces.AddTagBindings(ctx, ws.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "ok", Value: "fine"}, {Key: "k", Value: v}}})
			if err == nil || !strings.Contains(err.Error(), "invalid attribute") {
				t.Errorf("a workspace tag value %q: %v, want a 422", v, err)
			}
			_, err = c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "p", TagBindings: []*tfe.TagBinding{{Key: "k", Value: v}}})
			if err == nil || !strings.Contains(err.Error(), "invalid attribute") {
				t.Errorf("a project tag value %q: %v, want a 422", v, err)
			}
		}
		code, body := e.API(t, "", "PATCH", "/api/v2/workspaces/"+ws.ID+"/tag-bindings",
			`{"data":[{"type":"tag-bindings","attributes":{"key":"k","value":"a\u0000b"}}]}`)
		if code != 422 || !strings.Contains(string(body), "none of them a control character") {
			t.Errorf("a NUL in a tag value sent as JSON: %d %s, want a 422 naming the rule", code, body)
		}
		if bs, err := c.Workspaces.ListTagBindings(ctx, ws.ID); err != nil || len(bs) != 0 {
			t.Fatalf("tag bindings after refused changes: %v %v, want none", bs, err)
		}
		// A value of 256 characters that are not ASCII is within the rule.
		if _, err := c.Workspaces.AddTagBindings(ctx, ws.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "k", Value: strings.Repeat("é", 256)}}}); err != nil {
			t.Fatalf("256 two-byte characters: %v", err)
		}
	})
}
