package sshkey_test

import (
	"context"
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestReadingSSHKeysNeedsWhatTheListNeeds: an SSH key named by ID and the
// organization's list of keys are read by the same callers, HCP
// Terraform's documented ones: those who manage VCS settings and those who
// administer at least one workspace (directly, or through maintain or
// admin on a project), with a user or team token. Other members and the
// organization's token get 403 for both; callers of another organization
// 404.
func TestReadingSSHKeysNeedsWhatTheListNeeds(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		other := testenv.NewOrg(t, c, "other").Name
		ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		prj, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: "infra"})
		if err != nil {
			t.Fatal(err)
		}
		key, err := c.SSHKeys.Create(ctx, org, tfe.SSHKeyCreateOptions{Name: tfe.String("deploy"),
			Value: tfe.String("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n")})
		if err != nil {
			t.Fatal(err)
		}
		orgToken, err := c.OrganizationTokens.Create(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		user := func(org, name string, access *tfe.OrganizationAccessOptions, grant func(*tfe.Team)) string {
			t.Helper()
			var teams []*tfe.Team
			if access != nil || grant != nil {
				tm, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: access})
				if err != nil {
					t.Fatal(err)
				}
				if grant != nil {
					grant(tm)
				}
				teams = append(teams, tm)
			}
			_, m := e.UserClient(t, org, name+"@"+org+".test", teams...)
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			return secret
		}
		for _, tc := range []struct {
			who   string
			token string
			want  int
		}{
			{"a member with read access to a workspace", user(org, "reader", nil, func(tm *tfe.Team) {
				if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: tm, Workspace: ws}); err != nil {
					t.Fatal(err)
				}
			}), http.StatusForbidden},
			{"a member of no team", user(org, "nobody", nil, nil), http.StatusForbidden},
			{"a workspace admin", user(org, "wsadmin", nil, func(tm *tfe.Team) {
				if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessAdmin), Team: tm, Workspace: ws}); err != nil {
					t.Fatal(err)
				}
			}), http.StatusOK},
			{"a project maintainer", user(org, "maintainer", nil, func(tm *tfe.Team) {
				if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessMaintain, Team: tm, Project: prj}); err != nil {
					t.Fatal(err)
				}
			}), http.StatusOK},
			{"a VCS settings manager", user(org, "vcs", &tfe.OrganizationAccessOptions{ManageVCSSettings: tfe.Bool(true)}, nil), http.StatusOK},
			{"a member of another organization", user(other, "stranger", nil, nil), http.StatusNotFound},
			{"the organization's token", orgToken.Token, http.StatusForbidden},
		} {
			status, body := e.API(t, tc.token, "GET", "/api/v2/organizations/"+org+"/ssh-keys", nil)
			if status != tc.want {
				t.Errorf("%s listing the SSH keys: %d %s, want %d", tc.who, status, body, tc.want)
			}
			status, body = e.API(t, tc.token, "GET", "/api/v2/ssh-keys/"+key.ID, nil)
			if status != tc.want {
				t.Errorf("%s reading the SSH key: %d %s, want %d", tc.who, status, body, tc.want)
			}
		}
	})
}

// A VCS settings manager's own user token renames and deletes a key.
// Both asked the authorization model inside their transaction, where it
// read the user's teams on a second connection (refused by the
// transaction guard that make test turns on: a 500).
func TestVCSManagerChangesSSHKeys(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		key, err := c.SSHKeys.Create(ctx, org, tfe.SSHKeyCreateOptions{Name: tfe.String("deploy"), Value: tfe.String("private-key-material")})
		if err != nil {
			t.Fatal(err)
		}
		vcs, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("vcs"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageVCSSettings: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		vera, _ := e.UserClient(t, org, "vera@acme.test", vcs)
		if k, err := vera.SSHKeys.Update(ctx, key.ID, tfe.SSHKeyUpdateOptions{Name: tfe.String("deploy-2")}); err != nil || k.Name != "deploy-2" {
			t.Fatalf("vera's rename: %+v, %v", k, err)
		}
		if err := vera.SSHKeys.Delete(ctx, key.ID); err != nil {
			t.Fatalf("vera's delete: %v", err)
		}
		if _, err := c.SSHKeys.Read(ctx, key.ID); err == nil {
			t.Error("the key vera deleted is still there")
		}
	})
}
