package authz

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Route is the rule of one API route: the action it performs and where
// the resource it acts on is found.
type Route struct {
	Action Action
	// ActionOf picks the action from the path values when it depends on
	// them (run actions); nil uses Action.
	ActionOf func(vals map[string]string) Action
	// Locate finds the resource; nil for actions of scope "any".
	Locate Locator
	// ServiceDecides: the owning service asks the model itself, of every
	// caller (run tokens too), what the decoded request asks, Action at
	// most; the guard locates the resource (for the audit record) and
	// refuses only a request without a token and the tokens no such
	// route takes (AnyToken). POST /runs: run.Service.Create asks
	// CreateRunAction, as it does of the runs an upload queues.
	ServiceDecides bool
	// Service marks routes whose resource the guard cannot locate from
	// the request (tokens, memberships, variable sets, …): the guard only
	// keeps run tokens out and the owning service decides, through its
	// organization check.
	Service bool
	// TaskToken marks the routes a task result's access token may use
	// (its callback, its run's plan JSON and configuration download);
	// the guard refuses it every other route.
	TaskToken bool
}

// Request is what a locator sees of a request.
type Request struct {
	Vals  map[string]string
	Query func(string) string
	// Body is the request body, read once (only for locators that need
	// it: POST /runs, team access creation).
	Body func() []byte
}

// Locator finds the resource of a request.
type Locator func(ctx context.Context, s *Service, r Request) (Resource, error)

// Guard refuses, before any handler runs, every API request the model does
// not allow. Routes (pattern → Route) must name every route mux serves.
type Guard struct {
	Service *Service
	Routes  map[string]Route
}

// Handler wraps mux: the route's pattern selects its rule; a pattern
// without a rule is refused (a new route must get one).
func (g *Guard) Handler(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pattern := tfeapi.Route(r, mux)
		if pattern == "" || pattern == "/" {
			mux.ServeHTTP(w, r.WithContext(WithModel(r.Context(), g.Service)))
			return
		}
		if err := g.Check(r, pattern); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		mux.ServeHTTP(w, r.WithContext(WithModel(r.Context(), g.Service)))
	})
}

// Check decides one request matched to pattern, for the caller in its
// context.
func (g *Guard) Check(r *http.Request, pattern string) error {
	rt, ok := g.Routes[pattern]
	if !ok {
		return fmt.Errorf("authz: route %q has no authorization rule", pattern)
	}
	var body []byte
	read := false
	req := Request{
		Vals: PathValues(pattern, r.URL.EscapedPath()),
		// Parsed when a locator asks (most never do).
		Query: func(k string) string { return r.URL.Query().Get(k) },
		Body: func() []byte {
			if !read {
				read = true
				body, _ = io.ReadAll(io.LimitReader(r.Body, tfeapi.DefaultBodyLimit))
				// The handler reads the whole body again, beyond what
				// was looked at here.
				r.Body = struct {
					io.Reader
					io.Closer
				}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			}
			return body
		},
	}
	return g.Decide(r.Context(), auth.FromContext(r.Context()), rt, req)
}

// Decide applies a route's rule to a principal.
func (g *Guard) Decide(ctx context.Context, p *auth.Principal, rt Route, req Request) error {
	action := rt.Action
	if rt.ActionOf != nil {
		action = rt.ActionOf(req.Vals)
	}
	if p != nil && p.Kind == auth.KindTaskResult && !rt.TaskToken {
		return core.Forbidden("a task result's access token can only report its result and read its run's plan JSON and configuration")
	}
	if p != nil && p.Kind == auth.KindTestRun {
		// It reads the private registry, whose protocol is served
		// outside the API (the registry services ask the model).
		return errTestRunToken()
	}
	if rt.Service {
		// The service checks the organization; run tokens reach none
		// of these.
		return g.Service.Decide(ctx, p, Authenticated, Resource{})
	}
	var res Resource
	if rt.Locate != nil {
		var err error
		if res, err = rt.Locate(ctx, g.Service, req); err != nil {
			if core.KindOf(err) == core.KindNotFound || core.KindOf(err) == core.KindInvalid {
				// Let the handler answer unknown resources and bad
				// input as it always has (for a caller who may see
				// nothing, the service says 404 too).
				if p != nil && (p.Kind == auth.KindRun || p.Kind == auth.KindTaskResult) {
					return err
				}
				return nil
			}
			return err
		}
		// For the audit record of a request whose route names no
		// organization (POST /runs): the response names the workspace.
		tfeapi.NoteLocated(ctx, tfeapi.Located{Organization: res.Organization, WorkspaceID: res.WorkspaceID})
	}
	if rt.ServiceDecides {
		return g.Service.Decide(ctx, p, AnyToken, Resource{})
	}
	return g.Service.Decide(ctx, p, action, res)
}

// PathValues matches a request path against a ServeMux pattern
// ("METHOD /a/{x}/b/{rest...}") and returns the wildcard values.
func PathValues(pattern, path string) map[string]string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	vals := map[string]string{}
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	for i, seg := range ps {
		if !strings.HasPrefix(seg, "{") || i >= len(xs) {
			continue
		}
		name := strings.Trim(seg, "{}")
		if n, ok := strings.CutSuffix(name, "..."); ok {
			vals[n] = strings.Join(xs[i:], "/")
			continue
		}
		vals[name] = unescape(xs[i])
	}
	return vals
}

func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+3], "%02x", &v); err == nil {
				b.WriteByte(v)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// --- locators

// InOrg locates the organization named by the {org} path value.
func InOrg(_ context.Context, _ *Service, r Request) (Resource, error) {
	return Resource{Organization: r.Vals["org"]}, nil
}

// ByID locates the resource whose prefixed ID is the path value name.
func ByID(name string) Locator {
	return func(ctx context.Context, s *Service, r Request) (Resource, error) {
		return s.resolve(ctx, r.Vals[name])
	}
}

// WorkspaceByName locates {org}/workspaces/{name}.
func WorkspaceByName(ctx context.Context, s *Service, r Request) (Resource, error) {
	return s.resolver.WorkspaceByName(ctx, r.Vals["org"], r.Vals["name"])
}

// ByQuery locates the resource whose ID is in a query parameter.
func ByQuery(param string) Locator {
	return func(ctx context.Context, s *Service, r Request) (Resource, error) {
		id := r.Query(param)
		if id == "" {
			return Resource{}, core.Invalid("%s is required", param)
		}
		return s.resolve(ctx, id)
	}
}

// ByRelationship locates the resource a JSON:API body's relationship names.
func ByRelationship(name string) Locator {
	return func(ctx context.Context, s *Service, r Request) (Resource, error) {
		doc, err := tfeapi.DecodeBytes(r.Body())
		if err != nil {
			return Resource{}, core.Invalid("bad body")
		}
		id, err := doc.RelID(name)
		if err != nil || id == "" {
			return Resource{}, core.Invalid("relationship %s is required", name)
		}
		return s.resolve(ctx, id)
	}
}

// StateVersionsFilter locates GET /state-versions?filter[workspace][name]=
// &filter[organization][name]=.
func StateVersionsFilter(ctx context.Context, s *Service, r Request) (Resource, error) {
	org, name := r.Query("filter[organization][name]"), r.Query("filter[workspace][name]")
	if org == "" || name == "" {
		return Resource{}, core.Invalid("filters are required")
	}
	return s.resolver.WorkspaceByName(ctx, org, name)
}
