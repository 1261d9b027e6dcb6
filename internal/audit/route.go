package audit

import (
	"net/http"
	"strings"
)

// apiPrefixes are the path prefixes of the APIs the Recorder serves; route
// patterns are read after them.
var apiPrefixes = []string{"/api/v2/", "/api/terrace/v1/", "/api/registry/"}

// sensitiveReads are the GET routes that hand out state, state outputs or
// an unredacted plan: they are recorded like writes.
var sensitiveReads = map[string]bool{
	"GET /api/v2/state-versions":                                true,
	"GET /api/v2/state-versions/{id}":                           true,
	"GET /api/v2/state-versions/{id}/download":                  true,
	"GET /api/v2/state-versions/{id}/outputs":                   true,
	"GET /api/v2/state-version-outputs/{id}":                    true,
	"GET /api/v2/workspaces/{id}/current-state-version":         true,
	"GET /api/v2/workspaces/{id}/current-state-version-outputs": true,
	"GET /api/v2/plans/{id}/json-output":                        true,
	"GET /api/v2/runs/{id}/plan/json-output":                    true,
}

// siteRoutes are events of the site rather than of an organization:
// creating and deleting organizations (an organization's trail starts
// after its creation, and a deleted organization has no one left to read
// it), site administration, and users' own accounts and tokens.
func siteRoute(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	return pattern == "POST /api/v2/organizations" || pattern == "DELETE /api/v2/organizations/{org}" ||
		strings.HasPrefix(path, "/api/v2/admin/") || strings.HasPrefix(path, "/api/v2/account/") ||
		strings.HasPrefix(path, "/api/v2/users/")
}

// route is what a route pattern says about the requests it serves.
type route struct {
	pattern string
	// orgParam is the path parameter naming the organization, if any.
	orgParam string
	// owner is the first collection/{param} pair of the path, through
	// which a Locator finds the organization when no orgParam names it.
	ownerCollection, ownerParam string
	// typ and idParam name the resource acted on; idParam "" means the
	// ID comes from the response (creates) or from the parent.
	typ, idParam string
	// parentType and parentParam name the resource a create or a
	// relationship change happened under.
	parentType, parentParam string
	// action is the action, or actionParam the parameter holding it.
	action, actionParam string
	// create is true when the response names the resource created.
	create bool
	site   bool
}

// pathSegments splits a path after the API prefix.
func pathSegments(path string) []string {
	for _, p := range apiPrefixes {
		if rest, ok := strings.CutPrefix(path, p); ok {
			return strings.Split(strings.Trim(rest, "/"), "/")
		}
	}
	return strings.Split(strings.Trim(path, "/"), "/")
}

func paramName(seg string) (string, bool) {
	if len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
		return strings.TrimSuffix(seg[1:len(seg)-1], "..."), true
	}
	return "", false
}

// parseRoute derives the resource and action of a "METHOD /path" pattern:
//
//	POST   organizations/{org}/workspaces    create workspace (ID from the response)
//	PATCH  workspaces/{id}                   update workspace {id}
//	POST   workspaces/{id}/actions/lock      lock workspace {id}
//	POST   workspaces/{id}/relationships/tags   add-tags on workspace {id}
//	DELETE teams/{id}/authentication-token   delete authentication-token of team {id}
//	GET    state-versions/{id}/download      read-download of state-version {id}
func parseRoute(pattern string) route {
	rt := route{pattern: pattern, site: siteRoute(pattern)}
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		return rt
	}
	segs := pathSegments(path)
	type pair struct{ collection, param string }
	var pairs []pair
	for i := 0; i < len(segs); i++ {
		seg := segs[i]
		if _, isParam := paramName(seg); isParam {
			continue
		}
		if seg == "actions" && i+1 < len(segs) {
			if p, isParam := paramName(segs[i+1]); isParam {
				rt.actionParam = p
			} else {
				rt.action = segs[i+1]
			}
			segs = segs[:i]
			break
		}
		if seg == "relationships" && i+1 < len(segs) {
			rel := segs[i+1]
			if i+2 < len(segs) {
				if p, isParam := paramName(segs[i+2]); isParam {
					// varsets/{vs}/relationships/vars/{var}: a resource of its own.
					pairs = append(pairs, pair{rel, p})
					segs = segs[:i+3]
					break
				}
			}
			verbs := map[string]string{http.MethodPost: "add-", http.MethodPatch: "replace-", http.MethodDelete: "remove-", http.MethodGet: "read-"}
			rt.action = verbs[method] + rel
			segs = segs[:i]
			break
		}
		if i+1 < len(segs) {
			if p, isParam := paramName(segs[i+1]); isParam {
				pairs = append(pairs, pair{seg, p})
				if seg == "organizations" || seg == "orgs" {
					rt.orgParam = p
				}
			}
		}
	}
	if len(pairs) > 0 {
		rt.ownerCollection, rt.ownerParam = pairs[0].collection, pairs[0].param
		if rt.orgParam != "" && len(pairs) > 1 {
			rt.ownerCollection, rt.ownerParam = pairs[1].collection, pairs[1].param
		}
	}
	last := ""
	if len(segs) > 0 {
		last = segs[len(segs)-1]
	}
	_, lastIsParam := paramName(last)
	switch {
	case rt.action != "" || rt.actionParam != "":
		// An action route: on the deepest resource before "actions"/"relationships".
		if len(pairs) > 0 {
			d := pairs[len(pairs)-1]
			rt.typ, rt.idParam = singular(d.collection), d.param
		}
	case lastIsParam && len(pairs) > 0:
		d := pairs[len(pairs)-1]
		rt.typ, rt.idParam = singular(d.collection), d.param
		rt.action = map[string]string{http.MethodGet: "read", http.MethodPatch: "update", http.MethodPut: "update",
			http.MethodDelete: "delete", http.MethodPost: "update"}[method]
		if len(pairs) > 1 {
			p := pairs[len(pairs)-2]
			rt.parentType, rt.parentParam = singular(p.collection), p.param
		}
	default:
		// A collection or a singleton under the deepest resource.
		rt.typ = singular(last)
		if len(pairs) > 0 {
			d := pairs[len(pairs)-1]
			rt.parentType, rt.parentParam = singular(d.collection), d.param
		}
		switch method {
		case http.MethodPost:
			rt.action, rt.create = "create", true
		case http.MethodGet:
			// A sensitive read of a part of the parent (its current state).
			if rt.parentType != "" {
				rt.action = "read-" + last
				rt.typ, rt.idParam, rt.parentType, rt.parentParam = rt.parentType, rt.parentParam, "", ""
			} else {
				rt.action = "list"
			}
		case http.MethodDelete:
			rt.action = "delete"
		default:
			rt.action = "update"
		}
	}
	if rt.typ == "" {
		rt.typ = "organization"
	}
	if o, ok := overrides[pattern]; ok {
		rt.typ, rt.idParam, rt.action, rt.create, rt.parentType, rt.parentParam = o.typ, o.idParam, o.action, false, "", ""
	}
	return rt
}

// overrides are the routes the rules above name wrongly.
var overrides = map[string]struct{ typ, idParam, action string }{
	"POST /api/v2/organizations/{org}/audit-configuration/test": {"audit-configuration", "org", "test"},
	// The stacks API's actions are verbs after the resource, not under
	// actions/.
	"POST /api/v2/stack-deployment-runs/{id}/approve-all-plans":   {"stack-deployment-run", "id", "approve-all-plans"},
	"POST /api/v2/stack-deployment-runs/{id}/cancel":              {"stack-deployment-run", "id", "cancel"},
	"POST /api/v2/stack-deployment-groups/{id}/approve-all-plans": {"stack-deployment-group", "id", "approve-all-plans"},
	"POST /api/v2/stack-deployment-groups/{id}/rerun":             {"stack-deployment-group", "id", "rerun"},
	"POST /api/v2/stack-deployment-steps/{id}/advance":            {"stack-deployment-step", "id", "advance"},
}

// singular turns a collection name into a resource type.
func singular(collection string) string {
	switch {
	case collection == "orgs":
		return "organization"
	case strings.HasSuffix(collection, "ies"):
		return strings.TrimSuffix(collection, "ies") + "y"
	case strings.HasSuffix(collection, "ss"):
		return collection
	case strings.HasSuffix(collection, "s"):
		return strings.TrimSuffix(collection, "s")
	}
	return collection
}
