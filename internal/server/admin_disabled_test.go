package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestDisabledOrganizationStopsItsWork: two replicas on one database
// (both stores). Once a site admin disables an organization through one
// replica, its run tokens and agent tokens are refused on the very next
// request on both (403, saying the organization is disabled), and no
// runner starts a run of it: one queued meanwhile (by a site admin, who
// still reaches the organization) waits, queued. Enabled through the
// other replica, the tokens work again and the waiting run is planned.
func TestDisabledOrganizationStopsItsWork(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			a := testenv.New(t, testenv.Options{Store: st})
			// The replicas share the blobs too: either's runner may plan.
			ro := testenv.ReplicaOf(t, a)
			ro.Configure = func(c *server.Config) { c.Blobs = filepath.Join(a.Opts.DataDir, "blobs") }
			b := testenv.New(t, ro)
			replicas := []*testenv.Env{a, b}
			ctx := context.Background()
			c := a.Client
			testenv.NewOrg(t, c, "acme")

			// A run that waits for an agent (none runs): its token stays
			// a live run's.
			pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("private")})
			if err != nil {
				t.Fatal(err)
			}
			agentTok, err := c.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("agent")})
			if err != nil {
				t.Fatal(err)
			}
			onAgents, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("on-agents"),
				ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
			if err != nil {
				t.Fatal(err)
			}
			testenv.UploadConfig(ctx, t, c, onAgents.ID, `terraform {}`)
			waiting, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: onAgents})
			if err != nil {
				t.Fatal(err)
			}
			_, runTok, err := a.Server.Auth.CreateToken(ctx, a.Server.DB, auth.NewToken{Kind: auth.KindRun, Subject: waiting.ID})
			if err != nil {
				t.Fatal(err)
			}
			remote, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("remote")})
			if err != nil {
				t.Fatal(err)
			}
			testenv.UploadConfig(ctx, t, c, remote.ID, `terraform {}`)

			tokens := map[string]string{"run": runTok, "agent": agentTok.Token}
			// accepted requires every replica to accept (or refuse as
			// disabled, on the API too) every token alike.
			accepted := func(step string, want bool) {
				t.Helper()
				for i, r := range replicas {
					for kind, tok := range tokens {
						_, err := r.Server.Auth.Authenticate(ctx, tok)
						if want && err != nil {
							t.Fatalf("%s: replica %d: the %s token: %v, want accepted", step, i, kind, err)
						}
						if !want && (core.KindOf(err) != core.KindForbidden || !strings.Contains(err.Error(), `organization "acme" is disabled`)) {
							t.Fatalf("%s: replica %d: the %s token: %v, want refused as acme is disabled", step, i, kind, err)
						}
						if !want {
							status, body := r.API(t, tok, "GET", "/api/v2/runs/"+waiting.ID, nil)
							if status != http.StatusForbidden || !strings.Contains(string(body), "disabled") {
								t.Fatalf("%s: replica %d: the %s token on the API: %d %s, want 403 saying acme is disabled", step, i, kind, status, body)
							}
						}
					}
				}
			}
			accepted("acme enabled", true)

			disabled := true
			if _, err := a.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &disabled}); err != nil {
				t.Fatal(err)
			}
			accepted("acme disabled through replica a", false)
			queued, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: remote})
			if err != nil {
				t.Fatal(err)
			}
			// Whether or not a runner looked meanwhile: nothing is
			// claimed, on either replica, and the run is still queued.
			for i, r := range replicas {
				if j, err := r.Server.Runs.Claim(ctx, "runner-probe"); err != nil || j != nil {
					t.Fatalf("replica %d: a claim while acme is disabled: %+v, %v; want none", i, j, err)
				}
			}
			got, err := c.Runs.Read(ctx, queued.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tfe.RunPlanQueued {
				t.Fatalf("a run queued while acme is disabled: %s, want plan_queued", got.Status)
			}

			disabled = false
			if _, err := b.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &disabled}); err != nil {
				t.Fatal(err)
			}
			accepted("acme enabled through replica b", true)
			testenv.WaitRun(ctx, t, c, queued.ID, tfe.RunPlannedAndFinished)
		})
	}
}
