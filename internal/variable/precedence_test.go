package variable_test

import (
	"testing"

	tfe "github.com/hashicorp/go-tfe"
)

// TestEffectiveVariablesPrecedence builds one workspace with a variable of
// every source for the same key and checks which wins, removing the winner
// each time, through both EffectiveVariables and the all-vars endpoint.
func TestEffectiveVariablesPrecedence(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		prj := h.newProject(h.orgName)
		ws := h.newWorkspace(h.orgName, prj)
		other := h.newWorkspace(h.orgName, "") // in another project
		sets := h.Client.VariableSets

		type src struct {
			name               string
			global, priority   bool
			toProject, toWS    bool
			varsetID, variable string
		}
		// Listed from the expected winner down.
		srcs := []*src{
			{name: "prio-global", global: true, priority: true},
			{name: "prio-project", priority: true, toProject: true},
			{name: "prio-workspace", priority: true, toWS: true},
			{name: "workspace"},
			{name: "a-ws-set", toWS: true}, // same rank as z-ws-set: the name first in order wins
			{name: "z-ws-set", toWS: true},
			{name: "project-set", toProject: true},
			{name: "global-set", global: true},
		}
		for _, s := range srcs {
			if s.name == "workspace" {
				v, err := h.Client.Variables.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("x"), Value: tfe.String(s.name), Category: tfe.Category(tfe.CategoryTerraform)})
				if err != nil {
					t.Fatal(err)
				}
				s.variable = v.ID
				continue
			}
			vs, err := sets.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String(s.name), Global: tfe.Bool(s.global), Priority: tfe.Bool(s.priority)})
			if err != nil {
				t.Fatal(err)
			}
			s.varsetID = vs.ID
			v, err := h.Client.VariableSetVariables.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("x"), Value: tfe.String(s.name), Category: tfe.Category(tfe.CategoryTerraform)})
			if err != nil {
				t.Fatal(err)
			}
			s.variable = v.ID
			if s.toProject {
				if err := sets.ApplyToProjects(h.ctx, vs.ID, tfe.VariableSetApplyToProjectsOptions{Projects: []*tfe.Project{{ID: prj}}}); err != nil {
					t.Fatal(err)
				}
			}
			if s.toWS {
				if err := sets.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: ws.ID}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// An env variable with the same key never conflicts with terraform ones.
		if _, err := h.Client.Variables.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("x"), Value: tfe.String("env"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}

		winner := func() (string, int) {
			t.Helper()
			eff, err := h.svc.EffectiveVariablesOf(h.ctx, h.orgName, ws.ID, prj)
			if err != nil {
				t.Fatal(err)
			}
			all, err := h.Client.Variables.ListAll(h.ctx, ws.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(all.Items) != len(eff) {
				t.Fatalf("all-vars has %d, effective %d", len(all.Items), len(eff))
			}
			got, env := "", 0
			for i, v := range eff {
				if all.Items[i].ID != v.ID {
					t.Fatalf("all-vars and effective differ at %d", i)
				}
				if v.Category == "env" {
					env++
					if v.Value != "env" {
						t.Fatalf("env var = %q", v.Value)
					}
					continue
				}
				if got != "" {
					t.Fatalf("two terraform variables named x")
				}
				got = v.Value
			}
			return got, env
		}
		for i, s := range srcs {
			got, env := winner()
			if got != s.name || env != 1 {
				t.Fatalf("step %d: winner %q (env %d), want %q", i, got, env, s.name)
			}
			// Remove the winner for the next round.
			if s.varsetID != "" {
				if err := sets.Delete(h.ctx, s.varsetID); err != nil {
					t.Fatal(err)
				}
			} else if err := h.Client.Variables.Delete(h.ctx, ws.ID, s.variable); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := winner(); got != "" {
			t.Fatalf("after removing all: %q", got)
		}
		// The other workspace (different project, no direct sets) sees only
		// global sets; none are left.
		eff, err := h.svc.EffectiveVariablesOf(h.ctx, h.orgName, other.ID, other.ProjectID)
		if err != nil || len(eff) != 0 {
			t.Fatalf("other workspace: %v %v", eff, err)
		}
	})
}

// TestEffectiveVariablesScopes checks that sets reach only the workspaces
// they apply to, and that a set applied at two scopes counts once.
func TestEffectiveVariablesScopes(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		prj := h.newProject(h.orgName)
		in, out := h.newWorkspace(h.orgName, prj), h.newWorkspace(h.orgName, "")
		sets := h.Client.VariableSets
		vs, err := sets.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("p"), Global: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Client.VariableSetVariables.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("k"), Value: tfe.String("v"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}
		if err := sets.ApplyToProjects(h.ctx, vs.ID, tfe.VariableSetApplyToProjectsOptions{Projects: []*tfe.Project{{ID: prj}}}); err != nil {
			t.Fatal(err)
		}
		if err := sets.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: in.ID}}}); err != nil {
			t.Fatal(err)
		}
		eff, err := h.svc.EffectiveVariablesOf(h.ctx, h.orgName, in.ID, prj)
		if err != nil || len(eff) != 1 || eff[0].Value != "v" {
			t.Fatalf("in: %v %v", eff, err)
		}
		eff, err = h.svc.EffectiveVariablesOf(h.ctx, h.orgName, out.ID, out.ProjectID)
		if err != nil || len(eff) != 0 {
			t.Fatalf("out: %v %v", eff, err)
		}
	})
}
