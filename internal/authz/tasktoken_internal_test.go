package authz

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
)

// A task result's access token reaches its run's plan JSON and
// configuration version and its own callback; the guard refuses it every
// other route, and the model every other run, version or action.
func TestTaskResultTokenReach(t *testing.T) {
	ctx := context.Background()
	s := &Service{}
	g := &Guard{Service: s, Routes: Routes}
	p := &auth.Principal{Kind: auth.KindTaskResult, TaskResultID: "taskrs-1", RunID: "run-1", WorkspaceID: "ws-1",
		Organization: "acme", ConfigVersionID: "cv-1"}
	own := Resource{Organization: "acme", WorkspaceID: "ws-1", RunID: "run-1"}
	ownCV := Resource{Organization: "acme", WorkspaceID: "ws-1", ConfigVersionID: "cv-1"}
	for _, c := range []struct {
		what   string
		action Action
		res    Resource
		want   core.Kind // 0: allowed
	}{
		{"its run's plan JSON", RunRead, own, 0},
		{"its run's configuration", RunInputs, ownCV, 0},
		{"the callback route (the service checks the result)", Authenticated, Resource{}, 0},
		{"another run's plan JSON", RunRead, Resource{Organization: "acme", WorkspaceID: "ws-1", RunID: "run-2"}, core.KindNotFound},
		{"a run of another organization with the same ID", RunRead, Resource{Organization: "other", WorkspaceID: "ws-9", RunID: "run-1"}, core.KindNotFound},
		{"another configuration version", RunInputs, Resource{Organization: "acme", WorkspaceID: "ws-1", ConfigVersionID: "cv-2"}, core.KindNotFound},
		{"state", StateRead, own, core.KindForbidden},
		{"its workspace", WorkspaceRead, own, core.KindForbidden},
		{"applying its run", RunApply, own, core.KindForbidden},
		{"the organization", OrgRead, Resource{Organization: "acme"}, core.KindForbidden},
		{"overriding tasks", RunOverrideTasks, own, core.KindForbidden},
	} {
		err := s.Decide(ctx, p, c.action, c.res)
		if c.want == 0 && err != nil {
			t.Errorf("%s: refused (%v), want allowed", c.what, err)
		}
		if c.want != 0 && core.KindOf(err) != c.want {
			t.Errorf("%s: got %v, want a %v error", c.what, err, c.want)
		}
	}
	taskRoutes := 0
	for pattern, rt := range Routes {
		if rt.TaskToken {
			taskRoutes++
			continue
		}
		// The guard answers before locating anything.
		if err := g.Decide(ctx, p, rt, Request{Vals: map[string]string{}, Query: func(string) string { return "" }, Body: func() []byte { return nil }}); core.KindOf(err) != core.KindForbidden {
			t.Errorf("%s: a task result token got %v, want forbidden", pattern, err)
		}
	}
	if taskRoutes != 3 {
		t.Fatalf("%d routes admit task result tokens, want 3 (callback, plan JSON, configuration download)", taskRoutes)
	}
}
