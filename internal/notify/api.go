package notify

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the notification configuration endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	// Spelled out, so that the authorization route table's test can read
	// every pattern.
	mux.HandleFunc("GET /api/v2/workspaces/{id}/notification-configurations", a.list(OnWorkspace))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/notification-configurations", a.create(OnWorkspace))
	mux.HandleFunc("GET /api/v2/teams/{id}/notification-configurations", a.list(OnTeam))
	mux.HandleFunc("POST /api/v2/teams/{id}/notification-configurations", a.create(OnTeam))
	mux.HandleFunc("GET /api/v2/projects/{id}/notification-configurations", a.list(OnProject))
	mux.HandleFunc("POST /api/v2/projects/{id}/notification-configurations", a.create(OnProject))
	mux.HandleFunc("GET /api/v2/notification-configurations/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/notification-configurations/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/notification-configurations/{id}", a.delete)
	mux.HandleFunc("POST /api/v2/notification-configurations/{id}/actions/verify", a.verify)
}

// jsonConfig is the wire form (go-tfe's NotificationConfiguration). token
// is always null: the field exists so that no response can carry it.
type jsonConfig struct {
	ID                string            `jsonapi:"primary,notification-configurations"`
	CreatedAt         time.Time         `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt         time.Time         `jsonapi:"attr,updated-at,iso8601"`
	DeliveryResponses []jsonResponse    `jsonapi:"attr,delivery-responses"`
	DestinationType   string            `jsonapi:"attr,destination-type"`
	Enabled           bool              `jsonapi:"attr,enabled"`
	Name              string            `jsonapi:"attr,name"`
	Token             *string           `jsonapi:"attr,token"`
	Triggers          []string          `jsonapi:"attr,triggers"`
	URL               *string           `jsonapi:"attr,url"`
	EmailAddresses    []string          `jsonapi:"attr,email-addresses"`
	LastFailure       *string           `jsonapi:"attr,last-failure"`
	Subscribable      *jsonSubscribable `jsonapi:"polyrelation,subscribable"`
	Users             []*jsonUser       `jsonapi:"relation,users"`
}

// jsonResponse is a delivery response; code and successful are strings on
// the wire, as HCP Terraform sends them.
type jsonResponse struct {
	URL        string              `json:"url"`
	Body       string              `json:"body"`
	Code       string              `json:"code"`
	Headers    map[string][]string `json:"headers"`
	SentAt     string              `json:"sent-at"`
	Successful string              `json:"successful"`
}

type jsonSubscribable struct {
	Workspace *jsonRef
	Team      *jsonTeamRef
	Project   *jsonProjectRef
}

type jsonRef struct {
	ID string `jsonapi:"primary,workspaces"`
}
type jsonTeamRef struct {
	ID string `jsonapi:"primary,teams"`
}
type jsonProjectRef struct {
	ID string `jsonapi:"primary,projects"`
}
type jsonUser struct {
	ID string `jsonapi:"primary,users"`
}

func toJSON(c *Configuration) *jsonConfig {
	out := &jsonConfig{ID: c.ID, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, DestinationType: string(c.Destination),
		Enabled: c.Enabled, Name: c.Name, Triggers: nonNil(c.Triggers), EmailAddresses: nonNil(c.EmailAddresses),
		DeliveryResponses: []jsonResponse{}, Users: []*jsonUser{}, Subscribable: &jsonSubscribable{}}
	if c.URL != "" {
		out.URL = &c.URL
	}
	if c.LastFailure != "" {
		out.LastFailure = &c.LastFailure
	}
	for _, r := range c.Responses {
		out.DeliveryResponses = append(out.DeliveryResponses, jsonResponse{URL: r.URL, Body: r.Body, Code: r.Code, Headers: r.Headers,
			SentAt: r.SentAt.UTC().Format(time.RFC3339), Successful: strconv.FormatBool(r.Successful)})
	}
	for _, id := range c.EmailUserIDs {
		out.Users = append(out.Users, &jsonUser{ID: id})
	}
	switch c.SubscribableType {
	case OnTeam:
		out.Subscribable.Team = &jsonTeamRef{ID: c.SubscribableID}
	case OnProject:
		out.Subscribable.Project = &jsonProjectRef{ID: c.SubscribableID}
	default:
		out.Subscribable.Workspace = &jsonRef{ID: c.SubscribableID}
	}
	return out
}

func decode(w http.ResponseWriter, r *http.Request) (Changes, error) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return Changes{}, err
	}
	return decodeChanges(doc)
}

// decodeChanges reads a notification configuration's create or update
// document.
func decodeChanges(doc *tfeapi.Document) (Changes, error) {
	var o Changes
	if doc.Type != "" && doc.Type != "notification-configurations" {
		return o, core.Invalid("data.type must be notification-configurations, not %q", doc.Type)
	}
	var b struct {
		Name        *string      `json:"name"`
		Destination *Destination `json:"destination-type"`
		URL         *string      `json:"url"`
		Token       *string      `json:"token"`
		Enabled     *bool        `json:"enabled"`
		Triggers    *[]string    `json:"triggers"`
		EmailAddrs  *[]string    `json:"email-addresses"`
	}
	if err := doc.Attrs(&b); err != nil {
		return o, err
	}
	o = Changes{Name: b.Name, Destination: b.Destination, URL: b.URL, Token: b.Token, Enabled: b.Enabled, Triggers: b.Triggers, EmailAddrs: b.EmailAddrs}
	// As in HCP Terraform, a request without the users relationship sets
	// none: go-tfe omits an empty list, and its update tests expect an
	// update without users to clear them.
	o.EmailUserIDs = &[]string{}
	if _, ok := doc.Relationships["users"]; ok {
		users, err := doc.RelResources("users")
		if err != nil {
			return o, err
		}
		ids := []string{}
		for _, u := range users {
			ids = append(ids, u.ID)
		}
		o.EmailUserIDs = &ids
	}
	return o, nil
}

func (a *API) list(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		page, err := tfeapi.ParsePage(r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		cs, err := a.Service.List(r.Context(), kind, r.PathValue("id"))
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		items, pg := tfeapi.Paginate(cs, page)
		out := make([]*jsonConfig, len(items))
		for i, c := range items {
			out[i] = toJSON(c)
		}
		if r.URL.Query().Has("page[number]") || r.URL.Query().Has("page[size]") {
			tfeapi.RespondList(w, r, out, pg)
			return
		}
		// HCP Terraform answers an unpaged list without pagination meta.
		p, err := jsonapi.Marshal(out)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		w.Header().Set("Content-Type", tfeapi.ContentType)
		_ = json.NewEncoder(w).Encode(p)
	}
}

func (a *API) create(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		o, err := decode(w, r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		c, err := a.Service.Create(r.Context(), kind, r.PathValue("id"), o)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		tfeapi.Respond(w, r, http.StatusCreated, toJSON(c))
	}
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Get(r.Context(), r.PathValue("id")))
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.Get(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	o, err := decode(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Update(r.Context(), r.PathValue("id"), o))
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}

func (a *API) verify(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Verify(r.Context(), r.PathValue("id")))
}
