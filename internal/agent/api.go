package agent

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/user"
)

// API serves the agent pool, agent token and agent endpoints of the TFE
// API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organizations/{org}/agent-pools", a.list)
	mux.HandleFunc("POST /api/v2/organizations/{org}/agent-pools", a.create)
	mux.HandleFunc("GET /api/v2/agent-pools/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/agent-pools/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/agent-pools/{id}", a.delete)
	mux.HandleFunc("GET /api/v2/agent-pools/{id}/authentication-tokens", a.listTokens)
	mux.HandleFunc("POST /api/v2/agent-pools/{id}/authentication-tokens", a.createToken)
	mux.HandleFunc("GET /api/v2/agent-pools/{id}/agents", a.listAgents)
	mux.HandleFunc("GET /api/v2/agents/{id}", a.getAgent)
}

type jsonPool struct {
	ID                 string          `jsonapi:"primary,agent-pools"`
	Name               string          `jsonapi:"attr,name"`
	AgentCount         int             `jsonapi:"attr,agent-count"`
	OrganizationScoped bool            `jsonapi:"attr,organization-scoped"`
	CreatedAt          time.Time       `jsonapi:"attr,created-at,iso8601"`
	Organization       *jsonOrgRef     `jsonapi:"relation,organization"`
	Workspaces         []*jsonWSRef    `jsonapi:"relation,workspaces"`
	AllowedWorkspaces  []*jsonWSRef    `jsonapi:"relation,allowed-workspaces"`
	AllowedProjects    []*jsonProjRef  `jsonapi:"relation,allowed-projects"`
	ExcludedWorkspaces []*jsonWSRef    `jsonapi:"relation,excluded-workspaces"`
	Links              *map[string]any `jsonapi:"links,omitempty"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonWSRef struct {
	ID string `jsonapi:"primary,workspaces"`
}

type jsonProjRef struct {
	ID string `jsonapi:"primary,projects"`
}

func wsRefs(ids []string) []*jsonWSRef {
	out := []*jsonWSRef{}
	for _, id := range ids {
		out = append(out, &jsonWSRef{ID: id})
	}
	return out
}

func (a *API) toJSON(r *http.Request, p *Pool) (*jsonPool, error) {
	ctx := r.Context()
	j := &jsonPool{ID: p.ID, Name: p.Name, OrganizationScoped: p.OrganizationScoped, CreatedAt: p.CreatedAt, Organization: &jsonOrgRef{Name: p.Organization},
		AllowedWorkspaces: wsRefs(p.AllowedWorkspaces), ExcludedWorkspaces: wsRefs(p.ExcludedWorkspaces), AllowedProjects: []*jsonProjRef{}, Workspaces: []*jsonWSRef{}}
	for _, id := range p.AllowedProjects {
		j.AllowedProjects = append(j.AllowedProjects, &jsonProjRef{ID: id})
	}
	var err error
	if j.AgentCount, err = a.Service.agentCount(ctx, p.ID); err != nil {
		return nil, err
	}
	if a.Service.Lookup != nil {
		ids, err := a.Service.Lookup.WorkspacesOfPool(ctx, p.Organization, p.ID)
		if err != nil {
			return nil, err
		}
		j.Workspaces = wsRefs(ids)
	}
	return j, nil
}

// body is a pool's attributes and relationships as sent.
type body struct {
	Name               *string `json:"name"`
	OrganizationScoped *bool   `json:"organization-scoped"`
	scope              Scope
}

func decode(w http.ResponseWriter, r *http.Request) (body, error) {
	var b body
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return b, err
	}
	if err := doc.Attrs(&b); err != nil {
		return b, err
	}
	for _, rel := range []struct {
		name string
		dst  **[]string
	}{{"allowed-workspaces", &b.scope.AllowedWorkspaces}, {"allowed-projects", &b.scope.AllowedProjects}, {"excluded-workspaces", &b.scope.ExcludedWorkspaces}} {
		if _, ok := doc.Relationships[rel.name]; !ok {
			continue
		}
		res, err := doc.RelResources(rel.name)
		if err != nil {
			return b, err
		}
		ids := []string{}
		for _, x := range res {
			if x.ID == "" {
				return b, core.Invalid("relationship %q has an element without an id", rel.name)
			}
			ids = append(ids, x.ID)
		}
		*rel.dst = &ids
	}
	return b, nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if _, err := tfeapi.Includes(r, "workspaces"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	org := r.PathValue("org")
	ps, err := a.Service.List(ctx, org)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	query := r.URL.Query()
	q := strings.ToLower(query.Get("q"))
	wsName, projName := query.Get("filter[allowed_workspaces][name]"), query.Get("filter[allowed_projects][name]")
	var kept []*Pool
	for _, p := range ps {
		if q != "" && !strings.Contains(strings.ToLower(p.Name), q) {
			continue
		}
		if wsName != "" || projName != "" {
			ok, err := a.Service.allowsByName(ctx, p, wsName, projName)
			if err != nil {
				tfeapi.Error(w, r, err)
				return
			}
			if !ok {
				continue
			}
		}
		kept = append(kept, p)
	}
	switch query.Get("sort") {
	case "", "name":
	case "-name":
		slices.Reverse(kept)
	case "created-at", "-created-at":
		slices.SortStableFunc(kept, func(x, y *Pool) int { return x.CreatedAt.Compare(y.CreatedAt) })
		if query.Get("sort") == "-created-at" {
			slices.Reverse(kept)
		}
	default:
		tfeapi.Error(w, r, core.Invalid("sort %q is not one of name, -name, created-at, -created-at", query.Get("sort")))
		return
	}
	items, pg := tfeapi.Paginate(kept, page)
	out := make([]*jsonPool, len(items))
	for i, p := range items {
		if out[i], err = a.toJSON(r, p); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	b, err := decode(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	name := ""
	if b.Name != nil {
		name = *b.Name
	}
	p, err := a.Service.Create(r.Context(), r.PathValue("org"), name, b.OrganizationScoped, b.scope)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusCreated, p)
}

func (a *API) respond(w http.ResponseWriter, r *http.Request, status int, p *Pool) {
	j, err := a.toJSON(r, p)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, status, j)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	if _, err := tfeapi.Includes(r, "workspaces"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	p, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusOK, p)
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	b, err := decode(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	p, err := a.Service.Update(r.Context(), r.PathValue("id"), b.Name, b.OrganizationScoped, b.scope)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusOK, p)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}

// --- agent tokens

// Tokens is the agent token kind, for authentication-tokens/{id}.
// Agent tokens do not expire.
func (a *API) Tokens() user.TokenKind {
	return user.TokenKind{Check: a.Service.CheckToken, Delete: a.Service.DeleteToken,
		JSON: func(ctx context.Context, t *auth.Token, secret string) *user.TokenJSON {
			j := user.TokenToJSON(ctx, t, secret, nil)
			j.ExpiredAt = nil
			return j
		}}
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) {
	a.Tokens().List(w, r, func() ([]*auth.Token, error) { return a.Service.ListTokens(r.Context(), r.PathValue("id")) })
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a.Tokens().Create(w, r, func(attrs user.TokenAttrs) (*auth.Token, string, error) {
		return a.Service.CreateToken(ctx, r.PathValue("id"), attrs.Desc(), user.CreatorOf(ctx, a.Service.Auth, auth.FromContext(ctx)))
	})
}

// --- agents

type jsonAgent struct {
	ID         string `jsonapi:"primary,agents"`
	Name       string `jsonapi:"attr,name"`
	IP         string `jsonapi:"attr,ip-address"`
	Status     string `jsonapi:"attr,status"`
	LastPingAt string `jsonapi:"attr,last-ping-at"`
	Pool       *struct {
		ID string `jsonapi:"primary,agent-pools"`
	} `jsonapi:"relation,agent-pool"`
}

func agentJSON(ag *Agent) *jsonAgent {
	j := &jsonAgent{ID: ag.ID, Name: ag.Name, IP: ag.IP, Status: ag.Status, LastPingAt: ag.LastPingAt.UTC().Format(time.RFC3339)}
	j.Pool = &struct {
		ID string `jsonapi:"primary,agent-pools"`
	}{ID: ag.PoolID}
	return j
}

func (a *API) listAgents(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ags, err := a.Service.ListAgents(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if since := r.URL.Query().Get("filter[last-ping-since]"); since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			tfeapi.Error(w, r, core.Invalid("filter[last-ping-since] %q is not an RFC 3339 time", since))
			return
		}
		ags = slices.DeleteFunc(ags, func(ag *Agent) bool { return ag.LastPingAt.Before(t) })
	}
	items, pg := tfeapi.Paginate(ags, page)
	out := make([]*jsonAgent, len(items))
	for i, ag := range items {
		out[i] = agentJSON(ag)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) getAgent(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, agentJSON)(a.Service.GetAgent(r.Context(), r.PathValue("id")))
}
