package policy

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// API serves the policy endpoints of the TFE API v2.
type API struct {
	Service *Service
	// IncludeWorkspace renders a workspace for include=workspaces and
	// include=workspace_exclusions.
	IncludeWorkspace func(r *http.Request, id string) (any, error)
	// StageReadable checks that the caller may read a task stage (the
	// run task domain owns stages).
	StageReadable func(r *http.Request, stageID string) error
}

// Register adds the routes to mux. Patterns are spelled out so that the
// authorization route table's test can read every one.
func (a *API) Register(mux *http.ServeMux) {
	h := tfeapi.Handle
	mux.HandleFunc("GET /api/v2/organizations/{org}/policies", h(a.listPolicies))
	mux.HandleFunc("POST /api/v2/organizations/{org}/policies", h(a.createPolicy))
	mux.HandleFunc("GET /api/v2/policies/{id}", h(a.getPolicy))
	mux.HandleFunc("PATCH /api/v2/policies/{id}", h(a.updatePolicy))
	mux.HandleFunc("DELETE /api/v2/policies/{id}", h(a.deletePolicy))
	mux.HandleFunc("PUT /api/v2/policies/{id}/upload", h(a.upload))
	mux.HandleFunc("GET /api/v2/policies/{id}/download", h(a.download))

	mux.HandleFunc("GET /api/v2/organizations/{org}/policy-sets", h(a.listSets))
	mux.HandleFunc("POST /api/v2/organizations/{org}/policy-sets", h(a.createSet))
	mux.HandleFunc("GET /api/v2/policy-sets/{id}", h(a.getSet))
	mux.HandleFunc("PATCH /api/v2/policy-sets/{id}", h(a.updateSet))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}", h(a.deleteSet))
	mux.HandleFunc("POST /api/v2/policy-sets/{id}/relationships/policies", h(a.relation("policy", true)))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}/relationships/policies", h(a.relation("policy", false)))
	mux.HandleFunc("POST /api/v2/policy-sets/{id}/relationships/workspaces", h(a.relation(ScopeWorkspace, true)))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}/relationships/workspaces", h(a.relation(ScopeWorkspace, false)))
	mux.HandleFunc("POST /api/v2/policy-sets/{id}/relationships/workspace-exclusions", h(a.relation(ScopeWorkspaceExclusion, true)))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}/relationships/workspace-exclusions", h(a.relation(ScopeWorkspaceExclusion, false)))
	mux.HandleFunc("POST /api/v2/policy-sets/{id}/relationships/projects", h(a.relation(ScopeProject, true)))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}/relationships/projects", h(a.relation(ScopeProject, false)))
	mux.HandleFunc("POST /api/v2/policy-sets/{id}/relationships/project-exclusions", h(a.relation(ScopeProjectExclusion, true)))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}/relationships/project-exclusions", h(a.relation(ScopeProjectExclusion, false)))
	mux.HandleFunc("POST /api/v2/policy-sets/{id}/tag-selectors", h(a.tagSelectors(true)))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}/tag-selectors", h(a.tagSelectors(false)))

	mux.HandleFunc("GET /api/v2/policy-sets/{id}/parameters", h(a.listParams))
	mux.HandleFunc("POST /api/v2/policy-sets/{id}/parameters", h(a.createParam))
	mux.HandleFunc("GET /api/v2/policy-sets/{id}/parameters/{param}", h(a.getParam))
	mux.HandleFunc("PATCH /api/v2/policy-sets/{id}/parameters/{param}", h(a.updateParam))
	mux.HandleFunc("DELETE /api/v2/policy-sets/{id}/parameters/{param}", h(a.deleteParam))

	mux.HandleFunc("POST /api/v2/policy-sets/{id}/versions", h(a.createVersion))
	mux.HandleFunc("GET /api/v2/policy-set-versions/{id}", h(a.getVersion))

	mux.HandleFunc("GET /api/v2/task-stages/{id}/policy-evaluations", h(a.listEvaluations))
	mux.HandleFunc("GET /api/v2/policy-evaluations/{id}/policy-set-outcomes", h(a.listOutcomes))
	mux.HandleFunc("GET /api/v2/policy-set-outcomes/{id}", h(a.getOutcome))
}

// RegisterCapability adds the version upload route to the capability mux
// (requests there carry a verified capability URL and no token).
func (a *API) RegisterCapability(mux *http.ServeMux) {
	mux.HandleFunc("PUT "+UploadPath("{id}"), tfeapi.Handle(a.receiveUpload))
}

func timeText(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func stamps(m map[string]time.Time) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v.UTC().Format(time.RFC3339)
	}
	return out
}

type jsonOrg struct {
	Name string `jsonapi:"primary,organizations"`
}

// jsonPolicy is go-tfe's Policy.
type jsonPolicy struct {
	ID               string              `jsonapi:"primary,policies"`
	Name             string              `jsonapi:"attr,name"`
	Kind             string              `jsonapi:"attr,kind"`
	Query            *string             `jsonapi:"attr,query"`
	Description      string              `jsonapi:"attr,description"`
	Enforce          []map[string]string `jsonapi:"attr,enforce"`
	EnforcementLevel string              `jsonapi:"attr,enforcement-level"`
	PolicySetCount   int                 `jsonapi:"attr,policy-set-count"`
	UpdatedAt        string              `jsonapi:"attr,updated-at"`
	Organization     *jsonOrg            `jsonapi:"relation,organization"`
}

func policyJSON(p *Policy) *jsonPolicy {
	j := &jsonPolicy{ID: p.ID, Name: p.Name, Kind: string(p.Kind), Description: p.Description, Enforce: []map[string]string{},
		EnforcementLevel: string(p.EnforcementLevel), PolicySetCount: p.PolicySetCount, UpdatedAt: timeText(p.UpdatedAt),
		Organization: &jsonOrg{Name: p.Organization}}
	if p.Kind == OPA {
		q := p.Query
		j.Query = &q
	}
	// HCP Terraform lists the enforced file once the policy has content.
	if p.HasContent {
		j.Enforce = append(j.Enforce, map[string]string{"path": p.EnforcePath, "mode": string(p.EnforcementLevel)})
	}
	return j
}

func decodePolicy(w http.ResponseWriter, r *http.Request) (PolicyChanges, error) {
	doc, b, err := tfeapi.DecodeAttrs[struct {
		Name             *string   `json:"name"`
		Description      *string   `json:"description"`
		Kind             *Kind     `json:"kind"`
		Query            *string   `json:"query"`
		EnforcementLevel *Level    `json:"enforcement-level"`
		Enforce          []Enforce `json:"enforce"`
	}](w, r, 0)
	if err != nil {
		return PolicyChanges{}, err
	}
	if doc.Type != "" && doc.Type != "policies" {
		return PolicyChanges{}, core.Invalid("data.type must be policies, not %q", doc.Type)
	}
	return PolicyChanges{Name: b.Name, Description: b.Description, Kind: b.Kind, Query: b.Query, EnforcementLevel: b.EnforcementLevel, Enforce: b.Enforce}, nil
}

func (a *API) listPolicies(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.StorePage(w, r, func(offset, limit int) ([]*Policy, int, error) {
		return a.Service.ListPolicies(r.Context(), r.PathValue("org"), r.URL.Query().Get("search[name]"), Kind(r.URL.Query().Get("filter[kind]")), offset, limit)
	}, policyJSON)
}

func (a *API) createPolicy(w http.ResponseWriter, r *http.Request) error {
	c, err := decodePolicy(w, r)
	if err != nil {
		return err
	}
	p, err := a.Service.CreatePolicy(r.Context(), r.PathValue("org"), c)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, policyJSON(p))
	return nil
}

func (a *API) getPolicy(w http.ResponseWriter, r *http.Request) error {
	p, err := a.Service.Policy(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, policyJSON(p))
	return nil
}

func (a *API) updatePolicy(w http.ResponseWriter, r *http.Request) error {
	c, err := decodePolicy(w, r)
	if err != nil {
		return err
	}
	p, err := a.Service.UpdatePolicy(r.Context(), r.PathValue("id"), c)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, policyJSON(p))
	return nil
}

func (a *API) deletePolicy(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.DeletePolicy(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) upload(w http.ResponseWriter, r *http.Request) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxPolicyBytes))
	if err != nil {
		return &core.Error{Kind: core.KindTooLarge, Detail: "a policy may hold at most " + strconv.Itoa(MaxPolicyBytes) + " bytes"}
	}
	if err := a.Service.Upload(r.Context(), r.PathValue("id"), b); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (a *API) download(w http.ResponseWriter, r *http.Request) error {
	b, err := a.Service.Download(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(b)
	return nil
}

// Policy sets.

type jsonRef struct {
	ID string `jsonapi:"primary,workspaces"`
}

type jsonProjectRef struct {
	ID string `jsonapi:"primary,projects"`
}

type jsonPolicyRef struct {
	ID string `jsonapi:"primary,policies"`
}

// jsonSet is go-tfe's PolicySet.
type jsonSet struct {
	ID                   string            `jsonapi:"primary,policy-sets"`
	Name                 string            `jsonapi:"attr,name"`
	Description          string            `jsonapi:"attr,description"`
	Kind                 string            `jsonapi:"attr,kind"`
	Overridable          *bool             `jsonapi:"attr,overridable"`
	Global               bool              `jsonapi:"attr,global"`
	PoliciesPath         string            `jsonapi:"attr,policies-path"`
	PolicyCount          int               `jsonapi:"attr,policy-count"`
	VCSRepo              *vcsrepo.View     `jsonapi:"attr,vcs-repo"`
	WorkspaceCount       int               `jsonapi:"attr,workspace-count"`
	ProjectCount         int               `jsonapi:"attr,project-count"`
	CreatedAt            string            `jsonapi:"attr,created-at"`
	UpdatedAt            string            `jsonapi:"attr,updated-at"`
	AgentEnabled         bool              `jsonapi:"attr,agent-enabled"`
	PolicyToolVersion    string            `jsonapi:"attr,policy-tool-version"`
	PolicyUpdatePatterns []string          `jsonapi:"attr,policy-update-patterns"`
	TagSelectors         []jsonTagSelector `jsonapi:"attr,tag-selectors"`
	Organization         *jsonOrg          `jsonapi:"relation,organization"`
	Workspaces           []*jsonRef        `jsonapi:"relation,workspaces"`
	Policies             []*jsonPolicyRef  `jsonapi:"relation,policies"`
	NewestVersion        *jsonVersionRef   `jsonapi:"relation,newest-version,omitempty"`
	CurrentVersion       *jsonVersionRef   `jsonapi:"relation,current-version,omitempty"`
	WorkspaceExclusions  []*jsonRef        `jsonapi:"relation,workspace-exclusions"`
	Projects             []*jsonProjectRef `jsonapi:"relation,projects"`
	ProjectExclusions    []*jsonProjectRef `jsonapi:"relation,project-exclusions"`
}

// jsonTagSelector is go-tfe's PolicySetTagSelector (sent) and
// PolicySetTagSelectorAttr (read back): tag-value is null for a key-only
// selector.
type jsonTagSelector struct {
	Key       string  `json:"tag-key"`
	Value     *string `json:"tag-value"`
	IsExclude bool    `json:"is-exclude"`
}

func selectorsJSON(sels []TagSelector) []jsonTagSelector {
	out := make([]jsonTagSelector, len(sels))
	for i, t := range sels {
		out[i] = jsonTagSelector{Key: t.Key, Value: t.Value, IsExclude: t.Exclude}
	}
	return out
}

func selectorsOf(js []jsonTagSelector) []TagSelector {
	out := make([]TagSelector, len(js))
	for i, j := range js {
		out[i] = TagSelector{Key: j.Key, Value: j.Value, Exclude: j.IsExclude}
	}
	return out
}

type jsonVersionRef struct {
	ID string `jsonapi:"primary,policy-set-versions"`
}

func refs(ids []string) []*jsonRef {
	out := []*jsonRef{}
	for _, id := range ids {
		out = append(out, &jsonRef{ID: id})
	}
	return out
}

func projectRefs(ids []string) []*jsonProjectRef {
	out := []*jsonProjectRef{}
	for _, id := range ids {
		out = append(out, &jsonProjectRef{ID: id})
	}
	return out
}

func setJSON(s *Set) *jsonSet {
	j := &jsonSet{ID: s.ID, Name: s.Name, Description: s.Description, Kind: string(s.Kind), Global: s.Global, PoliciesPath: s.PoliciesPath,
		PolicyCount: len(s.PolicyIDs), WorkspaceCount: len(s.Scopes[ScopeWorkspace]), ProjectCount: len(s.Scopes[ScopeProject]),
		CreatedAt: timeText(s.CreatedAt), UpdatedAt: timeText(s.UpdatedAt), AgentEnabled: s.AgentEnabled, PolicyToolVersion: s.PolicyToolVersion,
		PolicyUpdatePatterns: s.PolicyUpdatePatterns, TagSelectors: selectorsJSON(s.TagSelectors), Organization: &jsonOrg{Name: s.Organization},
		Workspaces: refs(s.Scopes[ScopeWorkspace]), Policies: []*jsonPolicyRef{}, WorkspaceExclusions: refs(s.Scopes[ScopeWorkspaceExclusion]),
		Projects: projectRefs(s.Scopes[ScopeProject]), ProjectExclusions: projectRefs(s.Scopes[ScopeProjectExclusion])}
	if s.Kind == OPA {
		o := s.Overridable
		j.Overridable = &o
	}
	if j.PolicyUpdatePatterns == nil {
		j.PolicyUpdatePatterns = []string{}
	}
	for _, id := range s.PolicyIDs {
		j.Policies = append(j.Policies, &jsonPolicyRef{ID: id})
	}
	if s.NewestVersionID != "" {
		j.NewestVersion = &jsonVersionRef{ID: s.NewestVersionID}
	}
	if s.CurrentVersionID != "" {
		j.CurrentVersion = &jsonVersionRef{ID: s.CurrentVersionID}
	}
	j.VCSRepo = s.VCSRepo.View()
	return j
}

var setIncludes = []string{"policies", "workspaces", "current_version", "newest_version", "projects", "workspace_exclusions", "project_exclusions"}

// included renders what a set response includes.
func (a *API) included(r *http.Request, inc map[string]bool, sets []*Set) ([]any, error) {
	var out []any
	seen := map[string]bool{}
	add := func(id string, render func() (any, error)) error {
		if id == "" || seen[id] {
			return nil
		}
		seen[id] = true
		v, err := render()
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}
	for _, s := range sets {
		if inc["policies"] {
			for _, id := range s.PolicyIDs {
				if err := add(id, func() (any, error) {
					p, err := a.Service.Policy(r.Context(), id)
					return policyJSON(p), err
				}); err != nil {
					return nil, err
				}
			}
		}
		for kind, name := range map[string]string{ScopeWorkspace: "workspaces", ScopeWorkspaceExclusion: "workspace_exclusions"} {
			if !inc[name] || a.IncludeWorkspace == nil {
				continue
			}
			for _, id := range s.Scopes[kind] {
				if err := add(id, func() (any, error) { return a.IncludeWorkspace(r, id) }); err != nil {
					return nil, err
				}
			}
		}
		for name, id := range map[string]string{"current_version": s.CurrentVersionID, "newest_version": s.NewestVersionID} {
			if !inc[name] {
				continue
			}
			if err := add(id, func() (any, error) {
				v, err := a.Service.Version(r.Context(), id)
				if err != nil {
					return nil, err
				}
				return a.versionJSON(v), nil
			}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func decodeSet(w http.ResponseWriter, r *http.Request) (SetChanges, error) {
	doc, b, err := tfeapi.DecodeAttrs[struct {
		Name                 *string            `json:"name"`
		Description          *string            `json:"description"`
		Kind                 *Kind              `json:"kind"`
		Global               *bool              `json:"global"`
		Overridable          *bool              `json:"overridable"`
		AgentEnabled         *bool              `json:"agent-enabled"`
		PolicyToolVersion    *string            `json:"policy-tool-version"`
		PoliciesPath         *string            `json:"policies-path"`
		PolicyUpdatePatterns *[]string          `json:"policy-update-patterns"`
		VCSRepo              json.RawMessage    `json:"vcs-repo"`
		TagSelectors         *[]jsonTagSelector `json:"tag-selectors"`
	}](w, r, 0)
	if err != nil {
		return SetChanges{}, err
	}
	if doc.Type != "" && doc.Type != "policy-sets" {
		return SetChanges{}, core.Invalid("data.type must be policy-sets, not %q", doc.Type)
	}
	repo, remove, err := vcsrepo.Decode(b.VCSRepo)
	if err != nil {
		return SetChanges{}, err
	}
	c := SetChanges{Name: b.Name, Description: b.Description, Kind: b.Kind, Global: b.Global, Overridable: b.Overridable,
		AgentEnabled: b.AgentEnabled, PolicyToolVersion: b.PolicyToolVersion, PoliciesPath: b.PoliciesPath,
		PolicyUpdatePatterns: b.PolicyUpdatePatterns, Scopes: map[string][]string{}, VCSRepo: repo, RemoveVCS: remove}
	if b.TagSelectors != nil {
		sels := selectorsOf(*b.TagSelectors)
		c.TagSelectors = &sels
	}
	for rel, kind := range map[string]string{"policies": "policy", "workspaces": ScopeWorkspace, "workspace-exclusions": ScopeWorkspaceExclusion,
		"projects": ScopeProject, "project-exclusions": ScopeProjectExclusion} {
		res, err := doc.RelResources(rel)
		if err != nil {
			return SetChanges{}, err
		}
		for _, x := range res {
			if kind == "policy" {
				c.PolicyIDs = append(c.PolicyIDs, x.ID)
			} else {
				c.Scopes[kind] = append(c.Scopes[kind], x.ID)
			}
		}
	}
	return c, nil
}

func (a *API) respondSet(w http.ResponseWriter, r *http.Request, status int, s *Set) error {
	inc, err := tfeapi.Includes(r, setIncludes...)
	if err != nil {
		return err
	}
	included, err := a.included(r, inc, []*Set{s})
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, status, setJSON(s), included...)
	return nil
}

func (a *API) listSets(w http.ResponseWriter, r *http.Request) error {
	inc, err := tfeapi.Includes(r, setIncludes...)
	if err != nil {
		return err
	}
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	items, total, err := a.Service.ListSets(r.Context(), r.PathValue("org"), r.URL.Query().Get("search[name]"), Kind(r.URL.Query().Get("filter[kind]")), page.Offset(), page.Size)
	if err != nil {
		return err
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	out := make([]*jsonSet, len(items))
	for i, s := range items {
		out[i] = setJSON(s)
	}
	included, err := a.included(r, inc, items)
	if err != nil {
		return err
	}
	tfeapi.RespondList(w, r, out, pg, included...)
	return nil
}

func (a *API) createSet(w http.ResponseWriter, r *http.Request) error {
	c, err := decodeSet(w, r)
	if err != nil {
		return err
	}
	s, err := a.Service.CreateSet(r.Context(), r.PathValue("org"), c)
	if err != nil {
		return err
	}
	return a.respondSet(w, r, http.StatusCreated, s)
}

func (a *API) getSet(w http.ResponseWriter, r *http.Request) error {
	s, err := a.Service.Set(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return a.respondSet(w, r, http.StatusOK, s)
}

func (a *API) updateSet(w http.ResponseWriter, r *http.Request) error {
	c, err := decodeSet(w, r)
	if err != nil {
		return err
	}
	if c.Kind != nil {
		return core.Invalid("the kind of a policy set cannot change")
	}
	s, err := a.Service.UpdateSet(r.Context(), r.PathValue("id"), c)
	if err != nil {
		return err
	}
	return a.respondSet(w, r, http.StatusOK, s)
}

func (a *API) deleteSet(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.DeleteSet(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) relation(kind string, add bool) tfeapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		res, err := tfeapi.DecodeResources(w, r)
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(res))
		for _, x := range res {
			ids = append(ids, x.ID)
		}
		if err := a.Service.ChangeRelation(r.Context(), r.PathValue("id"), kind, ids, add); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// tagSelectors adds or removes tag selectors: data is an array of plain
// selector objects, not JSON:API resources (go-tfe's AddTagSelectors and
// RemoveTagSelectors); 204 with no body.
func (a *API) tagSelectors(add bool) tfeapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var data []jsonTagSelector
		if err := tfeapi.DecodeData(w, r, &data); err != nil {
			return err
		}
		if err := a.Service.ChangeTagSelectors(r.Context(), r.PathValue("id"), selectorsOf(data), add); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// Parameters.

type jsonSetRef struct {
	ID string `jsonapi:"primary,policy-sets"`
}

// jsonParam is go-tfe's PolicySetParameter. A sensitive value is never
// returned.
type jsonParam struct {
	ID           string      `jsonapi:"primary,vars"`
	Key          string      `jsonapi:"attr,key"`
	Value        string      `jsonapi:"attr,value"`
	Category     string      `jsonapi:"attr,category"`
	Sensitive    bool        `jsonapi:"attr,sensitive"`
	Configurable *jsonSetRef `jsonapi:"relation,configurable"`
}

func paramJSON(p *Parameter) *jsonParam {
	j := &jsonParam{ID: p.ID, Key: p.Key, Value: p.Value, Category: "policy-set", Sensitive: p.Sensitive, Configurable: &jsonSetRef{ID: p.SetID}}
	if p.Sensitive {
		j.Value = ""
	}
	return j
}

func decodeParam(w http.ResponseWriter, r *http.Request) (ParameterChanges, error) {
	doc, b, err := tfeapi.DecodeAttrs[struct {
		Key       *string `json:"key"`
		Value     *string `json:"value"`
		Category  *string `json:"category"`
		Sensitive *bool   `json:"sensitive"`
	}](w, r, 0)
	if err != nil {
		return ParameterChanges{}, err
	}
	if doc.Type != "" && doc.Type != "vars" {
		return ParameterChanges{}, core.Invalid("data.type must be vars, not %q", doc.Type)
	}
	return ParameterChanges{Key: b.Key, Value: b.Value, Category: b.Category, Sensitive: b.Sensitive}, nil
}

func (a *API) listParams(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.ListPage(w, r, func() ([]*Parameter, error) { return a.Service.Parameters(r.Context(), r.PathValue("id")) }, paramJSON)
}

func (a *API) createParam(w http.ResponseWriter, r *http.Request) error {
	c, err := decodeParam(w, r)
	if err != nil {
		return err
	}
	p, err := a.Service.CreateParameter(r.Context(), r.PathValue("id"), c)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, paramJSON(p))
	return nil
}

func (a *API) getParam(w http.ResponseWriter, r *http.Request) error {
	p, err := a.Service.Parameter(r.Context(), r.PathValue("id"), r.PathValue("param"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, paramJSON(p))
	return nil
}

func (a *API) updateParam(w http.ResponseWriter, r *http.Request) error {
	c, err := decodeParam(w, r)
	if err != nil {
		return err
	}
	p, err := a.Service.UpdateParameter(r.Context(), r.PathValue("id"), r.PathValue("param"), c)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, paramJSON(p))
	return nil
}

func (a *API) deleteParam(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.DeleteParameter(r.Context(), r.PathValue("id"), r.PathValue("param")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Versions.

// jsonVersion is go-tfe's PolicySetVersion.
type jsonVersion struct {
	ID                string            `jsonapi:"primary,policy-set-versions"`
	Source            string            `jsonapi:"attr,source"`
	Status            string            `jsonapi:"attr,status"`
	StatusTimestamps  map[string]string `jsonapi:"attr,status-timestamps"`
	Error             string            `jsonapi:"attr,error"`
	ErrorMessage      string            `jsonapi:"attr,error-message"`
	CreatedAt         string            `jsonapi:"attr,created-at"`
	UpdatedAt         string            `jsonapi:"attr,updated-at"`
	IngressAttributes *map[string]any   `jsonapi:"attr,ingress-attributes"`
	PolicySet         *jsonSetRef       `jsonapi:"relation,policy-set"`
	links             jsonapi.Links
}

// JSONAPILinks implements jsonapi.Linkable.
func (j *jsonVersion) JSONAPILinks() *jsonapi.Links { return &j.links }

func (a *API) versionJSON(v *Version) *jsonVersion {
	j := &jsonVersion{ID: v.ID, Source: v.Source, Status: v.Status, StatusTimestamps: stamps(v.Timestamps), Error: v.Error, ErrorMessage: v.Error,
		CreatedAt: timeText(v.CreatedAt), UpdatedAt: timeText(v.UpdatedAt), PolicySet: &jsonSetRef{ID: v.SetID}, links: jsonapi.Links{}}
	if in := v.Ingress; in != nil {
		j.IngressAttributes = &map[string]any{"commit-sha": in.CommitSHA, "commit-url": in.CommitURL, "identifier": in.Identifier}
	}
	if u := a.Service.UploadURL(v); u != "" {
		j.links["upload"] = u
	}
	return j
}

func (a *API) createVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := a.Service.CreateVersion(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, a.versionJSON(v))
	return nil
}

func (a *API) getVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := a.Service.Version(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.versionJSON(v))
	return nil
}

func (a *API) receiveUpload(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.ReceiveUpload(r.Context(), r.PathValue("id"), r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// Evaluations.

type jsonAttachable struct {
	ID string `jsonapi:"primary,task-stages"`
}

// jsonEval is go-tfe's PolicyEvaluation.
type jsonEval struct {
	ID               string            `jsonapi:"primary,policy-evaluations"`
	Status           string            `jsonapi:"attr,status"`
	PolicyKind       string            `jsonapi:"attr,policy-kind"`
	StatusTimestamps map[string]string `jsonapi:"attr,status-timestamps"`
	ResultCount      ResultCount       `jsonapi:"attr,result-count"`
	CreatedAt        string            `jsonapi:"attr,created-at"`
	UpdatedAt        string            `jsonapi:"attr,updated-at"`
	TaskStage        *jsonAttachable   `jsonapi:"relation,policy-attachable"`
}

func evalJSON(e *Evaluation) *jsonEval {
	return &jsonEval{ID: e.ID, Status: string(e.Status), PolicyKind: string(e.Kind), StatusTimestamps: stamps(e.Timestamps), ResultCount: e.Count,
		CreatedAt: timeText(e.CreatedAt), UpdatedAt: timeText(e.UpdatedAt), TaskStage: &jsonAttachable{ID: e.StageID}}
}

type jsonEvalRef struct {
	ID string `jsonapi:"primary,policy-evaluations"`
}

// jsonOutcome is go-tfe's PolicySetOutcome.
type jsonOutcome struct {
	ID                   string       `jsonapi:"primary,policy-set-outcomes"`
	Outcomes             []Outcome    `jsonapi:"attr,outcomes"`
	Error                string       `jsonapi:"attr,error"`
	Overridable          *bool        `jsonapi:"attr,overridable"`
	PolicySetName        string       `jsonapi:"attr,policy-set-name"`
	PolicySetDescription string       `jsonapi:"attr,policy-set-description"`
	ResultCount          ResultCount  `jsonapi:"attr,result_count"`
	PolicyEvaluation     *jsonEvalRef `jsonapi:"relation,policy-evaluation"`
}

func outcomeJSON(o *SetOutcome) *jsonOutcome {
	j := &jsonOutcome{ID: o.ID, Outcomes: o.Outcomes, Error: o.Error, PolicySetName: o.SetName, PolicySetDescription: o.SetDescription,
		ResultCount: o.Count, PolicyEvaluation: &jsonEvalRef{ID: o.EvaluationID}}
	if j.Outcomes == nil {
		j.Outcomes = []Outcome{}
	}
	if o.Kind == OPA {
		ov := o.Overridable
		j.Overridable = &ov
	}
	return j
}

func (a *API) listEvaluations(w http.ResponseWriter, r *http.Request) error {
	if a.StageReadable == nil {
		return core.NotFound("task stage %q not found", r.PathValue("id"))
	}
	if err := a.StageReadable(r, r.PathValue("id")); err != nil {
		return err
	}
	return tfeapi.ListPage(w, r, func() ([]*Evaluation, error) { return a.Service.evaluationsOf(r.Context(), r.PathValue("id")) }, evalJSON)
}

var filterRE = regexp.MustCompile(`^filter\[([^\]]+)\]\[(status|enforcement_level)\]$`)

func (a *API) listOutcomes(w http.ResponseWriter, r *http.Request) error {
	byIndex := map[string]*OutcomeFilter{}
	for k, v := range r.URL.Query() {
		m := filterRE.FindStringSubmatch(k)
		if m == nil || len(v) == 0 {
			continue
		}
		f := byIndex[m[1]]
		if f == nil {
			f = &OutcomeFilter{}
			byIndex[m[1]] = f
		}
		if m[2] == "status" {
			f.Status = v[0]
		} else {
			f.EnforcementLevel = v[0]
		}
	}
	keys := make([]string, 0, len(byIndex))
	for k := range byIndex {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	filters := make([]OutcomeFilter, 0, len(keys))
	for _, k := range keys {
		filters = append(filters, *byIndex[k])
	}
	return tfeapi.ListPage(w, r, func() ([]*SetOutcome, error) {
		return a.Service.SetOutcomes(r.Context(), r.PathValue("id"), filters)
	}, outcomeJSON)
}

func (a *API) getOutcome(w http.ResponseWriter, r *http.Request) error {
	o, err := a.Service.SetOutcome(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, outcomeJSON(o))
	return nil
}
