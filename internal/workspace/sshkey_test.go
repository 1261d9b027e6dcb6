package workspace_test

import (
	"strings"
	"sync"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

func TestWorkspaceSSHKey(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		newOrg(t, c, "other")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("web")})
		if err != nil {
			t.Fatal(err)
		}
		if w.SSHKey != nil {
			t.Fatalf("new workspace has key %+v", w.SSHKey)
		}
		k, err := c.SSHKeys.Create(ctx, "acme", tfe.SSHKeyCreateOptions{Name: tfe.String("deploy"), Value: tfe.String("private-key-material")})
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := c.SSHKeys.Create(ctx, "other", tfe.SSHKeyCreateOptions{Name: tfe.String("theirs"), Value: tfe.String("x")})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Workspaces.AssignSSHKey(ctx, w.ID, tfe.WorkspaceAssignSSHKeyOptions{SSHKeyID: tfe.String(k.ID)})
		if err != nil || got.SSHKey == nil || got.SSHKey.ID != k.ID {
			t.Fatalf("assign: %+v %v", got, err)
		}
		if r, err := c.Workspaces.ReadByID(ctx, w.ID); err != nil || r.SSHKey == nil || r.SSHKey.ID != k.ID {
			t.Fatalf("read after assign: %+v %v", r, err)
		}
		// A key of another organization, an unknown key and a malformed
		// body are refused and change nothing.
		for _, body := range []string{
			`{"data":{"type":"workspaces","attributes":{"id":"` + foreign.ID + `"}}}`,
			`{"data":{"type":"workspaces","attributes":{"id":"sshkey-doesnotexist1"}}}`,
			`{"data":{"type":"workspaces","attributes":{"id":"not-a-key"}}}`,
			`{"data":{"type":"workspaces","attributes":{"id":""}}}`,
			`{"data":{"type":"workspaces","attributes":{"id":7}}}`,
			`{"data":{"type":"workspaces","attributes":{}}}`,
		} {
			st, resp := raw(t, e, "PATCH", "/api/v2/workspaces/"+w.ID+"/relationships/ssh-key", body)
			if st != 422 || strings.Contains(resp, foreign.ID+`","type"`) {
				t.Errorf("%s: %d %s", body, st, resp)
			}
		}
		if st, _ := raw(t, e, "PATCH", "/api/v2/workspaces/ws-doesnotexist12/relationships/ssh-key", `{"data":{"attributes":{"id":"`+k.ID+`"}}}`); st != 404 {
			t.Errorf("unknown workspace: %d", st)
		}
		if r, _ := c.Workspaces.ReadByID(ctx, w.ID); r.SSHKey == nil || r.SSHKey.ID != k.ID {
			t.Fatalf("refused assignments changed the key: %+v", r.SSHKey)
		}
		// A member who is not an owner may not change it.
		bob := newUserClient(t, e, "bob", false)
		team, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
		if err != nil {
			t.Fatal(err)
		}
		// A team takes members of its organization only: bob joins first.
		m, err := c.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("bob@users.test")})
		if err != nil {
			t.Fatal(err)
		}
		e.Accept(t, m.ID)
		if err := c.TeamMembers.Add(ctx, team.ID, tfe.TeamMemberAddOptions{Usernames: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
		// Without access to the workspace bob would not even see it (404).
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: team, Workspace: w}); err != nil {
			t.Fatal(err)
		}
		if _, err := bob.Workspaces.UnassignSSHKey(ctx, w.ID); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("member unassign: %v", err)
		}
		// Unassign.
		got, err = c.Workspaces.UnassignSSHKey(ctx, w.ID)
		if err != nil || got.SSHKey != nil {
			t.Fatalf("unassign: %+v %v", got, err)
		}
		// Deleting a key unassigns it everywhere.
		w2, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("api")})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{w.ID, w2.ID} {
			if _, err := c.Workspaces.AssignSSHKey(ctx, id, tfe.WorkspaceAssignSSHKeyOptions{SSHKeyID: tfe.String(k.ID)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.SSHKeys.Delete(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		l, err := c.Workspaces.List(ctx, "acme", nil)
		if err != nil || len(l.Items) != 2 {
			t.Fatalf("list: %+v %v", l, err)
		}
		for _, x := range l.Items {
			if x.SSHKey != nil {
				t.Errorf("workspace %s still has deleted key %s", x.Name, x.SSHKey.ID)
			}
		}
	})
}

// TestWorkspaceSSHKeyDeleteRace assigns a key while it is being deleted:
// whichever wins, no workspace is left pointing at a deleted key.
func TestWorkspaceSSHKeyDeleteRace(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		var ws []*tfe.Workspace
		for _, n := range []string{"a", "b", "c", "d"} {
			w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(n)})
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		for round := 0; round < 5; round++ {
			k, err := c.SSHKeys.Create(ctx, "acme", tfe.SSHKeyCreateOptions{Name: tfe.String("k"), Value: tfe.String("v")})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, w := range ws {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = c.Workspaces.AssignSSHKey(ctx, w.ID, tfe.WorkspaceAssignSSHKeyOptions{SSHKeyID: tfe.String(k.ID)})
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.SSHKeys.Delete(ctx, k.ID); err != nil {
					t.Errorf("delete: %v", err)
				}
			}()
			wg.Wait()
			for _, w := range ws {
				r, err := c.Workspaces.ReadByID(ctx, w.ID)
				if err != nil {
					t.Fatal(err)
				}
				if r.SSHKey != nil && r.SSHKey.ID == k.ID {
					t.Fatalf("round %d: workspace %s points at deleted key %s", round, w.Name, k.ID)
				}
			}
		}
	})
}
