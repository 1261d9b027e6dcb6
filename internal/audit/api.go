package audit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the audit trail and the organization audit configuration.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organization/audit-trail", a.trail) // TrailPattern, spelled out for the route table's test
	mux.HandleFunc("GET /api/v2/admin/audit-trail", a.siteTrail)
	mux.HandleFunc("GET /api/v2/organizations/{org}/audit-configuration", a.readConfiguration)
	mux.HandleFunc("PATCH /api/v2/organizations/{org}/audit-configuration", a.updateConfiguration)
	mux.HandleFunc("POST /api/v2/organizations/{org}/audit-configuration/test", a.test)
}

// The audit trail is plain JSON in HCP Terraform's shape (go-tfe's
// AuditTrail), not JSON:API. Fields beyond HCP's (the actor's token kind,
// the client address and user agent) are additions clients ignore.
type jsonTrail struct {
	Data       []jsonEvent    `json:"data"`
	Pagination jsonPagination `json:"pagination"`
}

type jsonPagination struct {
	CurrentPage  int  `json:"current_page"`
	PreviousPage *int `json:"prev_page"`
	NextPage     *int `json:"next_page"`
	TotalPages   int  `json:"total_pages"`
	TotalCount   int  `json:"total_count"`
}

type jsonEvent struct {
	ID        string       `json:"id"`
	Version   string       `json:"version"`
	Type      string       `json:"type"`
	Timestamp string       `json:"timestamp"`
	Auth      jsonAuth     `json:"auth"`
	Request   jsonRequest  `json:"request"`
	Resource  jsonResource `json:"resource"`
}

type jsonAuth struct {
	AccessorID     string  `json:"accessor_id"`
	AccessorType   string  `json:"accessor_type"`
	Description    string  `json:"description"`
	Type           string  `json:"type"`
	ImpersonatorID *string `json:"impersonator_id"`
	OrganizationID string  `json:"organization_id"`
	TokenID        string  `json:"token_id"`
}

type jsonRequest struct {
	ID        string `json:"id"`
	ClientIP  string `json:"client_ip"`
	UserAgent string `json:"user_agent"`
}

type jsonResource struct {
	ID     string            `json:"id"`
	Type   string            `json:"type"`
	Action string            `json:"action"`
	Meta   map[string]string `json:"meta"`
}

func toJSON(e *Event) jsonEvent {
	return jsonEvent{
		ID: e.ID, Version: "0", Type: "Resource", Timestamp: e.Timestamp.UTC().Format("2006-01-02T15:04:05.000000Z"),
		Auth: jsonAuth{AccessorID: e.Actor.ID, AccessorType: string(e.Actor.Kind), Description: e.Actor.Name, Type: "Client",
			OrganizationID: e.OrganizationID, TokenID: e.Actor.TokenID},
		Request:  jsonRequest{ID: e.Request.ID, ClientIP: e.Request.ClientIP, UserAgent: e.Request.UserAgent},
		Resource: jsonResource{ID: e.Resource.ID, Type: e.Resource.Type, Action: e.Resource.Action, Meta: e.Resource.Meta},
	}
}

// DefaultPageSize and MaxPageSize are HCP Terraform's (1000 events a page).
const (
	DefaultPageSize = 1000
	MaxPageSize     = 1000
)

// parseFilter reads since, page[number] and page[size].
func parseFilter(r *http.Request) (Filter, error) {
	q := r.URL.Query()
	f := Filter{Page: 1, Size: DefaultPageSize}
	for name, dst := range map[string]*int{"page[number]": &f.Page, "page[size]": &f.Size} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return f, core.BadRequest("%s must be a positive integer, not %q", name, v)
			}
			*dst = n
		}
	}
	f.Size = min(f.Size, MaxPageSize)
	if v := q.Get("since"); v != "" {
		after, err := parseSince(v)
		if err != nil {
			return f, err
		}
		f.After = after
	}
	return f, nil
}

// parseSince turns the since parameter (ISO 8601, as HCP Terraform takes
// it: 2020-05-30T17:52:46.000Z) into the first instant it admits. "After"
// is read at the precision given: since=…T17:52:46Z admits events from
// 17:52:47 on, since=…T17:52:46.500Z from 17:52:46.501. (An event in the
// same second as a whole-second since is not after it, as far as the
// caller could say.)
func parseSince(v string) (time.Time, error) {
	// A '+' of an offset sent unescaped arrives as a space.
	v = strings.ReplaceAll(strings.TrimSpace(v), " ", "+")
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, core.BadRequest("since must be an ISO 8601 time such as 2020-05-30T17:52:46.000Z, not %q", v)
	}
	digits := 0
	if i := strings.IndexByte(v, '.'); i >= 0 {
		for _, c := range v[i+1:] {
			if c < '0' || c > '9' {
				break
			}
			digits++
		}
	}
	unit := time.Second
	for range min(digits, 6) {
		unit /= 10
	}
	return t.UTC().Truncate(unit).Add(unit), nil
}

func (a *API) respondTrail(w http.ResponseWriter, f Filter, events []*Event, total int) {
	out := jsonTrail{Data: make([]jsonEvent, 0, len(events))}
	for _, e := range events {
		out.Data = append(out.Data, toJSON(e))
	}
	pages := max((total+f.Size-1)/f.Size, 1)
	out.Pagination = jsonPagination{CurrentPage: f.Page, TotalPages: pages, TotalCount: total}
	if f.Page > 1 {
		prev := min(f.Page-1, pages)
		out.Pagination.PreviousPage = &prev
	}
	if f.Page < pages {
		next := f.Page + 1
		out.Pagination.NextPage = &next
	}
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", out)
}

func (a *API) trail(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	events, total, err := a.Service.List(r.Context(), f)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTrail(w, f, events, total)
}

func (a *API) siteTrail(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	events, total, err := a.Service.ListAll(r.Context(), f)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTrail(w, f, events, total)
}

// jsonConfiguration is go-tfe's OrganizationAuditConfiguration. Terrace
// has no HCP audit log streaming: it is off and cannot be turned on.
type jsonConfiguration struct {
	ID                   string              `jsonapi:"primary,audit-configurations"`
	AuditTrails          *jsonTrails         `jsonapi:"attr,audit-trails"`
	HCPAuditLogStreaming *jsonStreaming      `jsonapi:"attr,hcp-audit-log-streaming"`
	Permissions          *jsonPermissions    `jsonapi:"attr,permissions"`
	Timestamps           *jsonTimestamps     `jsonapi:"attr,timestamps"`
	UpdatedAt            time.Time           `jsonapi:"attr,updated-at,iso8601"`
	Organization         *jsonOrganizationID `jsonapi:"relation,organization"`
}

type jsonTrails struct {
	Enabled bool `json:"enabled"`
}

type jsonStreaming struct {
	Enabled                bool   `json:"enabled"`
	OrganizationID         string `json:"organization-id"`
	UseDefaultOrganization bool   `json:"use-default-organization"`
}

type jsonPermissions struct {
	CanEnableStreaming        bool `json:"can-enable-hcp-audit-log-streaming"`
	CanSetStreamingOrg        bool `json:"can-set-hcp-audit-log-streaming-organization-id"`
	CanUseDefaultStreamingOrg bool `json:"can-use-default-audit-log-streaming-organization"`
}

type jsonTimestamps struct {
	TrailsDisabledAt *string `json:"audit-trails-disabled-at,omitempty"`
	TrailsEnabledAt  *string `json:"audit-trails-enabled-at,omitempty"`
}

type jsonOrganizationID struct {
	Name string `jsonapi:"primary,organizations"`
}

func iso(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05.000Z")
	return &s
}

func renderConfiguration(c *Configuration) *jsonConfiguration {
	return &jsonConfiguration{
		ID:                   "ac-" + strings.TrimPrefix(c.OrganizationID, "org-"),
		AuditTrails:          &jsonTrails{Enabled: c.TrailsEnabled},
		HCPAuditLogStreaming: &jsonStreaming{},
		Permissions:          &jsonPermissions{},
		Timestamps:           &jsonTimestamps{TrailsEnabledAt: iso(c.TrailsEnabledAt), TrailsDisabledAt: iso(c.TrailsDisabledAt)},
		UpdatedAt:            c.UpdatedAt,
		Organization:         &jsonOrganizationID{Name: c.OrganizationName},
	}
}

func (a *API) readConfiguration(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, renderConfiguration)(a.Service.Configuration(r.Context(), r.PathValue("org")))
}

func (a *API) updateConfiguration(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts struct {
		AuditTrails *struct {
			Enabled *bool `json:"enabled"`
		} `json:"audit-trails"`
		Streaming *struct {
			Enabled *bool `json:"enabled"`
		} `json:"hcp-audit-log-streaming"`
	}
	if err := doc.Attrs(&opts); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if opts.Streaming != nil && opts.Streaming.Enabled != nil && *opts.Streaming.Enabled {
		tfeapi.Error(w, r, core.Invalid("hcp-audit-log-streaming cannot be enabled: Terrace keeps its audit trail itself (read it at /api/v2/organization/audit-trail)"))
		return
	}
	org := r.PathValue("org")
	var c *Configuration
	if opts.AuditTrails != nil && opts.AuditTrails.Enabled != nil {
		c, err = a.Service.SetTrailsEnabled(r.Context(), org, *opts.AuditTrails.Enabled)
	} else {
		c, err = a.Service.Configuration(r.Context(), org)
	}
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, renderConfiguration(c))
}

// test answers go-tfe's OrganizationAuditConfigurations.Test: the request
// itself is the test event (the Recorder records it), and its request ID
// is returned so that it can be found in the trail.
func (a *API) test(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.Configuration(r.Context(), r.PathValue("org")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", map[string]string{"request-id": RequestID(r.Context())})
}
