package variable_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
)

func TestVariableSetsCRUD(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		c := h.Client.VariableSets
		vs, err := c.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("alpha"), Description: tfe.String("d"), Global: tfe.Bool(false), Priority: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if vs.Name != "alpha" || vs.Description != "d" || vs.Global || !vs.Priority || vs.Organization == nil || vs.Organization.Name != h.orgName {
			t.Fatalf("created %+v", vs)
		}
		if vs.Parent == nil || vs.Parent.Organization == nil || vs.Parent.Organization.Name != h.orgName {
			t.Fatalf("parent %+v", vs.Parent)
		}
		read, err := c.Read(h.ctx, vs.ID, nil)
		if err != nil || read.Name != "alpha" || read.ID != vs.ID {
			t.Fatalf("read %+v %v", read, err)
		}
		if _, err := c.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("alpha"), Global: tfe.Bool(false)}); err == nil || !strings.Contains(err.Error(), "has already been taken") {
			t.Fatalf("duplicate name: %v", err)
		}
		beta, err := c.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("beta"), Global: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Update(h.ctx, beta.ID, &tfe.VariableSetUpdateOptions{Name: tfe.String("alpha")}); err == nil {
			t.Fatal("renamed onto a taken name")
		}
		up, err := c.Update(h.ctx, vs.ID, &tfe.VariableSetUpdateOptions{Name: tfe.String("gamma"), Global: tfe.Bool(true), Priority: tfe.Bool(false)})
		if err != nil || up.Name != "gamma" || !up.Global || up.Priority || up.Description != "d" {
			t.Fatalf("update %+v %v", up, err)
		}
		list, err := c.List(h.ctx, h.orgName, nil)
		if err != nil || list.TotalCount != 2 || list.Items[0].Name != "beta" {
			t.Fatalf("list %+v %v", list, err)
		}
		q, err := c.List(h.ctx, h.orgName, &tfe.VariableSetListOptions{Query: "GAM"})
		if err != nil || len(q.Items) != 1 || q.Items[0].ID != vs.ID {
			t.Fatalf("query %+v %v", q, err)
		}
		page, err := c.List(h.ctx, h.orgName, &tfe.VariableSetListOptions{ListOptions: tfe.ListOptions{PageNumber: 999, PageSize: 100}})
		if err != nil || len(page.Items) != 0 || page.CurrentPage != 999 || page.TotalCount != 2 {
			t.Fatalf("page 999 %+v %v", page, err)
		}
		page, err = c.List(h.ctx, h.orgName, &tfe.VariableSetListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 1}})
		if err != nil || len(page.Items) != 1 || page.Items[0].Name != "gamma" || page.TotalCount != 2 {
			t.Fatalf("page 2 of 1: %+v %v", page, err)
		}
		if q, err := c.List(h.ctx, h.orgName, &tfe.VariableSetListOptions{Query: "%"}); err != nil || len(q.Items) != 0 {
			t.Fatalf("q=%% matches %d sets (LIKE's wildcard must be literal): %v", len(q.Items), err)
		}
		// Wrong types and missing names are 422s.
		for _, attrs := range []map[string]any{
			{"name": "x", "global": "yes"},
			{"name": 3, "global": false},
			{"global": false},
			{"name": "  ", "global": false},
		} {
			st, _, raw := h.do(http.MethodPost, "organizations/"+h.orgName+"/varsets", map[string]any{"data": map[string]any{"type": "varsets", "attributes": attrs}})
			if st != 422 {
				t.Errorf("create %v: %d %s", attrs, st, raw)
			}
		}
		// Counts.
		ws := h.newWorkspace(h.orgName, "")
		if _, err := h.Client.VariableSetVariables.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("a"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: ws.ID}}}); err != nil {
			t.Fatal(err)
		}
		_, doc, _ := h.do(http.MethodGet, "varsets/"+vs.ID, nil)
		attrs := doc["data"].(map[string]any)["attributes"].(map[string]any)
		if attrs["var-count"] != 1.0 || attrs["workspace-count"] != 1.0 || attrs["project-count"] != 0.0 || attrs["updated-at"] == nil {
			t.Errorf("counts %v", attrs)
		}
		// Delete removes it and its variables.
		if err := c.Delete(h.ctx, vs.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(h.ctx, vs.ID, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("read deleted: %v", err)
		}
		if st, _, _ := h.do(http.MethodGet, "varsets/"+vs.ID+"/relationships/vars", nil); st != 404 {
			t.Errorf("vars of deleted set: %d", st)
		}
		for _, p := range []string{"varsets/nope", "varsets/varset-nope", "projects/nope/varsets", "workspaces/nope/varsets"} {
			if st, _, _ := h.do(http.MethodGet, p, nil); st != 404 {
				t.Errorf("GET %s = %d", p, st)
			}
		}
	})
}

func TestVariableSetsApplyAndRemove(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		c := h.Client.VariableSets
		prj := h.newProject(h.orgName)
		w1, w2 := h.newWorkspace(h.orgName, prj), h.newWorkspace(h.orgName, "")
		vs, err := c.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("s"), Global: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		// go-tfe sends whole workspace objects; attributes are ignored.
		if err := c.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: w1.ID, Name: "ignored"}, {ID: w2.ID}}}); err != nil {
			t.Fatal(err)
		}
		// Applying twice is harmless.
		if err := c.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: w1.ID}}}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Read(h.ctx, vs.ID, nil)
		if err != nil || len(got.Workspaces) != 2 {
			t.Fatalf("after apply %+v %v", got, err)
		}
		if err := c.RemoveFromWorkspaces(h.ctx, vs.ID, &tfe.VariableSetRemoveFromWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: w1.ID}}}); err != nil {
			t.Fatal(err)
		}
		got, _ = c.Read(h.ctx, vs.ID, nil)
		if len(got.Workspaces) != 1 || got.Workspaces[0].ID != w2.ID {
			t.Fatalf("after remove %+v", got.Workspaces)
		}
		// Unknown workspace: 404 and nothing changes.
		if err := c.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: w1.ID}, {ID: "ws-doesnotexist1"}}}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("unknown workspace: %v", err)
		}
		got, _ = c.Read(h.ctx, vs.ID, nil)
		if len(got.Workspaces) != 1 {
			t.Fatalf("half-applied: %+v", got.Workspaces)
		}
		// Projects.
		if err := c.ApplyToProjects(h.ctx, vs.ID, tfe.VariableSetApplyToProjectsOptions{Projects: []*tfe.Project{{ID: prj}}}); err != nil {
			t.Fatal(err)
		}
		got, _ = c.Read(h.ctx, vs.ID, nil)
		if len(got.Projects) != 1 || got.Projects[0].ID != prj {
			t.Fatalf("projects %+v", got.Projects)
		}
		pl, err := c.ListForProject(h.ctx, prj, nil)
		if err != nil || len(pl.Items) != 1 || len(pl.Items[0].Projects) != 1 || pl.Items[0].Projects[0].ID != prj {
			t.Fatalf("list for project (with the set's projects) %+v %v", pl, err)
		}
		// w1 gets the set through its project.
		wl, err := c.ListForWorkspace(h.ctx, w1.ID, nil)
		if err != nil || len(wl.Items) != 1 {
			t.Fatalf("list for w1 %+v %v", wl, err)
		}
		if err := c.RemoveFromProjects(h.ctx, vs.ID, tfe.VariableSetRemoveFromProjectsOptions{Projects: []*tfe.Project{{ID: prj}}}); err != nil {
			t.Fatal(err)
		}
		if wl, _ = c.ListForWorkspace(h.ctx, w1.ID, nil); len(wl.Items) != 0 {
			t.Fatalf("w1 still has %d sets", len(wl.Items))
		}
		// UpdateWorkspaces replaces the list.
		up, err := c.UpdateWorkspaces(h.ctx, vs.ID, &tfe.VariableSetUpdateWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: w1.ID}}})
		if err != nil || len(up.Workspaces) != 1 || up.Workspaces[0].ID != w1.ID {
			t.Fatalf("update workspaces %+v %v", up, err)
		}
		up, err = c.UpdateWorkspaces(h.ctx, vs.ID, &tfe.VariableSetUpdateWorkspacesOptions{Workspaces: []*tfe.Workspace{}})
		if err != nil || len(up.Workspaces) != 0 {
			t.Fatalf("clear workspaces %+v %v", up, err)
		}
		// Elements without an id are refused.
		st, _, _ := h.do(http.MethodPost, "varsets/"+vs.ID+"/relationships/workspaces", map[string]any{"data": []any{map[string]any{"type": "workspaces"}}})
		if st != 422 {
			t.Errorf("element without id: %d", st)
		}
	})
}

func TestVariableSetVariables(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		vs, err := h.Client.VariableSets.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("s"), Global: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		c := h.Client.VariableSetVariables
		v, err := c.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("k"), Value: tfe.String("v"), Category: tfe.Category(tfe.CategoryTerraform), HCL: tfe.Bool(true)})
		if err != nil || v.Value != "v" || !v.HCL || v.VariableSet == nil || v.VariableSet.ID != vs.ID {
			t.Fatalf("create %+v %v", v, err)
		}
		if _, err := c.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("k"), Category: tfe.Category(tfe.CategoryTerraform)}); err == nil || !strings.Contains(err.Error(), "has already been taken") {
			t.Fatalf("duplicate: %v", err)
		}
		l, err := c.List(h.ctx, vs.ID, nil)
		if err != nil || len(l.Items) != 1 || l.Items[0].ID != v.ID {
			t.Fatalf("list %+v %v", l, err)
		}
		up, err := c.Update(h.ctx, vs.ID, v.ID, &tfe.VariableSetVariableUpdateOptions{Value: tfe.String("w")})
		if err != nil || up.Value != "w" || up.VersionID == v.VersionID {
			t.Fatalf("update %+v %v", up, err)
		}
		read, err := c.Read(h.ctx, vs.ID, v.ID)
		if err != nil || read.Value != "w" {
			t.Fatalf("read %+v %v", read, err)
		}
		// A variable is only reachable through its own set.
		other, _ := h.Client.VariableSets.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("o"), Global: tfe.Bool(false)})
		if _, err := c.Read(h.ctx, other.ID, v.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("through other set: %v", err)
		}
		if err := c.Delete(h.ctx, vs.ID, v.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(h.ctx, vs.ID, v.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	})
}

// A deleted organization takes its variable sets and variables with it, so
// a new organization of the same name starts empty.
func TestOrganizationDeleteRemovesVariables(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ws := h.newWorkspace(h.orgName, "")
		if _, err := h.Client.Variables.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("k"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}
		vs, err := h.Client.VariableSets.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("s"), Global: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Client.VariableSetVariables.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("k"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}
		if err := h.env.Client.Organizations.Delete(h.ctx, h.orgName); err != nil {
			t.Fatal(err)
		}
		if _, err := h.env.Client.Organizations.Create(h.ctx, tfe.OrganizationCreateOptions{Name: tfe.String(h.orgName), Email: tfe.String("a@example.com")}); err != nil {
			t.Fatal(err)
		}
		l, err := h.Client.VariableSets.List(h.ctx, h.orgName, nil)
		if err != nil || l.TotalCount != 0 {
			t.Fatalf("varsets after recreate: %+v %v", l, err)
		}
		if _, err := h.Client.VariableSets.Read(h.ctx, vs.ID, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("old set: %v", err)
		}
		var n int
		if err := h.env.Server.DB.QueryRow(h.ctx, `SELECT COUNT(*) FROM variables WHERE organization_name = ?`, h.orgName).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d variables left, %v", n, err)
		}
	})
}
