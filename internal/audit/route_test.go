package audit

import "testing"

func TestParseRoute(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]struct{ typ, id, action, parentType, parent, org, owner string }{
		"POST /api/v2/organizations/{org}/workspaces":               {"workspace", "", "create", "organization", "org", "org", "organizations"},
		"PATCH /api/v2/workspaces/{id}":                             {"workspace", "id", "update", "", "", "", "workspaces"},
		"DELETE /api/v2/organizations/{org}/workspaces/{name}":      {"workspace", "name", "delete", "organization", "org", "org", "workspaces"},
		"POST /api/v2/workspaces/{id}/actions/lock":                 {"workspace", "id", "lock", "", "", "", "workspaces"},
		"POST /api/v2/runs/{id}/actions/{action}":                   {"run", "id", "", "", "", "", "runs"},
		"POST /api/v2/workspaces/{id}/relationships/tags":           {"workspace", "id", "add-tags", "", "", "", "workspaces"},
		"PATCH /api/v2/varsets/{vs}/relationships/vars/{var}":       {"var", "var", "update", "varset", "vs", "", "varsets"},
		"POST /api/v2/no-code-modules/{id}/workspaces":              {"workspace", "", "create", "no-code-module", "id", "", "no-code-modules"},
		"DELETE /api/v2/organizations/{org}/authentication-token":   {"authentication-token", "", "delete", "organization", "org", "org", "organizations"},
		"GET /api/v2/workspaces/{id}/current-state-version":         {"workspace", "id", "read-current-state-version", "", "", "", "workspaces"},
		"GET /api/v2/state-versions":                                {"state-version", "", "list", "", "", "", ""},
		"POST /api/v2/runs":                                         {"run", "", "create", "", "", "", ""},
		"PATCH /api/v2/organizations/{org}":                         {"organization", "org", "update", "", "", "org", "organizations"},
		"POST /api/v2/organizations/{org}/audit-configuration/test": {"audit-configuration", "org", "test", "", "", "org", "organizations"},
		"POST /api/terrace/v1/orgs/{org}/deployments":               {"deployment", "", "create", "organization", "org", "org", "orgs"},
		"POST /api/v2/stack-deployment-runs/{id}/approve-all-plans": {"stack-deployment-run", "id", "approve-all-plans", "", "", "", "stack-deployment-runs"},
	} {
		rt := parseRoute(pattern)
		got := struct{ typ, id, action, parentType, parent, org, owner string }{rt.typ, rt.idParam, rt.action, rt.parentType, rt.parentParam, rt.orgParam, rt.ownerCollection}
		if rt.actionParam != "" {
			got.action = ""
		}
		if got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", pattern, got, want)
		}
	}
}
