package workspace_test

import (
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestMovingAWorkspaceNeedsMoveAndCreateInTheDestination: moving a
// workspace to another project needs, as in HCP Terraform, the move
// permission on the workspace (admin includes it) and the right to create
// workspaces in the destination project. An admin of one workspace cannot
// move it into a project she cannot see (404, as for a project that does
// not exist: the workspace would take that project's variable sets into
// her runs) nor into one she may only read (403); the refused update
// changes nothing, not even its other attributes. With create in the
// destination the move is made. Creating a workspace in a project needs
// the right to create workspaces there.
func TestMovingAWorkspaceNeedsMoveAndCreateInTheDestination(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := newOrg(t, c, "acme").Name
		project := func(name string) *tfe.Project {
			p, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		hidden, readable, landing := project("hidden"), project("readable"), project("landing")
		wsmove, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("wsmove")})
		if err != nil {
			t.Fatal(err)
		}
		home := wsmove.Project.ID
		movers, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("movers")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessAdmin), Team: movers, Workspace: wsmove}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: movers, Project: readable}); err != nil {
			t.Fatal(err)
		}
		mia, _ := e.UserClient(t, org, "mia@acme.test", movers)

		stays := func(what string) {
			t.Helper()
			w, err := c.Workspaces.ReadByID(ctx, wsmove.ID)
			if err != nil {
				t.Fatal(err)
			}
			if w.Project.ID != home || w.Name != "wsmove" {
				t.Fatalf("after %s the workspace is %q in %s, want wsmove in %s", what, w.Name, w.Project.ID, home)
			}
		}
		_, err = mia.Workspaces.UpdateByID(ctx, wsmove.ID, tfe.WorkspaceUpdateOptions{Name: tfe.String("renamed"), Project: &tfe.Project{ID: hidden.ID}})
		testenv.WantErr(t, "a workspace admin moving it into a project she cannot see", err, tfe.ErrResourceNotFound)
		stays("a move into a hidden project")
		_, err = mia.Workspaces.UpdateByID(ctx, wsmove.ID, tfe.WorkspaceUpdateOptions{Project: &tfe.Project{ID: "prj-doesnotexist"}})
		testenv.WantErr(t, "a workspace admin moving it into a project that does not exist", err, tfe.ErrResourceNotFound)
		_, err = mia.Workspaces.UpdateByID(ctx, wsmove.ID, tfe.WorkspaceUpdateOptions{Name: tfe.String("renamed"), Project: &tfe.Project{ID: readable.ID}})
		testenv.WantStatus(t, "a workspace admin moving it into a project she may only read", err, "insufficient permissions to create workspaces in this project")
		stays("a move into a read-only project")
		// Naming the project it is in is no move.
		if _, err := mia.Workspaces.UpdateByID(ctx, wsmove.ID, tfe.WorkspaceUpdateOptions{Description: tfe.String("d"), Project: &tfe.Project{ID: home}}); err != nil {
			t.Fatalf("a workspace admin naming its own project: %v", err)
		}

		// With create in the destination, the move is made.
		yes := true
		if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom, Team: movers, Project: landing,
			WorkspaceAccess: &tfe.TeamProjectAccessWorkspacePermissionsOptions{Create: &yes}}); err != nil {
			t.Fatal(err)
		}
		w, err := mia.Workspaces.UpdateByID(ctx, wsmove.ID, tfe.WorkspaceUpdateOptions{Project: &tfe.Project{ID: landing.ID}})
		if err != nil || w.Project.ID != landing.ID {
			t.Fatalf("a workspace admin moving it into a project she may create workspaces in: %v, %v", w, err)
		}

		// Creating a workspace in a project needs create there.
		_, err = mia.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("intruder"), Project: &tfe.Project{ID: hidden.ID}})
		if err == nil {
			t.Fatal("a member without create in the hidden project created a workspace in it")
		}
		status, body := e.API(t, "", "GET", "/api/v2/organizations/"+org+"/workspaces/intruder", nil)
		if status != http.StatusNotFound {
			t.Fatalf("the refused workspace exists: %d %s", status, body)
		}
	})
}

// TestMovePermissionMovesWithoutAdmin: a project grant's workspace-access
// move lets a team move the project's workspaces, as in HCP Terraform,
// with create in the destination, and without admin on the workspace: an
// update of nothing but the project asks the move permission, through
// either route, for a member and for the team's token. Anything else in
// the same update still needs the right to change the workspace's
// settings, which the workspace's permissions (can-update) deny; a
// project without create is no destination, and the destination's create
// alone moves nothing out of it.
func TestMovePermissionMovesWithoutAdmin(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := newOrg(t, c, "acme").Name
		project := func(name string) *tfe.Project {
			p, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		source, landing, closed := project("source"), project("landing"), project("closed")
		workspace := func(name string) *tfe.Workspace {
			w, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name), Project: source})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		byMember, byToken := workspace("by-member"), workspace("by-token")
		movers, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("movers"), Visibility: tfe.String("organization")})
		if err != nil {
			t.Fatal(err)
		}
		yes := true
		grant := func(p *tfe.Project, w tfe.TeamProjectAccessWorkspacePermissionsOptions) {
			if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom, Team: movers, Project: p,
				WorkspaceAccess: &w}); err != nil {
				t.Fatal(err)
			}
		}
		grant(source, tfe.TeamProjectAccessWorkspacePermissionsOptions{Move: &yes})
		grant(landing, tfe.TeamProjectAccessWorkspacePermissionsOptions{Create: &yes})
		mia, _ := e.UserClient(t, org, "mia@acme.test", movers)
		tok, err := c.TeamTokens.Create(ctx, movers.ID)
		if err != nil {
			t.Fatal(err)
		}
		team := e.NewClient(t, tok.Token)

		in := func(w *tfe.Workspace, want *tfe.Project, what string) {
			t.Helper()
			got, err := c.Workspaces.ReadByID(ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Project.ID != want.ID || got.Name != w.Name || got.Description != "" {
				t.Fatalf("after %s the workspace is %q (%q) in %s, want %q in %s", what, got.Name, got.Description, got.Project.ID, w.Name, want.ID)
			}
		}
		// What the workspace's permissions say: no settings.
		w, err := mia.Workspaces.ReadByID(ctx, byMember.ID)
		if err != nil {
			t.Fatal(err)
		}
		if w.Permissions.CanUpdate {
			t.Fatalf("a mover sees can-update on a workspace she may only move")
		}
		_, err = mia.Workspaces.UpdateByID(ctx, byMember.ID, tfe.WorkspaceUpdateOptions{Description: tfe.String("d")})
		testenv.WantStatus(t, "a mover changing a setting", err, "insufficient permissions to change this workspace's settings")
		_, err = mia.Workspaces.UpdateByID(ctx, byMember.ID, tfe.WorkspaceUpdateOptions{Description: tfe.String("d"), Project: &tfe.Project{ID: landing.ID}})
		testenv.WantStatus(t, "a mover moving the workspace and changing a setting", err, "insufficient permissions to change this workspace's settings")
		in(byMember, source, "refused updates")
		_, err = mia.Workspaces.UpdateByID(ctx, byMember.ID, tfe.WorkspaceUpdateOptions{Project: &tfe.Project{ID: closed.ID}})
		testenv.WantErr(t, "a mover moving the workspace into a project she cannot see", err, tfe.ErrResourceNotFound)
		in(byMember, source, "a move into a hidden project")

		// Moved, by ID and by name, by a member and by the team's token.
		if w, err := mia.Workspaces.UpdateByID(ctx, byMember.ID, tfe.WorkspaceUpdateOptions{Project: &tfe.Project{ID: landing.ID}}); err != nil || w.Project.ID != landing.ID {
			t.Fatalf("a member of a team with move moving a workspace: %v, %v", w, err)
		}
		in(byMember, landing, "the member's move")
		if w, err := team.Workspaces.Update(ctx, org, byToken.Name, tfe.WorkspaceUpdateOptions{Project: &tfe.Project{ID: landing.ID}}); err != nil || w.Project.ID != landing.ID {
			t.Fatalf("the token of a team with move moving a workspace: %v, %v", w, err)
		}
		in(byToken, landing, "the token's move")

		// Out of landing, where the team only creates, nothing moves.
		_, err = team.Workspaces.UpdateByID(ctx, byToken.ID, tfe.WorkspaceUpdateOptions{Project: &tfe.Project{ID: source.ID}})
		testenv.WantStatus(t, "moving a workspace out of a project without move", err, "insufficient permissions to move this workspace")
		in(byToken, landing, "a move without move")
	})
}

// TestWorkspaceUpdateIsDecidedOnce: the workspace service alone decides a
// workspace's update, on the decoded options (a move is recognized there
// and nowhere else); the API's guard asks only that the caller sees the
// workspace. Through either route: a member who cannot see the workspace
// is told it is not found, whatever the body, before the body is read (a
// bad body is no way to learn it exists); a team with write access is
// refused a setting (update) and a move (move) alike, and told of a bad
// body as anyone who sees the workspace is; a team with the move
// permission moves the workspace with an update that names nothing but the
// project, an attribute the API does not know among it (it changes
// nothing), and is refused one that changes a setting too.
func TestWorkspaceUpdateIsDecidedOnce(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := newOrg(t, c, "acme").Name
		project := func(name string) *tfe.Project {
			p, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		source, landing := project("source"), project("landing")
		ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app"), Project: source})
		if err != nil {
			t.Fatal(err)
		}
		team := func(name string) (*tfe.Team, string) {
			tm, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String(name), Visibility: tfe.String("organization")})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := c.TeamTokens.Create(ctx, tm.ID)
			if err != nil {
				t.Fatal(err)
			}
			return tm, tok.Token
		}
		writers, writeToken := team("writers")
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessWrite), Team: writers, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		movers, moveToken := team("movers")
		yes := true
		for p, w := range map[*tfe.Project]tfe.TeamProjectAccessWorkspacePermissionsOptions{source: {Move: &yes}, landing: {Create: &yes}} {
			if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom, Team: movers, Project: p, WorkspaceAccess: &w}); err != nil {
				t.Fatal(err)
			}
		}
		_, nobodyToken := team("bystanders")

		body := func(attrs string, project *tfe.Project) string {
			rel := ""
			if project != nil {
				rel = `,"relationships":{"project":{"data":{"type":"projects","id":"` + project.ID + `"}}}`
			}
			return `{"data":{"type":"workspaces","attributes":{` + attrs + `}` + rel + `}}`
		}
		const bad = `{"data":{"type":"workspaces","attributes":{"auto-apply":"yes"}}}`
		paths := []string{"/api/v2/workspaces/" + ws.ID, "/api/v2/organizations/" + org + "/workspaces/app"}
		for _, path := range paths {
			for _, c := range []struct {
				what, token, body string
				status            int
				says              string
			}{
				{"a team that cannot see it changing a setting", nobodyToken, body(`"description":"d"`, nil), http.StatusNotFound, "not found"},
				{"a team that cannot see it moving it", nobodyToken, body("", landing), http.StatusNotFound, "not found"},
				{"a team that cannot see it sending a bad body", nobodyToken, bad, http.StatusNotFound, "not found"},
				{"a team with write changing a setting", writeToken, body(`"description":"d"`, nil), http.StatusForbidden, "insufficient permissions to change this workspace's settings"},
				{"a team with write moving it", writeToken, body("", landing), http.StatusForbidden, "insufficient permissions to move this workspace"},
				{"a team with write sending a bad body", writeToken, bad, http.StatusUnprocessableEntity, "auto-apply"},
				{"a team with move moving it and changing a setting", moveToken, body(`"description":"d"`, landing), http.StatusForbidden, "insufficient permissions to change this workspace's settings"},
			} {
				status, got := e.API(t, c.token, "PATCH", path, c.body)
				if status != c.status || !strings.Contains(string(got), c.says) {
					t.Errorf("PATCH %s, %s: %d %s; want %d saying %q", path, c.what, status, got, c.status, c.says)
				}
			}
		}
		w, err := c.Workspaces.ReadByID(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		if w.Project.ID != source.ID || w.Description != "" {
			t.Fatalf("after the refused updates the workspace is in %s (%q), want %s unchanged", w.Project.ID, w.Description, source.ID)
		}

		// Nothing but the project, with an attribute the API does not
		// know: a move.
		status, got := e.API(t, moveToken, "PATCH", paths[0], body(`"not-an-attribute":true`, landing))
		if status != http.StatusOK {
			t.Fatalf("a team with move moving the workspace: %d %s", status, got)
		}
		if w, err = c.Workspaces.ReadByID(ctx, ws.ID); err != nil || w.Project.ID != landing.ID || w.Description != "" {
			t.Fatalf("after the move the workspace is %+v (%v), want it in %s unchanged", w, err, landing.ID)
		}
	})
}
