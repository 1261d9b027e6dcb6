package team_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestTeamTokenManagers: a team's tokens are managed by owners and the
// organization's token, and with a user token by the team's members when
// the team allows it (TeamManageTokens); the route guard, the service (a
// list of the organization's team tokens among them) and the team's
// can-update-api-token all say the same.
func TestTeamTokenManagers(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		team := func(name string, members bool) *tfe.Team {
			tm, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String(name), Visibility: tfe.String("organization"),
				AllowMemberTokenManagement: tfe.Bool(members)})
			if err != nil {
				t.Fatal(err)
			}
			return tm
		}
		open, closed := team("open", true), team("closed", false)
		tokens := map[string]string{}
		for who, teams := range map[string][]*tfe.Team{"insider": {open, closed}, "outsider": nil} {
			_, m := e.UserClient(t, "acme", who+"@acme.test", teams...)
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			tokens[who] = secret
		}
		openToken, err := c.TeamTokens.Create(ctx, open.ID)
		if err != nil {
			t.Fatal(err)
		}
		tokens["open-team-token"] = openToken.Token
		orgToken, err := c.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		tokens["organization-token"] = orgToken.Token

		want := map[string][]string{
			"insider":            {"open"},
			"outsider":           nil,
			"open-team-token":    nil,
			"organization-token": {"open", "closed"},
		}
		guard := &authz.Guard{Service: e.Server.Authz, Routes: authz.Routes}
		for who, token := range tokens {
			p, err := e.Server.Auth.Authenticate(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			sctx := authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
			for _, tm := range []*tfe.Team{open, closed} {
				allowed := slices.Contains(want[who], tm.Name)
				st, body := e.API(t, token, "GET", "/api/v2/teams/"+tm.ID, nil)
				var doc struct {
					Data struct {
						Attributes struct {
							Permissions map[string]bool `json:"permissions"`
						} `json:"attributes"`
					} `json:"data"`
				}
				if err := json.Unmarshal(body, &doc); st != http.StatusOK || err != nil {
					t.Fatalf("%s reading %s: %d %s %v", who, tm.Name, st, body, err)
				}
				if shown := doc.Data.Attributes.Permissions["can-update-api-token"]; shown != allowed {
					t.Errorf("%s on %s: can-update-api-token %v, want %v", who, tm.Name, shown, allowed)
				}
				for _, pattern := range []string{"POST /api/v2/teams/{id}/authentication-tokens", "GET /api/v2/teams/{id}/authentication-token"} {
					req := authz.Request{Vals: map[string]string{"id": tm.ID}, Query: func(string) string { return "" }, Body: func() []byte { return nil }}
					if err := guard.Decide(ctx, p, authz.Routes[pattern], req); (err == nil) != allowed {
						t.Errorf("%s on %s: %s decided %v, want allowed %v", who, tm.Name, pattern, err, allowed)
					}
				}
				if _, err := e.Server.Teams.Tokens(sctx, tm.ID); (err == nil) != allowed {
					t.Errorf("service: %s listing %s's tokens: %v, want allowed %v", who, tm.Name, err, allowed)
				}
			}
			if p.Kind == auth.KindTeam {
				continue // a team token lists no organization's team tokens
			}
			listed, err := e.Server.Teams.OrganizationTokens(sctx, "acme", "", "")
			if err != nil {
				t.Fatalf("service: %s listing acme's team tokens: %v", who, err)
			}
			if len(listed) != 0 && !slices.Contains(want[who], "open") {
				t.Errorf("service: %s listed %d team tokens, want none", who, len(listed))
			}
		}
		// The insider creates the open team's token, not the closed one's.
		insider := e.NewClient(t, tokens["insider"])
		if _, err := insider.TeamTokens.Create(ctx, open.ID); err != nil {
			t.Errorf("insider creating open's token: %v", err)
		}
		_, err = insider.TeamTokens.Create(ctx, closed.ID)
		testenv.WantStatus(t, "insider creating closed's token", err, "forbidden")
	})
}
