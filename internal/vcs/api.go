package vcs

import (
	"context"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the OAuth client and OAuth token endpoints of the TFE API v2.
type API struct {
	Service *Service
	// ProjectName names a project for an included project resource.
	ProjectName func(ctx context.Context, id string) (string, error)
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	h := tfeapi.Handle
	mux.HandleFunc("GET /api/v2/organizations/{org}/oauth-clients", h(a.listClients))
	mux.HandleFunc("POST /api/v2/organizations/{org}/oauth-clients", h(a.createClient))
	mux.HandleFunc("GET /api/v2/oauth-clients/{id}", h(a.getClient))
	mux.HandleFunc("PATCH /api/v2/oauth-clients/{id}", h(a.updateClient))
	mux.HandleFunc("DELETE /api/v2/oauth-clients/{id}", h(a.deleteClient))
	mux.HandleFunc("POST /api/v2/oauth-clients/{id}/relationships/projects", h(a.projects(true)))
	mux.HandleFunc("DELETE /api/v2/oauth-clients/{id}/relationships/projects", h(a.projects(false)))
	mux.HandleFunc("GET /api/v2/oauth-clients/{id}/oauth-tokens", h(a.clientTokens))
	mux.HandleFunc("GET /api/v2/organizations/{org}/oauth-tokens", h(a.listTokens))
	mux.HandleFunc("GET /api/v2/oauth-tokens/{id}", h(a.getToken))
	mux.HandleFunc("PATCH /api/v2/oauth-tokens/{id}", h(a.updateToken))
	mux.HandleFunc("DELETE /api/v2/oauth-tokens/{id}", h(a.deleteToken))
}

// jsonClient is the wire form of a client (go-tfe's OAuthClient). It has
// no secret, private key or token string field, so no response can carry
// one. callback-url and connect-path are those of the OAuth authorization
// flow (flow.go), for the providers whose flow Terrace runs.
type jsonClient struct {
	ID                  string         `jsonapi:"primary,oauth-clients"`
	Name                *string        `jsonapi:"attr,name"`
	APIURL              string         `jsonapi:"attr,api-url"`
	HTTPURL             string         `jsonapi:"attr,http-url"`
	Key                 string         `jsonapi:"attr,key"`
	RSAPublicKey        string         `jsonapi:"attr,rsa-public-key"`
	ServiceProvider     string         `jsonapi:"attr,service-provider"`
	ServiceProviderName string         `jsonapi:"attr,service-provider-display-name"`
	OrganizationScoped  bool           `jsonapi:"attr,organization-scoped"`
	CallbackURL         string         `jsonapi:"attr,callback-url,omitempty"`
	ConnectPath         string         `jsonapi:"attr,connect-path,omitempty"`
	CreatedAt           time.Time      `jsonapi:"attr,created-at,iso8601"`
	Organization        *jsonOrgRef    `jsonapi:"relation,organization"`
	Tokens              []*jsonToken   `jsonapi:"relation,oauth-tokens"`
	Projects            []*jsonProject `jsonapi:"relation,projects"`
}

// jsonToken is the wire form of a token (go-tfe's OAuthToken). uid is
// left empty: Terrace's tokens are personal access tokens, with no
// provider-side identity of their own.
type jsonToken struct {
	ID                  string         `jsonapi:"primary,oauth-tokens"`
	UID                 string         `jsonapi:"attr,uid"`
	HasSSHKey           bool           `jsonapi:"attr,has-ssh-key"`
	ServiceProviderUser string         `jsonapi:"attr,service-provider-user"`
	CreatedAt           time.Time      `jsonapi:"attr,created-at,iso8601"`
	Client              *jsonClientRef `jsonapi:"relation,oauth-client"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonClientRef struct {
	ID string `jsonapi:"primary,oauth-clients"`
}

type jsonProject struct {
	ID   string `jsonapi:"primary,projects"`
	Name string `jsonapi:"attr,name,omitempty"`
}

func (a *API) clientJSON(c *Client) *jsonClient {
	j := &jsonClient{ID: c.ID, Name: c.Name, APIURL: c.APIURL, HTTPURL: c.HTTPURL, Key: c.Key, RSAPublicKey: c.RSAPublicKey,
		ServiceProvider: string(c.Provider), ServiceProviderName: c.Provider.DisplayName(), OrganizationScoped: c.OrganizationScoped,
		CallbackURL: a.Service.CallbackURL(c), ConnectPath: ConnectPath(c),
		CreatedAt: c.CreatedAt, Organization: &jsonOrgRef{Name: c.Organization},
		Tokens: make([]*jsonToken, len(c.Tokens)), Projects: make([]*jsonProject, len(c.Projects))}
	for i, id := range c.Tokens {
		j.Tokens[i] = &jsonToken{ID: id}
	}
	for i, id := range c.Projects {
		j.Projects[i] = &jsonProject{ID: id}
	}
	return j
}

func tokenJSON(t *Token) *jsonToken {
	return &jsonToken{ID: t.ID, HasSSHKey: t.HasSSHKey, ServiceProviderUser: t.ServiceProviderUser, CreatedAt: t.CreatedAt,
		Client: &jsonClientRef{ID: t.Client}}
}

// maxBody bounds a request: the secrets plus the JSON:API envelope.
const maxBody = 4*MaxSecret + 64<<10

func decodeClient(w http.ResponseWriter, r *http.Request) (ClientOptions, error) {
	var o ClientOptions
	doc, b, err := tfeapi.DecodeAttrs[struct {
		Name               *string `json:"name"`
		ServiceProvider    *string `json:"service-provider"`
		APIURL             *string `json:"api-url"`
		HTTPURL            *string `json:"http-url"`
		Key                *string `json:"key"`
		Secret             *string `json:"secret"`
		RSAPublicKey       *string `json:"rsa-public-key"`
		PrivateKey         *string `json:"private-key"`
		TokenString        *string `json:"oauth-token-string"`
		OrganizationScoped *bool   `json:"organization-scoped"`
	}](w, r, maxBody)
	if err != nil {
		return o, err
	}
	o = ClientOptions{Name: b.Name, Provider: b.ServiceProvider, APIURL: b.APIURL, HTTPURL: b.HTTPURL, Key: b.Key, Secret: b.Secret,
		RSAPublicKey: b.RSAPublicKey, PrivateKey: b.PrivateKey, TokenString: b.TokenString, OrganizationScoped: b.OrganizationScoped}
	if _, ok := doc.Relationships["projects"]; ok {
		res, err := doc.RelResources("projects")
		if err != nil {
			return o, err
		}
		o.Projects = make([]string, 0, len(res))
		for _, p := range res {
			o.Projects = append(o.Projects, p.ID)
		}
	}
	if _, ok := doc.Relationships["agent-pool"]; ok {
		id, err := doc.RelID("agent-pool")
		if err != nil {
			return o, err
		}
		o.AgentPool = &id
	}
	return o, nil
}

// included renders what ?include asks of clients: their tokens
// (oauth_tokens) and their projects (projects).
func (a *API) included(r *http.Request, clients []*Client) ([]any, error) {
	inc, err := tfeapi.Includes(r, "oauth_tokens", "projects")
	if err != nil {
		return nil, err
	}
	var out []any
	ctx := r.Context()
	for _, c := range clients {
		if inc["oauth_tokens"] {
			tokens, err := a.Service.ClientTokens(ctx, c.ID)
			if err != nil {
				return nil, err
			}
			for _, t := range tokens {
				out = append(out, tokenJSON(t))
			}
		}
		if inc["projects"] {
			for _, p := range c.Projects {
				name, err := a.ProjectName(ctx, p)
				if err != nil {
					return nil, err
				}
				out = append(out, &jsonProject{ID: p, Name: name})
			}
		}
	}
	return out, nil
}

func (a *API) listClients(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	clients, err := a.Service.ListClients(r.Context(), r.PathValue("org"))
	if err != nil {
		return err
	}
	items, pg := tfeapi.Paginate(clients, page)
	inc, err := a.included(r, items)
	if err != nil {
		return err
	}
	out := make([]*jsonClient, len(items))
	for i, c := range items {
		out[i] = a.clientJSON(c)
	}
	tfeapi.RespondList(w, r, out, pg, inc...)
	return nil
}

func (a *API) respondClient(w http.ResponseWriter, r *http.Request, status int, c *Client) error {
	inc, err := a.included(r, []*Client{c})
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, status, a.clientJSON(c), inc...)
	return nil
}

func (a *API) createClient(w http.ResponseWriter, r *http.Request) error {
	o, err := decodeClient(w, r)
	if err != nil {
		return err
	}
	c, err := a.Service.CreateClient(r.Context(), r.PathValue("org"), o)
	if err != nil {
		return err
	}
	return a.respondClient(w, r, http.StatusCreated, c)
}

func (a *API) getClient(w http.ResponseWriter, r *http.Request) error {
	c, err := a.Service.GetClient(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return a.respondClient(w, r, http.StatusOK, c)
}

func (a *API) updateClient(w http.ResponseWriter, r *http.Request) error {
	// Look the client up first so that an unknown or foreign client is a
	// 404 whatever the body holds.
	if _, err := a.Service.GetClient(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	o, err := decodeClient(w, r)
	if err != nil {
		return err
	}
	c, err := a.Service.UpdateClient(r.Context(), r.PathValue("id"), o)
	if err != nil {
		return err
	}
	return a.respondClient(w, r, http.StatusOK, c)
}

func (a *API) deleteClient(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.DeleteClient(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) projects(add bool) tfeapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := a.Service.GetClient(r.Context(), r.PathValue("id")); err != nil {
			return err
		}
		res, err := tfeapi.DecodeResources(w, r)
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(res))
		for _, p := range res {
			ids = append(ids, p.ID)
		}
		if err := a.Service.ChangeProjects(r.Context(), r.PathValue("id"), ids, add); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func (a *API) clientTokens(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.ListPage(w, r, func() ([]*Token, error) { return a.Service.ClientTokens(r.Context(), r.PathValue("id")) }, tokenJSON)
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.ListPage(w, r, func() ([]*Token, error) { return a.Service.ListTokens(r.Context(), r.PathValue("org")) }, tokenJSON)
}

func (a *API) getToken(w http.ResponseWriter, r *http.Request) error {
	tfeapi.Reply(w, r, http.StatusOK, tokenJSON)(a.Service.GetToken(r.Context(), r.PathValue("id")))
	return nil
}

func (a *API) updateToken(w http.ResponseWriter, r *http.Request) error {
	if _, err := a.Service.GetToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	_, b, err := tfeapi.DecodeAttrs[struct {
		SSHKey *string `json:"ssh-key"`
	}](w, r, MaxSecret+16<<10)
	if err != nil {
		return err
	}
	tfeapi.Reply(w, r, http.StatusOK, tokenJSON)(a.Service.UpdateToken(r.Context(), r.PathValue("id"), TokenOptions{SSHKey: b.SSHKey}))
	return nil
}

func (a *API) deleteToken(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.DeleteToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
