package authz

import (
	"context"
	"slices"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
)

// sharingResolver is a Resolver whose organizations share their modules
// and providers with the readers listed; it locates nothing else.
type sharingResolver struct {
	Resolver
	modules, providers map[string][]string // org: the organizations it shares with
}

func (r sharingResolver) SharesModules(_ context.Context, org string, readers []string) (bool, error) {
	return slices.ContainsFunc(readers, func(o string) bool { return slices.Contains(r.modules[org], o) }), nil
}

func (r sharingResolver) SharesProviders(_ context.Context, org string, readers []string) (bool, error) {
	return slices.ContainsFunc(readers, func(o string) bool { return slices.Contains(r.providers[org], o) }), nil
}

// A module test run's token reads its organization's private registry,
// and what other organizations share with it; the model and the guard
// refuse it everything else.
func TestTestRunTokenReach(t *testing.T) {
	ctx := context.Background()
	s := &Service{resolver: sharingResolver{modules: map[string][]string{"lib": {"acme"}}, providers: map[string][]string{"tools": {"acme"}}}}
	g := &Guard{Service: s, Routes: Routes}
	p := &auth.Principal{Kind: auth.KindTestRun, TestRunID: "trun-1", Organization: "acme"}
	own := Resource{Organization: "acme"}
	for _, c := range []struct {
		what   string
		action Action
		res    Resource
		want   core.Kind // 0: allowed
	}{
		{"its organization's modules", OrgReadModules, own, 0},
		{"its organization's providers", OrgReadProviders, own, 0},
		{"modules shared with its organization", OrgReadModules, Resource{Organization: "lib"}, 0},
		{"providers shared with its organization", OrgReadProviders, Resource{Organization: "tools"}, 0},
		{"modules of an organization sharing only providers", OrgReadModules, Resource{Organization: "tools"}, core.KindNotFound},
		{"providers of an organization sharing only modules", OrgReadProviders, Resource{Organization: "lib"}, core.KindNotFound},
		{"another organization's modules", OrgReadModules, Resource{Organization: "globex"}, core.KindNotFound},
		{"publishing modules", OrgManageModules, own, core.KindForbidden},
		{"the organization", OrgRead, own, core.KindForbidden},
		{"a workspace", WorkspaceRead, Resource{Organization: "acme", WorkspaceID: "ws-1"}, core.KindForbidden},
		{"state", StateRead, Resource{Organization: "acme", WorkspaceID: "ws-1"}, core.KindForbidden},
		{"starting a run", RunPlan, Resource{Organization: "acme", WorkspaceID: "ws-1"}, core.KindForbidden},
		{"any authenticated route", Authenticated, Resource{}, core.KindForbidden},
		{"a route whose service decides", AnyToken, Resource{}, core.KindForbidden},
	} {
		err := s.Decide(ctx, p, c.action, c.res)
		if c.want == 0 && err != nil {
			t.Errorf("%s: refused (%v), want allowed", c.what, err)
		}
		if c.want != 0 && core.KindOf(err) != c.want {
			t.Errorf("%s: got %v, want a %v error", c.what, err, c.want)
		}
	}
	// No API route reads the registry by its protocol (those are served
	// outside the guard): every one refuses the token, before locating
	// anything.
	for pattern, rt := range Routes {
		err := g.Decide(ctx, p, rt, Request{Vals: map[string]string{}, Query: func(string) string { return "" }, Body: func() []byte { return nil }})
		if core.KindOf(err) != core.KindForbidden {
			t.Errorf("%s: a test run token got %v, want forbidden", pattern, err)
		}
	}
}
