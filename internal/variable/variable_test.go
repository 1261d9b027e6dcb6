package variable_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
)

func TestWorkspaceVariablesCRUD(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ws := h.newWorkspace(h.orgName, "")
		c := h.Client.Variables
		v, err := c.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{
			Key: tfe.String("region"), Value: tfe.String("eu-west-1"), Description: tfe.String("where"),
			Category: tfe.Category(tfe.CategoryTerraform), HCL: tfe.Bool(false),
		})
		if err != nil {
			t.Fatal(err)
		}
		if v.Key != "region" || v.Value != "eu-west-1" || v.Description != "where" || v.Category != tfe.CategoryTerraform || v.VersionID == "" {
			t.Fatalf("created %+v", v)
		}
		if v.Workspace == nil || v.Workspace.ID != ws.ID {
			t.Fatalf("configurable = %+v, want workspace %s", v.Workspace, ws.ID)
		}
		got, err := c.Read(h.ctx, ws.ID, v.ID)
		if err != nil || got.Value != "eu-west-1" || got.VersionID != v.VersionID {
			t.Fatalf("read %+v, %v", got, err)
		}
		// Every update, even an empty one, gets a new version.
		up, err := c.Update(h.ctx, ws.ID, v.ID, tfe.VariableUpdateOptions{})
		if err != nil || up.VersionID == v.VersionID || up.Value != "eu-west-1" {
			t.Fatalf("empty update: %+v, %v", up, err)
		}
		up2, err := c.Update(h.ctx, ws.ID, v.ID, tfe.VariableUpdateOptions{Value: tfe.String("us-east-1"), HCL: tfe.Bool(true)})
		if err != nil || up2.Value != "us-east-1" || !up2.HCL || up2.VersionID == up.VersionID {
			t.Fatalf("update: %+v, %v", up2, err)
		}
		// Same key in the other category is a different variable.
		if _, err := c.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("region"), Value: tfe.String("x"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatalf("same key as env: %v", err)
		}
		list, err := c.List(h.ctx, ws.ID, nil)
		if err != nil || len(list.Items) != 2 || list.TotalCount != 2 {
			t.Fatalf("list: %+v, %v", list, err)
		}
		if err := c.Delete(h.ctx, ws.ID, v.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(h.ctx, ws.ID, v.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("read after delete: %v", err)
		}
		if err := c.Delete(h.ctx, ws.ID, v.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		// Malformed IDs are 404s, never 5xx.
		for _, p := range []string{"workspaces/nope/vars", "workspaces/" + ws.ID + "/vars/nope", "workspaces/ws-unknown123/all-vars"} {
			if st, _, _ := h.do(http.MethodGet, p, nil); st != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, st)
			}
		}
	})
}

func TestWorkspaceVariablesValidation(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ws := h.newWorkspace(h.orgName, "")
		c := h.Client.Variables
		if _, err := c.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("dup"), Category: tfe.Category(tfe.CategoryTerraform)}); err != nil {
			t.Fatal(err)
		}
		path := "workspaces/" + ws.ID + "/vars"
		body := func(attrs map[string]any) map[string]any {
			return map[string]any{"data": map[string]any{"type": "vars", "attributes": attrs}}
		}
		cases := []struct {
			name   string
			attrs  map[string]any
			status int
			detail string
		}{
			{"duplicate key", map[string]any{"key": "dup", "category": "terraform"}, 422, "has already been taken"},
			{"missing key", map[string]any{"category": "terraform"}, 422, "key is required"},
			{"missing category", map[string]any{"key": "k"}, 422, "category is required"},
			{"policy-set category", map[string]any{"key": "k", "category": "policy-set"}, 422, "category"},
			{"bad terraform key", map[string]any{"key": "no spaces", "category": "terraform"}, 422, "invalid"},
			{"bad env key", map[string]any{"key": "A=B", "category": "env"}, 422, "invalid"},
			{"env key with a space", map[string]any{"key": "MY VAR", "category": "env"}, 422, "cannot contain '=', spaces"},
			{"env key with a tab", map[string]any{"key": "MY\tVAR", "category": "env"}, 422, "invalid"},
			{"env key with a newline", map[string]any{"key": "MY\nVAR", "category": "env"}, 422, "invalid"},
			{"key of wrong type", map[string]any{"key": 7, "category": "terraform"}, 422, "key"},
			{"hcl of wrong type", map[string]any{"key": "k", "category": "terraform", "hcl": "true"}, 422, "hcl"},
			{"sensitive of wrong type", map[string]any{"key": "k", "category": "terraform", "sensitive": 1}, 422, "sensitive"},
			{"description too long", map[string]any{"key": "k", "category": "terraform", "description": strings.Repeat("d", 513)}, 422, "too long"},
		}
		for _, tc := range cases {
			st, _, raw := h.do(http.MethodPost, path, body(tc.attrs))
			if st != tc.status || !strings.Contains(raw, tc.detail) {
				t.Errorf("%s: %d %s, want %d containing %q", tc.name, st, raw, tc.status, tc.detail)
			}
		}
		// Nothing half-written.
		list, err := c.List(h.ctx, ws.ID, nil)
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("after failed creates: %d items, %v", len(list.Items), err)
		}
		// An update into a taken key is refused too.
		other, err := c.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("other"), Category: tfe.Category(tfe.CategoryTerraform)})
		if err != nil {
			t.Fatal(err)
		}
		st, _, raw := h.do(http.MethodPatch, path+"/"+other.ID, body(map[string]any{"key": "dup"}))
		if st != 422 || !strings.Contains(raw, "has already been taken") {
			t.Errorf("rename onto taken key: %d %s", st, raw)
		}
	})
}

func TestSensitiveValuesNeverReturned(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		const secret = "s3cr3t-value-xyz"
		ws := h.newWorkspace(h.orgName, "")
		c := h.Client.Variables
		v, err := c.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("token"), Value: tfe.String(secret), Category: tfe.Category(tfe.CategoryEnv), Sensitive: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if v.Value != "" || !v.Sensitive {
			t.Fatalf("create returned %q sensitive=%v", v.Value, v.Sensitive)
		}
		vs, err := h.Client.VariableSets.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("creds"), Global: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		vsv, err := h.Client.VariableSetVariables.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("pw"), Value: tfe.String(secret), Category: tfe.Category(tfe.CategoryTerraform), Sensitive: tfe.Bool(true)})
		if err != nil || vsv.Value != "" {
			t.Fatalf("varset var create: %+v %v", vsv, err)
		}
		if err := h.Client.VariableSets.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: ws.ID}}}); err != nil {
			t.Fatal(err)
		}
		// Update the value: still hidden, and the new value is stored.
		if _, err := c.Update(h.ctx, ws.ID, v.ID, tfe.VariableUpdateOptions{Value: tfe.String(secret + "2")}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{
			"workspaces/" + ws.ID + "/vars",
			"workspaces/" + ws.ID + "/vars/" + v.ID,
			"workspaces/" + ws.ID + "/all-vars",
			"varsets/" + vs.ID + "/relationships/vars",
			"varsets/" + vs.ID + "/relationships/vars/" + vsv.ID,
			"varsets/" + vs.ID + "?include=vars",
			"organizations/" + h.orgName + "/varsets?include=vars",
		} {
			st, _, raw := h.do(http.MethodGet, p, nil)
			if st != 200 || strings.Contains(raw, secret) {
				t.Errorf("GET %s: %d, leaks the value: %v", p, st, strings.Contains(raw, secret))
			}
			if strings.Contains(p, "vars") && !strings.Contains(raw, `"value":null`) {
				t.Errorf("GET %s: want value null, got %s", p, raw)
			}
		}
		st, _, raw := h.do(http.MethodPatch, "workspaces/"+ws.ID+"/vars/"+v.ID, map[string]any{"data": map[string]any{"type": "vars", "attributes": map[string]any{"value": secret + "3"}}})
		if st != 200 || strings.Contains(raw, secret) {
			t.Errorf("PATCH leaks value: %d", st)
		}
		// A sensitive variable cannot be made visible.
		_, err = c.Update(h.ctx, ws.ID, v.ID, tfe.VariableUpdateOptions{Sensitive: tfe.Bool(false)})
		if err == nil || !strings.Contains(err.Error(), "sensitive") {
			t.Errorf("unsensitive: %v", err)
		}
		if _, err := h.Client.VariableSetVariables.Update(h.ctx, vs.ID, vsv.ID, &tfe.VariableSetVariableUpdateOptions{Sensitive: tfe.Bool(false)}); err == nil {
			t.Errorf("varset var made non-sensitive")
		}
		// The runner still gets the values.
		eff, err := h.svc.EffectiveVariablesOf(h.ctx, h.orgName, ws.ID, ws.ProjectID)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range eff {
			got[e.Key] = e.Value
		}
		if got["token"] != secret+"3" || got["pw"] != secret {
			t.Errorf("effective values = %v", got)
		}
	})
}

func TestCrossOrganizationIsNotFound(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		// The admin's organization, with a workspace, a variable and a set.
		ws := h.newWorkspace(h.orgName, "")
		v, err := h.Client.Variables.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("k"), Value: tfe.String("v"), Category: tfe.Category(tfe.CategoryTerraform)})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := h.Client.VariableSets.Create(h.ctx, h.orgName, &tfe.VariableSetCreateOptions{Name: tfe.String("s"), Global: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		vsv, err := h.Client.VariableSetVariables.Create(h.ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("k"), Value: tfe.String("v"), Category: tfe.Category(tfe.CategoryTerraform)})
		if err != nil {
			t.Fatal(err)
		}
		// An outsider with an organization of their own.
		tok := h.userToken()
		other := h.client(tok)
		mine := h.newOrg(h.env.NewClient(t, tok))
		myWS := h.newWorkspace(mine, "")
		myVS, err := other.VariableSets.Create(h.ctx, mine, &tfe.VariableSetCreateOptions{Name: tfe.String("mine"), Global: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		nf := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, tfe.ErrResourceNotFound) {
				t.Errorf("%s: %v, want not found", what, err)
			}
		}
		_, err = other.Variables.List(h.ctx, ws.ID, nil)
		nf("list vars", err)
		_, err = other.Variables.ListAll(h.ctx, ws.ID, nil)
		nf("all-vars", err)
		_, err = other.Variables.Read(h.ctx, ws.ID, v.ID)
		nf("read var", err)
		_, err = other.Variables.Create(h.ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("x"), Category: tfe.Category(tfe.CategoryEnv)})
		nf("create var", err)
		_, err = other.Variables.Update(h.ctx, ws.ID, v.ID, tfe.VariableUpdateOptions{Value: tfe.String("x")})
		nf("update var", err)
		nf("delete var", other.Variables.Delete(h.ctx, ws.ID, v.ID))
		// A variable addressed through the wrong workspace is not found either.
		_, err = other.Variables.Read(h.ctx, myWS.ID, v.ID)
		nf("read var via own workspace", err)
		_, err = other.VariableSets.List(h.ctx, h.orgName, nil)
		nf("list varsets", err)
		_, err = other.VariableSets.Read(h.ctx, vs.ID, nil)
		nf("read varset", err)
		_, err = other.VariableSets.Update(h.ctx, vs.ID, &tfe.VariableSetUpdateOptions{Name: tfe.String("x")})
		nf("update varset", err)
		nf("delete varset", other.VariableSets.Delete(h.ctx, vs.ID))
		_, err = other.VariableSetVariables.List(h.ctx, vs.ID, nil)
		nf("list varset vars", err)
		_, err = other.VariableSetVariables.Read(h.ctx, vs.ID, vsv.ID)
		nf("read varset var", err)
		// Applying my set to their workspace, or their set to mine.
		nf("apply to foreign workspace", other.VariableSets.ApplyToWorkspaces(h.ctx, myVS.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: ws.ID}}}))
		nf("apply foreign set", other.VariableSets.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: myWS.ID}}}))
		// Even the admin cannot apply a set to another organization's workspace.
		err = h.Client.VariableSets.ApplyToWorkspaces(h.ctx, vs.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: myWS.ID}}})
		nf("admin cross-org apply", err)
		// My own organization's global set does not reach into theirs.
		got, err := other.VariableSets.ListForWorkspace(h.ctx, myWS.ID, nil)
		if err != nil || len(got.Items) != 0 {
			t.Errorf("my workspace's sets: %+v %v", got, err)
		}
		// Everything of theirs is unchanged.
		after, err := h.Client.Variables.Read(h.ctx, ws.ID, v.ID)
		if err != nil || after.Value != "v" {
			t.Errorf("their variable: %+v %v", after, err)
		}
	})
}
