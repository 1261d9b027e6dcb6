package authz_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/testenv"
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// registeredRoutes reads every ServeMux pattern under /api/v2/ that the
// code registers (mux.HandleFunc / mux.Handle calls in internal/), so that
// a new route cannot escape the matrix.
func registeredRoutes(t *testing.T) map[string]string {
	t.Helper()
	routes := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		consts := map[string]string{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) {
						if v, ok := evalString(n.Values[i], consts); ok {
							consts[name.Name] = v
						}
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if id, ok := lhs.(*ast.Ident); ok && i < len(n.Rhs) {
						if v, ok := evalString(n.Rhs[i], consts); ok {
							consts[id.Name] = v
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") || len(n.Args) != 2 {
					return true
				}
				if id, isIdent := n.Args[0].(*ast.Ident); isIdent && id.Name == "ctx" {
					return true // a handler function taking a context (outbox's Handle), not a route
				}
				pattern, ok := evalString(n.Args[0], consts)
				where := fset.Position(n.Pos()).String()
				if !ok {
					// Only the orchestrator's own API (/api/terrace) and
					// capability URLs (signed, outside /api/v2) build
					// patterns the reader cannot follow; anything else
					// must be readable.
					if !strings.Contains(path, "orchestration") && !capability(n.Args[0]) {
						t.Errorf("%s: cannot read the route pattern", where)
					}
					return true
				}
				if strings.Contains(pattern, " /api/v2/") && pattern != "GET /api/v2/ping" {
					routes[pattern] = where
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return routes
}

// capability reports whether a pattern expression builds a capability URL.
func capability(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && (strings.Contains(id.Name, "Capability") || id.Name == "UploadPath") {
			found = true
		}
		return !found
	})
	return found
}

func evalString(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		v, ok := consts[e.Name]
		return v, ok
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := evalString(e.X, consts)
		b, ok2 := evalString(e.Y, consts)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return evalString(e.X, consts)
	}
	return "", false
}

// TestRouteTableCoversEveryRoute: the route table names exactly the routes
// the code registers.
func TestRouteTableCoversEveryRoute(t *testing.T) {
	t.Parallel()
	registered := registeredRoutes(t)
	for p, where := range registered {
		if _, ok := authz.Routes[p]; !ok {
			t.Errorf("route %q (%s) has no entry in authz.Routes", p, where)
		}
	}
	for p := range authz.Routes {
		if _, ok := registered[p]; !ok {
			t.Errorf("authz.Routes names %q, which no code registers", p)
		}
	}
	if len(registered) < 150 {
		t.Fatalf("found only %d routes: the reader is broken", len(registered))
	}
}

const allow = 0

// expect is HCP Terraform's answer for each caller, written out per action
// independently of the model: allow, or the status a refusal carries.
// Callers are granted on workspace "app" (read, plan, write, admin team
// tokens); "member" is in the organization with no team; the run token
// belongs to a run in another workspace that shares no state.
func expect(a authz.Action, service bool, who string) int {
	switch who {
	case "expired", "none":
		return http.StatusUnauthorized
	case "site-admin":
		return allow
	}
	in := func(set ...string) int {
		if slices.Contains(set, who) {
			return allow
		}
		return http.StatusForbidden
	}
	teams := []string{"read", "plan", "write", "admin"}
	if service {
		a = authz.Authenticated
	}
	switch a {
	case authz.Authenticated:
		if who == "run-token" {
			return http.StatusForbidden
		}
		return allow
	case authz.UserOnly, authz.OrgCreate: // the site lets every user create organizations
		return in("owner", "member", "other-org-owner")
	case authz.SiteAdmin:
		return http.StatusNotFound // hidden from all but site admins
	}
	switch who {
	case "other-org-owner":
		return http.StatusNotFound
	case "run-token":
		switch a {
		case authz.OrgEntitlements:
			return allow
		case authz.OrgRead, authz.OrgManage, authz.OrgManageTokens, authz.OrgManageMembers, authz.OrgManageTeams, authz.OrgManageModules,
			authz.OrgManageAgents, authz.OrgManageVCS, authz.OrgReadSSHKeys, authz.OrgReadVCS, authz.OrgManageVarsets, authz.OrgCreateWorkspace, authz.OrgCreateProject,
			authz.OrgManageRunTasks, authz.OrgManagePolicies, authz.OrgManageNoCode, authz.OrgManageTags, authz.OrgManageReservedTagKeys,
			authz.TeamRead, authz.TeamManage, authz.TeamMembers, authz.TeamManageTokens, authz.ProjectRead, authz.ProjectUpdate, authz.ProjectDelete, authz.ProjectManageTeams, authz.ProjectCreateWorkspace,
			authz.ProjectProvisionNoCode, authz.StackRead, authz.StackManage, authz.StackApprove:
			return http.StatusForbidden
		}
		return http.StatusNotFound // workspace "app" does not share with the run's workspace
	}
	switch a {
	case authz.OrgRead, authz.OrgEntitlements, authz.TeamRead:
		return in(append(teams, "owner", "member", "organization-token")...)
	case authz.OrgManage, authz.OrgManageNoCode:
		return in("owner")
	case authz.TeamManageTokens:
		// Team "read" lets its members manage its tokens, but its token
		// is no member (a user token).
		return in("owner", "organization-token")
	case authz.OrgManageTokens:
		// Owners with a user token: the organization's token, and team
		// tokens, manage none.
		return in("owner")
	case authz.OrgReadSSHKeys:
		// Manage VCS settings, or admin on a workspace (team-admin's on
		// app); not an organization token.
		return in("owner", "admin")
	case authz.OrgReadVCS:
		// The same, and the organization's token, which manages them.
		return in("owner", "admin", "organization-token")
	case authz.OrgManageMembers, authz.OrgManageTeams, authz.OrgManageModules, authz.OrgManageAgents, authz.OrgManageVCS,
		authz.OrgManageVarsets, authz.OrgCreateWorkspace, authz.OrgCreateProject, authz.OrgManageRunTasks, authz.OrgManagePolicies, authz.TeamManage,
		authz.TeamMembers, authz.OrgManageTags, authz.OrgManageReservedTagKeys:
		return in("owner", "organization-token")
	case authz.ProjectRead, authz.ProjectUpdate, authz.ProjectDelete, authz.ProjectManageTeams, authz.ProjectCreateWorkspace,
		authz.ProjectProvisionNoCode:
		// Workspace grants do not show the project; organization tokens
		// provision no no-code workspace.
		switch {
		case who == "owner", who == "organization-token" && a != authz.ProjectProvisionNoCode:
			return allow
		case who == "organization-token":
			return http.StatusForbidden
		}
		return http.StatusNotFound
	}
	// The stack, in project "stacks": team-read has read, team-write write,
	// team-admin maintain on it; team-plan and member nothing.
	switch a {
	case authz.StackRead:
		if slices.Contains([]string{"plan", "member"}, who) {
			return http.StatusNotFound
		}
		return allow
	case authz.StackManage:
		if slices.Contains([]string{"plan", "member"}, who) {
			return http.StatusNotFound
		}
		return in("owner", "admin", "organization-token")
	case authz.StackApprove:
		if slices.Contains([]string{"plan", "member"}, who) {
			return http.StatusNotFound
		}
		return in("owner", "write", "admin")
	}
	// Workspace "app".
	if who == "member" {
		return http.StatusNotFound
	}
	switch a {
	case authz.WorkspaceRead, authz.RunRead, authz.RunInputs, authz.VariableRead, authz.StateRead, authz.StateReadOutputs:
		return in(append(teams, "owner", "organization-token")...)
	case authz.RunPlan:
		return in("owner", "plan", "write", "admin")
	case authz.RunApply, authz.WorkspaceLock, authz.StateWrite:
		return in("owner", "write", "admin")
	case authz.VariableWrite:
		return in("owner", "write", "admin", "organization-token")
	case authz.WorkspaceUpdate, authz.WorkspaceDelete, authz.WorkspaceForceUnlock, authz.WorkspaceManageTeams,
		authz.WorkspaceManageRunTasks, authz.RunReadPlanJSON:
		return in("owner", "admin", "organization-token")
	case authz.WorkspaceForceDelete:
		// The organization keeps allow-force-delete-workspaces off (its
		// default): the admin team is told can-force-delete false.
		return in("owner", "organization-token")
	}
	panic(fmt.Sprintf("the matrix has no expectation for action %q", a))
}

// fill gives a pattern's wildcards the world's resources.
func (w *world) fill(pattern string) (method, path string, vals map[string]string) {
	method, path, _ = strings.Cut(pattern, " ")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	vals = map[string]string{}
	for i, seg := range segs {
		if !strings.HasPrefix(seg, "{") {
			continue
		}
		name := strings.TrimSuffix(strings.Trim(seg, "{}"), "...")
		prev := ""
		if i > 0 {
			prev = segs[i-1]
		}
		var v string
		switch name {
		case "org":
			v = w.org.Name
		case "name":
			v = w.ws.Name
		case "ws":
			v = w.ws.ID
		case "run":
			v = w.run.ID
		case "prj":
			v = w.prj.ID
		case "action":
			v = "apply"
		case "registry":
			v = "private"
		case "ns":
			v = w.org.Name
		case "provider":
			v = "aws"
		case "version":
			v = "1.0.0"
		case "id":
			v = map[string]string{
				"workspaces": w.ws.ID, "runs": w.run.ID, "plans": w.run.Plan.ID, "applies": w.run.Apply.ID,
				"state-versions": w.sv.ID, "state-version-outputs": w.output, "configuration-versions": w.cv.ID,
				"projects": w.prj.ID, "teams": w.teams["read"].ID, "team-workspaces": w.tws, "team-projects": w.tprj,
				"stacks": w.stack, "stack-configurations": w.stackCfg, "stack-deployment-groups": w.stackGroup,
				"stack-deployment-runs": w.stackRun, "stack-deployment-steps": w.step, "stack-diagnostics": w.stackDiag,
				"stack-states": w.stackSV,
			}[prev]
			if v == "" {
				v = "x-unlocated" // routes the services locate
			}
		default:
			v = "x-" + name
		}
		vals[name] = v
		segs[i] = url.PathEscape(v)
	}
	return method, "/" + strings.Join(segs, "/"), vals
}

func (w *world) query(pattern string) url.Values {
	q := url.Values{}
	switch pattern {
	case "GET /api/v2/team-workspaces":
		q.Set("filter[workspace][id]", w.ws.ID)
	case "GET /api/v2/team-projects":
		q.Set("filter[project][id]", w.prj.ID)
	case "GET /api/v2/state-versions":
		q.Set("filter[organization][name]", w.org.Name)
		q.Set("filter[workspace][name]", w.ws.Name)
	}
	return q
}

func (w *world) body(pattern string) []byte {
	rel := func(name, typ, id string) string {
		return fmt.Sprintf(`%q:{"data":{"type":%q,"id":%q}}`, name, typ, id)
	}
	switch pattern {
	case "POST /api/v2/runs":
		return []byte(`{"data":{"type":"runs","relationships":{` + rel("workspace", "workspaces", w.ws.ID) + `,` +
			rel("configuration-version", "configuration-versions", w.cv.ID) + `}}}`)
	case "POST /api/v2/team-workspaces":
		return []byte(`{"data":{"type":"team-workspaces","attributes":{"access":"read"},"relationships":{` +
			rel("workspace", "workspaces", w.ws.ID) + `,` + rel("team", "teams", w.teams["read"].ID) + `}}}`)
	case "POST /api/v2/team-projects":
		return []byte(`{"data":{"type":"team-projects","attributes":{"access":"read"},"relationships":{` +
			rel("project", "projects", w.prj.ID) + `,` + rel("team", "teams", w.teams["read"].ID) + `}}}`)
	case "POST /api/v2/stacks":
		return []byte(`{"data":{"type":"stacks","attributes":{"name":"other"},"relationships":{` +
			rel("project", "projects", w.stackPrj.ID) + `}}}`)
	case "POST /api/v2/no-code-modules/{id}/workspaces":
		return []byte(`{"data":{"type":"workspaces","attributes":{"name":"nc"},"relationships":{` +
			rel("project", "projects", w.prj.ID) + `}}}`)
	}
	return nil
}

// TestRouteMatrix asks every route of the table for every kind of caller:
// allowed cells through the guard's decision in-process (running the
// handler would change the world), refused cells over real HTTPS, where
// the guard answers before any handler runs (on a route whose service
// decides, Route.ServiceDecides, the service answers them).
func TestRouteMatrix(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		w := newWorld(t, e)
		guard := &authz.Guard{Service: e.Server.Authz, Routes: authz.Routes}
		ctx := context.Background()
		patterns := make([]string, 0, len(authz.Routes))
		for p := range authz.Routes {
			patterns = append(patterns, p)
		}
		sort.Strings(patterns)
		cells := 0
		for _, pattern := range patterns {
			rt := authz.Routes[pattern]
			method, path, vals := w.fill(pattern)
			action := rt.Action
			if rt.ActionOf != nil {
				action = rt.ActionOf(vals)
			}
			body := w.body(pattern)
			q := w.query(pattern)
			for _, who := range principals {
				want := expect(action, rt.Service, who)
				cells++
				if want == allow {
					p, err := e.Server.Auth.Authenticate(ctx, w.tokens[who])
					if err != nil {
						t.Errorf("%s as %s: authenticating: %v", pattern, who, err)
						continue
					}
					req := authz.Request{Vals: vals, Query: q.Get, Body: func() []byte { return body }}
					if err := guard.Decide(ctx, p, rt, req); err != nil {
						t.Errorf("%s as %s (%s): refused (%v), want allowed", pattern, who, action, err)
					}
					continue
				}
				u := e.URL + path
				if len(q) > 0 {
					u += "?" + q.Encode()
				}
				hr, err := http.NewRequest(method, u, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				hr.Header.Set("Content-Type", "application/vnd.api+json")
				if tok := w.tokens[who]; tok != "" {
					hr.Header.Set("Authorization", "Bearer "+tok)
				}
				resp, err := e.HTTP.Do(hr)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s as %s (%s): status %d, want %d", pattern, who, action, resp.StatusCode, want)
				}
			}
		}
		t.Logf("%d routes x %d callers = %d cells", len(patterns), len(principals), cells)
	})
}
