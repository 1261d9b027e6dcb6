package authz

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
)

// fakeTeams is the team domain as the model sees it, for callers without
// a store.
type fakeTeams map[string]Team

func (f fakeTeams) UserTeams(_ context.Context, userID, org string) ([]Team, error) {
	var out []Team
	for _, id := range map[string][]string{"user-owner": {"team-owners"}, "user-manager": {"team-managers"}, "user-ghost": {"team-ghosts"}}[userID] {
		if t := f[id]; t.Organization == org {
			out = append(out, t)
		}
	}
	return out, nil
}

func (f fakeTeams) Team(_ context.Context, id string) (Team, error) {
	t, ok := f[id]
	if !ok {
		return Team{}, core.NotFound("team %s not found", id)
	}
	return t, nil
}

// TestTeamDecisionsAgree: AllowsTeam (one team) and TeamsAllowing (a list,
// on the caller's standing read once) are one decision: for every team
// action, caller and team they answer alike, with a model in ctx and
// without one. What they answer is the model's: an agent's, a task
// result's and no token reach no team, a manager of teams manages a
// visible team and not a secret one, and only owners change the owners
// team.
func TestTeamDecisionsAgree(t *testing.T) {
	t.Parallel()
	teams := fakeTeams{
		"team-owners":   {ID: "team-owners", Organization: "acme", Owners: true},
		"team-managers": {ID: "team-managers", Organization: "acme", Access: OrgAccess{ManageTeams: true, ManageMembership: true}},
		"team-ghosts":   {ID: "team-ghosts", Organization: "acme", Secret: true, MembersManageTokens: true},
		"team-visible":  {ID: "team-visible", Organization: "acme"},
		"team-other":    {ID: "team-other", Organization: "globex"},
	}
	s := &Service{teams: teams}
	callers := map[string]*auth.Principal{
		"owner":              {Kind: auth.KindUser, UserID: "user-owner", Orgs: []string{"acme"}, Owns: []string{"acme"}},
		"manager":            {Kind: auth.KindUser, UserID: "user-manager", Orgs: []string{"acme"}},
		"ghost":              {Kind: auth.KindUser, UserID: "user-ghost", Orgs: []string{"acme"}},
		"managers' token":    {Kind: auth.KindTeam, TeamID: "team-managers", Organization: "acme"},
		"organization token": {Kind: auth.KindOrganization, Organization: "acme"},
		"site admin":         {Kind: auth.KindUser, UserID: "user-admin", SiteAdmin: true},
		"run token":          {Kind: auth.KindRun, RunID: "run-1", WorkspaceID: "ws-1", Organization: "acme"},
		"agent token":        {Kind: auth.KindAgent, AgentPoolID: "apool-1", Organization: "acme"},
		"runner":             {Kind: auth.KindRunner},
		"task result token":  {Kind: auth.KindTaskResult, TaskResultID: "taskrs-1", RunID: "run-1", Organization: "acme"},
		"test run token":     {Kind: auth.KindTestRun, TestRunID: "trun-1", Organization: "acme"},
		"no token":           nil,
	}
	var actions []Action
	for a, r := range rules {
		if r.scope == scopeTeam {
			actions = append(actions, a)
		}
	}
	if len(actions) < 6 {
		t.Fatalf("found %d team actions", len(actions))
	}
	for who, p := range callers {
		base := auth.WithPrincipal(context.Background(), p)
		for _, model := range []bool{true, false} {
			ctx := base
			if model {
				ctx = WithModel(base, s)
			}
			for _, a := range actions {
				allowing, err := TeamsAllowing(ctx, "acme", a)
				if err != nil {
					t.Fatalf("%s, %s (model %v): TeamsAllowing: %v", who, a, model, err)
				}
				for _, tm := range teams {
					if tm.Organization != "acme" {
						if allowing(tm) {
							t.Errorf("%s, %s (model %v): TeamsAllowing allows team %s of another organization", who, a, model, tm.ID)
						}
						continue
					}
					one := AllowsTeam(ctx, a, tm)
					if got := allowing(tm); got != (one == nil) {
						t.Errorf("%s, %s on %s (model %v): TeamsAllowing says %v, AllowsTeam %v", who, a, tm.ID, model, got, one)
					}
				}
			}
		}
	}
	ctx := func(who string) context.Context {
		return WithModel(auth.WithPrincipal(context.Background(), callers[who]), s)
	}
	for _, c := range []struct {
		who    string
		action Action
		team   string
		want   core.Kind // 0: allowed
	}{
		{"no token", TeamRead, "team-visible", core.KindUnauthorized},
		{"agent token", TeamRead, "team-visible", core.KindForbidden},
		{"runner", TeamRead, "team-visible", core.KindForbidden},
		{"task result token", TeamRead, "team-visible", core.KindForbidden},
		{"run token", TeamRead, "team-visible", core.KindForbidden},
		{"manager", TeamManage, "team-visible", 0},
		{"manager", TeamManage, "team-ghosts", core.KindNotFound},
		{"manager", TeamMembers, "team-owners", core.KindForbidden},
		{"ghost", TeamRead, "team-ghosts", 0},
		{"ghost", TeamManageTokens, "team-ghosts", 0},
		{"managers' token", TeamManageTokens, "team-managers", core.KindForbidden},
		{"owner", TeamMembers, "team-owners", 0},
		{"organization token", TeamManage, "team-ghosts", 0},
	} {
		err := AllowsTeam(ctx(c.who), c.action, teams[c.team])
		if c.want == 0 && err != nil {
			t.Errorf("%s, %s on %s: refused (%v), want allowed", c.who, c.action, c.team, err)
		}
		if c.want != 0 && core.KindOf(err) != c.want {
			t.Errorf("%s, %s on %s: got %v, want a %v error", c.who, c.action, c.team, err, c.want)
		}
	}
	if _, err := TeamsAllowing(ctx("owner"), "acme", WorkspaceRead); err == nil {
		t.Error("TeamsAllowing took a workspace action")
	}
	if err := AllowsTeam(ctx("owner"), WorkspaceRead, teams["team-visible"]); err == nil || core.KindOf(err) != 0 {
		t.Errorf("AllowsTeam took a workspace action: %v", err)
	}
}
