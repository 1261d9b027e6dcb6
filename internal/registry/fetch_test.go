package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestWhoFetchesPrivateModules: the module registry protocol (terraform
// init) lists and downloads a private module for members, team and
// organization tokens and run tokens (terraform init inside a run), and
// refuses agent tokens and a task result's access token, which
// authenticate there but reach only their job protocol or their run's plan
// and configuration.
func TestWhoFetchesPrivateModules(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		if _, err := c.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String("secretmod"), Provider: tfe.String("aws")}); err != nil {
			t.Fatal(err)
		}
		id := tfe.RegistryModuleID{Organization: org, Name: "secretmod", Provider: "aws", Namespace: org, RegistryName: tfe.PrivateRegistry}
		rmv, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.0.0")})
		if err != nil {
			t.Fatal(err)
		}
		upload, _ := rmv.Links["upload"].(string)
		if err := c.RegistryModules.UploadTarGzip(ctx, upload, bytes.NewReader(tarGz(t, [2]string{"main.tf", moduleV1}))); err != nil {
			t.Fatal(err)
		}

		token := func(kind auth.Kind, subject string) string { return mint(t, e, kind, subject) }
		_, m := e.UserClient(t, org, "member@acme.test")
		team, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("devs")})
		if err != nil {
			t.Fatal(err)
		}
		orgToken, err := c.OrganizationTokens.Create(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := c.AgentPools.Create(ctx, org, tfe.AgentPoolCreateOptions{Name: tfe.String("pool")})
		if err != nil {
			t.Fatal(err)
		}
		agentToken, err := c.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("agent")})
		if err != nil {
			t.Fatal(err)
		}

		// A run held in its pre-plan stage by a run task: its run token,
		// and the task result's access token the task service is sent.
		ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		accessTokens := make(chan string, 4)
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var p struct {
				AccessToken string `json:"access_token"`
				Stage       string `json:"stage"`
			}
			if json.NewDecoder(r.Body).Decode(&p) == nil && p.Stage == "pre_plan" && p.AccessToken != "test-token" {
				accessTokens <- p.AccessToken
			}
		}))
		defer svc.Close()
		task, err := c.RunTasks.Create(ctx, org, tfe.RunTaskCreateOptions{Name: "gate", URL: svc.URL, Category: "task"})
		if err != nil {
			t.Fatal(err)
		}
		stages := []tfe.Stage{tfe.PrePlan}
		if _, err := c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, Stages: &stages, RunTask: task}); err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, ws.ID, `output "o" { value = 1 }`)
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		var taskToken string
		select {
		case taskToken = <-accessTokens:
		case <-time.After(30 * time.Second):
			t.Fatal("the run task service got no request")
		}

		proto := e.URL + "/api/registry/v1/modules/acme/secretmod/aws"
		for _, tc := range []struct {
			who, token string
			want       int
		}{
			{"a member", token(auth.KindUser, m.User.ID), http.StatusOK},
			{"a team token", token(auth.KindTeam, team.ID), http.StatusOK},
			{"the organization token", orgToken.Token, http.StatusOK},
			{"a run token", token(auth.KindRun, r.ID), http.StatusOK},
			{"an agent token", agentToken.Token, http.StatusForbidden},
			{"a task result's access token", taskToken, http.StatusForbidden},
		} {
			resp, body := do(t, e.HTTP, "GET", proto+"/versions", tc.token, nil)
			if resp.StatusCode != tc.want {
				t.Errorf("%s listing the module's versions: %d %s, want %d", tc.who, resp.StatusCode, body, tc.want)
			}
			resp, body = do(t, e.HTTP, "GET", proto+"/1.0.0/download", tc.token, nil)
			want := tc.want
			if want == http.StatusOK {
				want = http.StatusNoContent
			}
			if resp.StatusCode != want || (want != http.StatusNoContent && resp.Header.Get("X-Terraform-Get") != "") {
				t.Errorf("%s downloading the module: %d %s (X-Terraform-Get %q), want %d", tc.who, resp.StatusCode, body, resp.Header.Get("X-Terraform-Get"), want)
			}
			resp, body = do(t, e.HTTP, "GET", proto+"/1.0.0", tc.token, nil)
			if resp.StatusCode != tc.want {
				t.Errorf("%s reading the module: %d %s, want %d", tc.who, resp.StatusCode, body, tc.want)
			}
		}
	})
}

// mint makes a token of that kind for subject (a user, team or run ID).
func mint(t *testing.T, e *testenv.Env, kind auth.Kind, subject string) string {
	t.Helper()
	_, secret, err := e.Server.Auth.CreateToken(context.Background(), e.Server.DB, auth.NewToken{Kind: kind, Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}
