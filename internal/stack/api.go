package stack

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// API serves the stack endpoints of the TFE API v2 (HCP Terraform's
// Stacks as go-tfe v1.109 speaks them).
type API struct {
	Service *Service
}

// handler is an API handler that returns its error; handle writes it.
type handler func(w http.ResponseWriter, r *http.Request) error

func handle(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			tfeapi.Error(w, r, err)
		}
	}
}

// Register adds the token-protected routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v2/stacks", handle(a.createStack))
	mux.HandleFunc("GET /api/v2/organizations/{org}/stacks", handle(a.listStacks))
	mux.HandleFunc("GET /api/v2/stacks/{id}", handle(a.getStack))
	mux.HandleFunc("PATCH /api/v2/stacks/{id}", handle(a.updateStack))
	mux.HandleFunc("DELETE /api/v2/stacks/{id}", handle(a.deleteStack))
	mux.HandleFunc("POST /api/v2/stacks/{id}/fetch-latest-from-vcs", handle(a.fetchFromVCS))
	mux.HandleFunc("POST /api/v2/stacks/{id}/stack-configurations", handle(a.createConfiguration))
	mux.HandleFunc("GET /api/v2/stacks/{id}/stack-configurations", handle(a.listConfigurations))
	mux.HandleFunc("GET /api/v2/stacks/{id}/stack-configuration-summaries", handle(a.listConfigurationSummaries))
	mux.HandleFunc("GET /api/v2/stacks/{id}/stack-deployments", handle(a.listDeployments))
	mux.HandleFunc("GET /api/v2/stack-configurations/{id}", handle(a.getConfiguration))
	mux.HandleFunc("GET /api/v2/stack-configurations/{id}/upload-url", handle(a.uploadURL))
	mux.HandleFunc("GET /api/v2/stack-configurations/{id}/stack-diagnostics", handle(a.configurationDiagnostics))
	mux.HandleFunc("GET /api/v2/stack-configurations/{id}/stack-deployment-groups", handle(a.listGroups))
	mux.HandleFunc("GET /api/v2/stack-configurations/{id}/stack-deployment-groups/{name}", handle(a.groupByName))
	mux.HandleFunc("GET /api/v2/stack-configurations/{id}/stack-deployment-group-summaries", handle(a.listGroupSummaries))
	mux.HandleFunc("GET /api/v2/stack-deployment-groups/{id}", handle(a.getGroup))
	mux.HandleFunc("GET /api/v2/stack-diagnostics/{id}", handle(a.getDiagnostic))
	a.registerRuns(mux)
	a.registerStates(mux)
}

func conflictf(format string, args ...any) error { return core.Conflict(format, args...) }

// RegisterCapability adds the archive upload route to the capability mux
// (requests there carry a verified signed URL and no token).
func (a *API) RegisterCapability(mux *http.ServeMux) {
	mux.HandleFunc("PUT "+UploadPath("{id}"), handle(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := a.Service.Upload(r.Context(), r.PathValue("id"), r.Body); err != nil {
			return err
		}
		w.WriteHeader(http.StatusOK)
		return nil
	}))
}

// Wire forms (go-tfe's types).

type jsonStack struct {
	ID                 string            `jsonapi:"primary,stacks"`
	Name               string            `jsonapi:"attr,name"`
	Description        string            `jsonapi:"attr,description"`
	VCSRepo            *jsonVCSRepo      `jsonapi:"attr,vcs-repo"`
	SpeculativeEnabled bool              `jsonapi:"attr,speculative-enabled"`
	ExecutionMode      string            `jsonapi:"attr,execution-mode"`
	CreatedAt          time.Time         `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt          time.Time         `jsonapi:"attr,updated-at,iso8601"`
	UpstreamCount      int               `jsonapi:"attr,upstream-count"`
	DownstreamCount    int               `jsonapi:"attr,downstream-count"`
	InputsCount        int               `jsonapi:"attr,inputs-count"`
	OutputsCount       int               `jsonapi:"attr,outputs-count"`
	CreationSource     string            `jsonapi:"attr,creation-source"`
	WorkingDirectory   string            `jsonapi:"attr,working-directory"`
	TriggerPatterns    []string          `jsonapi:"attr,trigger-patterns"`
	TerraformVersion   string            `jsonapi:"attr,terraform-version"`
	Project            *jsonRef          `jsonapi:"relation,project"`
	AgentPool          *jsonAgentPoolRef `jsonapi:"relation,agent-pool,omitempty"`
	LatestConfig       *jsonStackCfgRef  `jsonapi:"relation,latest-stack-configuration,omitempty"`
}

type jsonRef struct {
	ID string `jsonapi:"primary,projects"`
}

// jsonVCSRepo is a stack's vcs-repo (go-tfe's StackVCSRepo, and what a
// workspace's shows besides).
type jsonVCSRepo struct {
	Identifier        string `json:"identifier"`
	DisplayIdentifier string `json:"display-identifier"`
	Branch            string `json:"branch"`
	OAuthTokenID      string `json:"oauth-token-id"`
	TagsRegex         string `json:"tags-regex"`
	ServiceProvider   string `json:"service-provider"`
	RepositoryHTTPURL string `json:"repository-http-url"`
	WebhookURL        string `json:"webhook-url"`
}

type jsonAgentPoolRef struct {
	ID string `jsonapi:"primary,agent-pools"`
}

type jsonStackRef struct {
	ID string `jsonapi:"primary,stacks"`
}

type jsonStackCfgRef struct {
	ID string `jsonapi:"primary,stack-configurations"`
}

type jsonGroupRef struct {
	ID string `jsonapi:"primary,stack-deployment-groups"`
}

type jsonConfiguration struct {
	ID                      string             `jsonapi:"primary,stack-configurations"`
	Status                  string             `jsonapi:"attr,status"`
	SequenceNumber          int                `jsonapi:"attr,sequence-number"`
	Components              []ComponentSummary `jsonapi:"attr,components"`
	Deployments             []string           `jsonapi:"attr,deployment-names"`
	PreparingEventStreamURL string             `jsonapi:"attr,preparing-event-stream-url"`
	Speculative             bool               `jsonapi:"attr,speculative"`
	DestroyAll              bool               `jsonapi:"attr,destroy-all"`
	SelectedDeployments     []string           `jsonapi:"attr,selected-deployments"`
	Source                  string             `jsonapi:"attr,source"`
	StatusTimestamps        Timestamps         `jsonapi:"attr,status-timestamps"`
	CreatedAt               time.Time          `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt               time.Time          `jsonapi:"attr,updated-at,iso8601"`
	Stack                   *jsonStackRef      `jsonapi:"relation,stack"`
}

type jsonConfigSummary struct {
	ID             string `jsonapi:"primary,stack-configuration-summaries"`
	Status         string `jsonapi:"attr,status"`
	SequenceNumber int    `jsonapi:"attr,sequence-number"`
}

type jsonGroup struct {
	ID            string           `jsonapi:"primary,stack-deployment-groups"`
	Name          string           `jsonapi:"attr,name"`
	Status        string           `jsonapi:"attr,status"`
	Config        jsonGroupConfig  `jsonapi:"attr,deployment-group-config"`
	CreatedAt     time.Time        `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt     time.Time        `jsonapi:"attr,updated-at,iso8601"`
	Configuration *jsonStackCfgRef `jsonapi:"relation,stack-configuration"`
}

type jsonGroupConfig struct {
	AutoApproveChecks []string `json:"auto-approve-checks"`
	Deployments       []string `json:"deployments"`
	EagerPlan         string   `json:"eager-plan"`
	FailureTolerance  int      `json:"failure-tolerance"`
	Custom            bool     `json:"custom"`
}

// StatusCounts counts a group's deployment runs by status.
type StatusCounts struct {
	Pending         int `json:"pending"`
	PreDeploying    int `json:"pre-deploying"`
	PendingOperator int `json:"pending-operator"`
	AcquiringLock   int `json:"acquiring-lock"`
	Deploying       int `json:"deploying"`
	Succeeded       int `json:"succeeded"`
	Failed          int `json:"failed"`
	Abandoned       int `json:"abandoned"`
}

type jsonGroupSummary struct {
	ID           string        `jsonapi:"primary,stack-deployment-group-summaries"`
	Name         string        `jsonapi:"attr,name"`
	Status       string        `jsonapi:"attr,status"`
	StatusCounts StatusCounts  `jsonapi:"attr,status-counts"`
	Group        *jsonGroupRef `jsonapi:"relation,stack-deployment-group"`
}

type jsonDeployment struct {
	ID        string        `jsonapi:"primary,stack-deployments"`
	Name      string        `jsonapi:"attr,name"`
	Stack     *jsonStackRef `jsonapi:"relation,stack"`
	LatestRun *jsonRunRef   `jsonapi:"relation,latest-deployment-run,omitempty"`
}

type jsonDiagnostic struct {
	ID            string           `jsonapi:"primary,stack-diagnostics"`
	Severity      string           `jsonapi:"attr,severity"`
	Summary       string           `jsonapi:"attr,summary"`
	Detail        string           `jsonapi:"attr,detail"`
	Diags         []Diagnostic     `jsonapi:"attr,diags"`
	Acknowledged  bool             `jsonapi:"attr,acknowledged"`
	CreatedAt     time.Time        `jsonapi:"attr,created-at,iso8601"`
	Configuration *jsonStackCfgRef `jsonapi:"relation,stack-configuration"`
}

func (a *API) stackJSON(r *http.Request, st *Stack) *jsonStack {
	j := &jsonStack{ID: st.ID, Name: st.Name, Description: st.Description, SpeculativeEnabled: st.SpeculativeEnabled,
		ExecutionMode: st.ExecutionMode, CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt, CreationSource: "api",
		WorkingDirectory: st.WorkingDirectory, TriggerPatterns: st.TriggerPatterns, TerraformVersion: st.TerraformVersion,
		Project: &jsonRef{ID: st.ProjectID}}
	if st.AgentPoolID != "" {
		j.AgentPool = &jsonAgentPoolRef{ID: st.AgentPoolID}
	}
	if v := st.VCSRepo; v != nil {
		j.VCSRepo = &jsonVCSRepo{Identifier: v.Identifier, DisplayIdentifier: v.DisplayIdentifier, Branch: v.Branch, OAuthTokenID: v.OAuthTokenID,
			TagsRegex: v.TagsRegex, ServiceProvider: v.ServiceProvider, RepositoryHTTPURL: v.RepositoryHTTPURL, WebhookURL: v.WebhookURL}
	}
	if c, err := a.Service.LatestConfiguration(r.Context(), st.ID); err == nil && c != nil {
		j.LatestConfig = &jsonStackCfgRef{ID: c.ID}
	}
	return j
}

func configJSON(c *Configuration) *jsonConfiguration {
	return &jsonConfiguration{ID: c.ID, Status: string(c.Status), SequenceNumber: c.SequenceNumber, Components: c.Components,
		Deployments: c.Deployments, Speculative: c.Speculative, DestroyAll: c.DestroyAll, SelectedDeployments: c.Selected, Source: c.Source, StatusTimestamps: c.Timestamps,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Stack: &jsonStackRef{ID: c.StackID}}
}

// groupJSON renders a group with its status derived from its runs.
func (a *API) groupJSON(r *http.Request, g *Group) *jsonGroup {
	status, _ := a.Service.GroupStatus(r.Context(), g)
	return &jsonGroup{ID: g.ID, Name: g.Name, Status: string(status), CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt,
		Config:        jsonGroupConfig{AutoApproveChecks: g.Config.AutoApproveChecks, Deployments: g.Config.Deployments, EagerPlan: "on", Custom: g.Config.Custom},
		Configuration: &jsonStackCfgRef{ID: g.ConfigurationID}}
}

func diagnosticJSON(d *StoredDiagnostic) *jsonDiagnostic {
	return &jsonDiagnostic{ID: d.ID, Severity: d.Severity, Summary: d.Summary, Detail: d.Detail, Diags: []Diagnostic{d.Diagnostic},
		Acknowledged: d.Acknowledged, CreatedAt: d.CreatedAt, Configuration: &jsonStackCfgRef{ID: d.ConfigurationID}}
}

// stackBody is a stack's attributes as sent.
type stackBody struct {
	Name               *string         `json:"name"`
	Description        *string         `json:"description"`
	SpeculativeEnabled *bool           `json:"speculative-enabled"`
	ExecutionMode      *string         `json:"execution-mode"`
	WorkingDirectory   *string         `json:"working-directory"`
	TriggerPatterns    *[]string       `json:"trigger-patterns"`
	TerraformVersion   *string         `json:"terraform-version"`
	VCSRepo            json.RawMessage `json:"vcs-repo"`
	Migration          *bool           `json:"migration"`
}

func decodeStack(w http.ResponseWriter, r *http.Request) (StackOptions, *tfeapi.Document, error) {
	var o StackOptions
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return o, nil, err
	}
	var b stackBody
	if err := doc.Attrs(&b); err != nil {
		return o, nil, err
	}
	o.Name, o.Description, o.SpeculativeEnabled, o.ExecutionMode = b.Name, b.Description, b.SpeculativeEnabled, b.ExecutionMode
	o.WorkingDirectory, o.TriggerPatterns, o.TerraformVersion = b.WorkingDirectory, b.TriggerPatterns, b.TerraformVersion
	if o.VCSRepo, o.RemoveVCSRepo, err = vcsrepo.Decode(b.VCSRepo); err != nil {
		return o, nil, err
	}
	if b.Migration != nil && *b.Migration {
		return o, nil, core.Invalid("migrating workspaces into a stack is not supported yet")
	}
	if _, ok := doc.Relationships["agent-pool"]; ok {
		id, err := doc.RelID("agent-pool")
		if err != nil {
			return o, nil, err
		}
		o.AgentPoolID = &id
	}
	return o, doc, nil
}

func (a *API) createStack(w http.ResponseWriter, r *http.Request) error {
	o, doc, err := decodeStack(w, r)
	if err != nil {
		return err
	}
	projectID, err := doc.RelID("project")
	if err != nil {
		return err
	}
	st, err := a.Service.CreateStack(r.Context(), projectID, o)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, a.stackJSON(r, st))
	return nil
}

func (a *API) listStacks(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	items, total, err := a.Service.ListStacks(r.Context(), r.PathValue("org"), q.Get("filter[project][id]"), q.Get("search[name]"), q.Get("sort"), page.Offset(), page.Size)
	if err != nil {
		return err
	}
	out := make([]*jsonStack, 0, len(items))
	for _, st := range items {
		out = append(out, a.stackJSON(r, st))
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total})
	return nil
}

func (a *API) getStack(w http.ResponseWriter, r *http.Request) error {
	st, err := a.Service.GetStack(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.stackJSON(r, st))
	return nil
}

func (a *API) updateStack(w http.ResponseWriter, r *http.Request) error {
	o, _, err := decodeStack(w, r)
	if err != nil {
		return err
	}
	st, err := a.Service.UpdateStack(r.Context(), r.PathValue("id"), o)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.stackJSON(r, st))
	return nil
}

func (a *API) deleteStack(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.DeleteStack(r.Context(), r.PathValue("id"), r.URL.Query().Get("force") == "true"); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) fetchFromVCS(w http.ResponseWriter, r *http.Request) error {
	if _, err := a.Service.GetStack(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	st, err := a.Service.FetchFromVCS(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.stackJSON(r, st))
	return nil
}

func (a *API) createConfiguration(w http.ResponseWriter, r *http.Request) error {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return err
	}
	var b struct {
		Speculative         *bool    `json:"speculative"`
		DestroyAll          *bool    `json:"destroy-all"`
		SelectedDeployments []string `json:"selected-deployments"`
	}
	if err := doc.Attrs(&b); err != nil {
		return err
	}
	o := ConfigurationOptions{Speculative: b.Speculative != nil && *b.Speculative, DestroyAll: b.DestroyAll != nil && *b.DestroyAll,
		SelectedDeployments: b.SelectedDeployments}
	switch src := r.URL.Query().Get("source"); src {
	case "", "manual":
	case "reuse":
		o.Reuse = true
	case "fetch":
		return core.Invalid("source=fetch needs a VCS-backed stack, which Terrace does not have yet")
	default:
		return core.BadRequest("source must be manual or reuse, not %q", src)
	}
	c, err := a.Service.CreateConfiguration(r.Context(), r.PathValue("id"), o)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, configJSON(c))
	return nil
}

func (a *API) listConfigurations(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	items, total, err := a.Service.ListConfigurations(r.Context(), r.PathValue("id"), page.Offset(), page.Size)
	if err != nil {
		return err
	}
	out := make([]*jsonConfiguration, 0, len(items))
	for _, c := range items {
		out = append(out, configJSON(c))
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total})
	return nil
}

func (a *API) listConfigurationSummaries(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	items, total, err := a.Service.ListConfigurations(r.Context(), r.PathValue("id"), page.Offset(), page.Size)
	if err != nil {
		return err
	}
	out := make([]*jsonConfigSummary, 0, len(items))
	for _, c := range items {
		out = append(out, &jsonConfigSummary{ID: c.ID, Status: string(c.Status), SequenceNumber: c.SequenceNumber})
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total})
	return nil
}

func (a *API) listDeployments(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	items, err := a.Service.ListDeployments(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	items, pg := tfeapi.Paginate(items, page)
	names := make([]string, 0, len(items))
	for _, d := range items {
		names = append(names, d.Name)
	}
	latest, err := a.Service.LatestRuns(r.Context(), r.PathValue("id"), names)
	if err != nil {
		return err
	}
	out := make([]*jsonDeployment, 0, len(items))
	for _, d := range items {
		j := &jsonDeployment{ID: d.ID, Name: d.Name, Stack: &jsonStackRef{ID: d.StackID}}
		if id, ok := latest[d.Name]; ok {
			j.LatestRun = &jsonRunRef{ID: id}
		}
		out = append(out, j)
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) getConfiguration(w http.ResponseWriter, r *http.Request) error {
	c, err := a.Service.GetConfiguration(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, configJSON(c))
	return nil
}

// uploadURL answers plain JSON, as go-tfe reads it: a null URL tells the
// client that the configuration takes no upload (any more).
func (a *API) uploadURL(w http.ResponseWriter, r *http.Request) error {
	u, err := a.Service.UploadURL(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	var v any
	if u != "" {
		v = u
	}
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", map[string]any{"data": map[string]any{"source-upload-url": v}})
	return nil
}

func (a *API) configurationDiagnostics(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	items, err := a.Service.ConfigurationDiagnostics(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	items, pg := tfeapi.Paginate(items, page)
	out := make([]*jsonDiagnostic, 0, len(items))
	for _, d := range items {
		out = append(out, diagnosticJSON(d))
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) getDiagnostic(w http.ResponseWriter, r *http.Request) error {
	d, err := a.Service.GetDiagnostic(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, diagnosticJSON(d))
	return nil
}

func (a *API) listGroups(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	items, err := a.Service.ListGroups(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	items, pg := tfeapi.Paginate(items, page)
	out := make([]*jsonGroup, 0, len(items))
	for _, g := range items {
		out = append(out, a.groupJSON(r, g))
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) listGroupSummaries(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	items, err := a.Service.ListGroups(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	items, pg := tfeapi.Paginate(items, page)
	out := make([]*jsonGroupSummary, 0, len(items))
	for _, g := range items {
		status, counts := a.Service.GroupStatus(r.Context(), g)
		out = append(out, &jsonGroupSummary{ID: g.ID, Name: g.Name, Status: string(status),
			StatusCounts: counts, Group: &jsonGroupRef{ID: g.ID}})
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) groupByName(w http.ResponseWriter, r *http.Request) error {
	g, err := a.Service.GroupByName(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.groupJSON(r, g))
	return nil
}

func (a *API) getGroup(w http.ResponseWriter, r *http.Request) error {
	g, err := a.Service.GetGroup(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.groupJSON(r, g))
	return nil
}
