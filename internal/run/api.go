package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves runs, plans, applies and run events.
type API struct {
	Service *Service
	// TaskStages renders a run's task stages: their IDs, and with
	// objects their JSON:API objects (nil: runs have none).
	TaskStages func(req *http.Request, runID string, objects bool) ([]string, []any, error)
	// PrefetchTaskStages, when set, reads the task stage IDs of a page of
	// runs in one go before TaskStages is asked for each.
	PrefetchTaskStages func(req *http.Request, runIDs []string) error
	// IncludeWorkspace and IncludeConfigVersion render related objects for
	// ?include= (nil: the include is accepted but left out).
	IncludeWorkspace     func(r *http.Request, id string) (any, error)
	IncludeConfigVersion func(r *http.Request, id string) (any, error)
	// IncludeUser renders a user for created_by and a run event's actor.
	IncludeUser func(r *http.Request, id string) (any, error)
	// UserByName resolves search[user] to a user ID (core.NotFound when
	// there is no such user).
	UserByName func(r *http.Request, username string) (string, error)
	// AdminWorkspaces renders the admin documents of workspaces and what
	// inc asks of them (organization, organization.owners: the admin
	// workspace routes' includes) for the admin run list's
	// ?include=workspace, workspace.organization and
	// workspace.organization.owners (nil: left out).
	AdminWorkspaces func(r *http.Request, ids []string, inc map[string]bool) ([]any, error)
	// LogTTL is how long a log-read-url stays valid. Defaults to 1h.
	LogTTL time.Duration
}

// Register adds the token-authenticated routes to api and the log routes
// to the capability mux.
func (a *API) Register(api, capability *http.ServeMux) {
	api.HandleFunc("POST /api/v2/runs", a.create)
	api.HandleFunc("GET /api/v2/runs/{id}", a.get)
	api.HandleFunc("GET /api/v2/workspaces/{id}/runs", a.list)
	api.HandleFunc("GET /api/v2/organizations/{org}/runs", a.listOrg)
	api.HandleFunc("GET /api/v2/organizations/{org}/runs/queue", a.queue)
	api.HandleFunc("POST /api/v2/runs/{id}/actions/{action}", a.action)
	api.HandleFunc("GET /api/v2/runs/{id}/run-events", a.events)
	api.HandleFunc("GET /api/v2/run-events/{id}", a.event)
	api.HandleFunc("GET /api/v2/runs/{id}/comments", a.comments)
	api.HandleFunc("POST /api/v2/runs/{id}/comments", a.createComment)
	api.HandleFunc("GET /api/v2/comments/{id}", a.comment)
	api.HandleFunc("GET /api/v2/runs/{id}/task-stages", a.taskStages)
	api.HandleFunc("GET /api/v2/runs/{id}/plan", a.runPlan)
	api.HandleFunc("GET /api/v2/runs/{id}/apply", a.runApply)
	api.HandleFunc("GET /api/v2/plans/{id}", a.plan)
	api.HandleFunc("GET /api/v2/applies/{id}", a.apply)
	api.HandleFunc("GET /api/v2/plans/{id}/json-output", a.planJSON("json"))
	api.HandleFunc("GET /api/v2/plans/{id}/json-output-redacted", a.planJSON("json-redacted"))
	api.HandleFunc("GET /api/v2/runs/{id}/plan/json-output", a.runPlanJSON("json"))
	api.HandleFunc("GET /api/v2/runs/{id}/plan/json-output-redacted", a.runPlanJSON("json-redacted"))
	a.registerAdmin(api)
	capability.HandleFunc("GET /logs/{id}", a.logs)
}

type jsonRun struct {
	ID                     string              `jsonapi:"primary,runs"`
	Actions                *jsonRunActions     `jsonapi:"attr,actions"`
	AutoApply              bool                `jsonapi:"attr,auto-apply"`
	AllowEmptyApply        bool                `jsonapi:"attr,allow-empty-apply"`
	AllowConfigGeneration  bool                `jsonapi:"attr,allow-config-generation"`
	DebuggingMode          bool                `jsonapi:"attr,debugging-mode"`
	CanceledAt             *time.Time          `jsonapi:"attr,canceled-at,iso8601,omitempty"`
	CreatedAt              string              `jsonapi:"attr,created-at"` // createdAtText
	ForceCancelAvailableAt *time.Time          `jsonapi:"attr,force-cancel-available-at,iso8601,omitempty"`
	HasChanges             bool                `jsonapi:"attr,has-changes"`
	IsDestroy              bool                `jsonapi:"attr,is-destroy"`
	Message                string              `jsonapi:"attr,message"`
	Permissions            *jsonRunPermissions `jsonapi:"attr,permissions"`
	PositionInQueue        int                 `jsonapi:"attr,position-in-queue"`
	PlanOnly               bool                `jsonapi:"attr,plan-only"`
	Refresh                bool                `jsonapi:"attr,refresh"`
	RefreshOnly            bool                `jsonapi:"attr,refresh-only"`
	ReplaceAddrs           []string            `jsonapi:"attr,replace-addrs,omitempty"`
	InvokeActionAddrs      []string            `jsonapi:"attr,invoke-action-addrs,omitempty"`
	PolicyPaths            []string            `jsonapi:"attr,policy-paths,omitempty"`
	SavePlan               bool                `jsonapi:"attr,save-plan"`
	Source                 string              `jsonapi:"attr,source"`
	Status                 string              `jsonapi:"attr,status"`
	StatusTimestamps       map[string]string   `jsonapi:"attr,status-timestamps"`
	TargetAddrs            []string            `jsonapi:"attr,target-addrs,omitempty"`
	TerraformVersion       string              `jsonapi:"attr,terraform-version"`
	TriggerReason          string              `jsonapi:"attr,trigger-reason"`
	Variables              []RunVar            `jsonapi:"attr,variables"`

	Workspace            *jsonRef            `jsonapi:"relation,workspace"`
	ConfigurationVersion *jsonCVRef          `jsonapi:"relation,configuration-version"`
	Plan                 *jsonPlan           `jsonapi:"relation,plan"`
	Apply                *jsonApply          `jsonapi:"relation,apply"`
	CreatedBy            *jsonUserRef        `jsonapi:"relation,created-by,omitempty"`
	ConfirmedBy          *jsonUserRef        `jsonapi:"relation,confirmed-by,omitempty"`
	RunEvents            []*jsonEventRef     `jsonapi:"relation,run-events"`
	TaskStages           []*jsonTaskStageRef `jsonapi:"relation,task-stages"`
	PolicyChecks         []*jsonRef          `jsonapi:"relation,policy-checks"`
	Comments             []*jsonComment      `jsonapi:"relation,comments"`
}

type jsonEventRef struct {
	ID string `jsonapi:"primary,run-events"`
}

type jsonComment struct {
	ID        string        `jsonapi:"primary,comments"`
	Body      string        `jsonapi:"attr,body,omitempty"`
	CreatedAt *time.Time    `jsonapi:"attr,created-at,iso8601,omitempty"`
	RunEvent  *jsonEventRef `jsonapi:"relation,run-event,omitempty"`
}

type jsonRef struct {
	ID string `jsonapi:"primary,workspaces"`
}
type jsonCVRef struct {
	ID string `jsonapi:"primary,configuration-versions"`
}
type jsonUserRef struct {
	ID string `jsonapi:"primary,users"`
}

type jsonRunActions struct {
	IsCancelable      bool `json:"is-cancelable"`
	IsConfirmable     bool `json:"is-confirmable"`
	IsDiscardable     bool `json:"is-discardable"`
	IsForceCancelable bool `json:"is-force-cancelable"`
}

type jsonRunPermissions struct {
	CanApply        bool `json:"can-apply"`
	CanCancel       bool `json:"can-cancel"`
	CanDiscard      bool `json:"can-discard"`
	CanForceCancel  bool `json:"can-force-cancel"`
	CanForceExecute bool `json:"can-force-execute"`
}

type jsonPlan struct {
	ID                   string            `jsonapi:"primary,plans"`
	HasChanges           bool              `jsonapi:"attr,has-changes"`
	LogReadURL           string            `jsonapi:"attr,log-read-url"`
	ResourceAdditions    int               `jsonapi:"attr,resource-additions"`
	ResourceChanges      int               `jsonapi:"attr,resource-changes"`
	ResourceDestructions int               `jsonapi:"attr,resource-destructions"`
	ResourceImports      int               `jsonapi:"attr,resource-imports"`
	Status               string            `jsonapi:"attr,status"`
	StatusTimestamps     map[string]string `jsonapi:"attr,status-timestamps"`
	GeneratedConfig      bool              `jsonapi:"attr,generated-configuration"`
}

type jsonApply struct {
	ID                   string            `jsonapi:"primary,applies"`
	LogReadURL           string            `jsonapi:"attr,log-read-url"`
	ResourceAdditions    int               `jsonapi:"attr,resource-additions"`
	ResourceChanges      int               `jsonapi:"attr,resource-changes"`
	ResourceDestructions int               `jsonapi:"attr,resource-destructions"`
	ResourceImports      int               `jsonapi:"attr,resource-imports"`
	Status               string            `jsonapi:"attr,status"`
	StatusTimestamps     map[string]string `jsonapi:"attr,status-timestamps"`
}

type jsonRunEvent struct {
	ID          string       `jsonapi:"primary,run-events"`
	Action      string       `jsonapi:"attr,action"`
	CreatedAt   time.Time    `jsonapi:"attr,created-at,iso8601"`
	Description string       `jsonapi:"attr,description"`
	Actor       *jsonUserRef `jsonapi:"relation,actor,omitempty"`
	Comment     *jsonComment `jsonapi:"relation,comment,omitempty"`
}

// createdAtText writes when a run was created to the microsecond, the
// precision the store keeps and lists sort by. In whole seconds
// (jsonapi's iso8601) two runs created in the same second read as created
// at once, out of the order a list sorted them in (workspaces by their
// current run's creation); HCP Terraform's milliseconds still tie for two
// runs a few milliseconds apart (two clients' at once). Clients parse any
// RFC 3339 fraction.
func createdAtText(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

func stamps(s Stamps) map[string]string {
	out := make(map[string]string, len(s))
	for k, t := range s {
		out[strings.ReplaceAll(k, "_", "-")] = t.UTC().Format(time.RFC3339)
	}
	return out
}

func (a *API) logURL(id string) string {
	ttl := a.LogTTL
	if ttl == 0 {
		ttl = time.Hour
	}
	return a.Service.Signer.URL(http.MethodGet, "/logs/"+id, ttl)
}

func (a *API) toPlan(r *Run) *jsonPlan {
	p := r.Plan
	return &jsonPlan{ID: p.ID, HasChanges: p.HasChanges, LogReadURL: a.logURL(p.ID), ResourceAdditions: p.Additions,
		ResourceChanges: p.Changes, ResourceDestructions: p.Destructions, ResourceImports: p.Imports,
		Status: string(p.Status), StatusTimestamps: stamps(p.Timestamps), GeneratedConfig: p.GeneratedConfig}
}

func (a *API) toApply(r *Run) *jsonApply {
	p := r.Apply
	return &jsonApply{ID: p.ID, LogReadURL: a.logURL(p.ID), ResourceAdditions: p.Additions,
		ResourceChanges: p.Changes, ResourceDestructions: p.Destructions, ResourceImports: p.Imports,
		Status: string(p.Status), StatusTimestamps: stamps(p.Timestamps)}
}

// runPermissions are what the caller may do with r, from the
// authorization model the request's guard asked.
func runPermissions(ctx context.Context, r *Run) *jsonRunPermissions {
	res := authz.Resource{Organization: r.Organization, WorkspaceID: r.WorkspaceID, RunID: r.ID}
	// With the project the run's read took along, the model need not
	// read the workspace to find it.
	res.ProjectID, _ = r.WorkspaceProject()
	apply := authz.Allows(ctx, authz.RunApply, res) == nil
	plan := apply || authz.Allows(ctx, authz.RunPlan, res) == nil
	return &jsonRunPermissions{CanApply: apply, CanCancel: plan, CanDiscard: apply, CanForceCancel: apply, CanForceExecute: apply}
}

func (a *API) toJSON(req *http.Request, r *Run) (*jsonRun, error) {
	return a.toJSONAt(req, r, a.Service.PositionInQueue(req.Context(), r))
}

// toJSONAt is toJSON with the run's queue position already known (a list
// computes its runs' positions in one query).
func (a *API) toJSONAt(req *http.Request, r *Run, position int) (*jsonRun, error) {
	var forceAt time.Time
	if !r.CancelRequestedAt.IsZero() {
		forceAt = r.CancelRequestedAt.Add(a.Service.ForceCancelAfter)
	}
	canForce := !forceAt.IsZero() && !r.Status.Final() && !core.Now().Before(forceAt)
	events, comments, err := a.Service.relations(req.Context(), r.ID)
	if err != nil {
		return nil, err
	}
	j := &jsonRun{
		ID: r.ID, AutoApply: r.AutoApply, AllowEmptyApply: r.AllowEmptyApply, AllowConfigGeneration: r.AllowConfigGeneration, DebuggingMode: r.DebuggingMode, CreatedAt: createdAtText(r.CreatedAt),
		HasChanges: r.HasChanges, IsDestroy: r.IsDestroy, Message: r.Message, PlanOnly: r.PlanOnly,
		Refresh: r.Refresh, RefreshOnly: r.RefreshOnly, ReplaceAddrs: r.ReplaceAddrs, SavePlan: r.SavePlan,
		Source: r.Source, Status: string(r.Status), StatusTimestamps: stamps(r.Timestamps),
		TargetAddrs: r.TargetAddrs, InvokeActionAddrs: r.InvokeActionAddrs, PolicyPaths: r.PolicyPaths, TerraformVersion: r.TerraformVersion, TriggerReason: r.TriggerReason,
		Variables: Redacted(r.Variables), PositionInQueue: position,
		Actions: &jsonRunActions{
			IsCancelable: r.Status.Cancelable(), IsConfirmable: r.confirmable(),
			IsDiscardable: r.Status.Discardable(), IsForceCancelable: canForce,
		},
		Permissions: runPermissions(req.Context(), r),
		Workspace:   &jsonRef{ID: r.WorkspaceID}, ConfigurationVersion: &jsonCVRef{ID: r.ConfigurationVersionID},
		Plan: a.toPlan(r), Apply: a.toApply(r),
		RunEvents: []*jsonEventRef{}, TaskStages: []*jsonTaskStageRef{}, PolicyChecks: []*jsonRef{}, Comments: []*jsonComment{},
	}
	if a.TaskStages != nil {
		ids, _, err := a.TaskStages(req, r.ID, false)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			j.TaskStages = append(j.TaskStages, &jsonTaskStageRef{ID: id})
		}
	}
	for _, id := range events {
		j.RunEvents = append(j.RunEvents, &jsonEventRef{ID: id})
	}
	for _, id := range comments {
		j.Comments = append(j.Comments, &jsonComment{ID: id})
	}
	if j.Variables == nil {
		j.Variables = []RunVar{}
	}
	if core.HasPrefix(r.CreatedBy, core.PrefixUser) {
		j.CreatedBy = &jsonUserRef{ID: r.CreatedBy}
	}
	if core.HasPrefix(r.ConfirmedBy, core.PrefixUser) {
		j.ConfirmedBy = &jsonUserRef{ID: r.ConfirmedBy}
	}
	if t, ok := r.Timestamps["canceled-at"]; ok {
		j.CanceledAt = &t
	}
	if !forceAt.IsZero() {
		// When a cancel was asked for, HCP Terraform shows when a
		// force-cancel becomes possible, even once the run has ended.
		j.ForceCancelAvailableAt = &forceAt
	}
	return j, nil
}

var runIncludes = []string{"plan", "apply", "created_by", "cost_estimate", "configuration_version",
	"configuration_version.ingress_attributes", "workspace", "task_stages", "tf_policy_evaluations", "run_events"}

func (a *API) respond(w http.ResponseWriter, req *http.Request, status int, r *Run) {
	inc, err := tfeapi.Includes(req, runIncludes...)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	included, err := a.included(req, inc, r)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	j, err := a.toJSON(req, r)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	tfeapi.Respond(w, req, status, j, included...)
}

// jsonTaskStageRef links a run to its task stages.
type jsonTaskStageRef struct {
	ID string `jsonapi:"primary,task-stages"`
}

func (a *API) included(req *http.Request, inc map[string]bool, r *Run) ([]any, error) {
	var out []any
	if inc["task_stages"] && a.TaskStages != nil {
		_, stages, err := a.TaskStages(req, r.ID, true)
		if err != nil {
			return nil, err
		}
		out = append(out, stages...)
	}
	if inc["plan"] {
		out = append(out, a.toPlan(r))
	}
	if inc["apply"] {
		out = append(out, a.toApply(r))
	}
	if inc["workspace"] && a.IncludeWorkspace != nil {
		ws, err := a.IncludeWorkspace(req, r.WorkspaceID)
		if err != nil {
			return nil, err
		}
		out = append(out, ws)
	}
	if inc["created_by"] && a.IncludeUser != nil && core.HasPrefix(r.CreatedBy, core.PrefixUser) {
		u, err := a.IncludeUser(req, r.CreatedBy)
		if err != nil && core.KindOf(err) != core.KindNotFound {
			return nil, err
		}
		if u != nil {
			out = append(out, u)
		}
	}
	if (inc["configuration_version"] || inc["configuration_version.ingress_attributes"]) && a.IncludeConfigVersion != nil {
		cv, err := a.IncludeConfigVersion(req, r.ConfigurationVersionID)
		if err != nil {
			return nil, err
		}
		out = append(out, cv)
	}
	return out, nil
}

type createAttrs struct {
	Message          *string  `json:"message"`
	IsDestroy        *bool    `json:"is-destroy"`
	Refresh          *bool    `json:"refresh"`
	RefreshOnly      *bool    `json:"refresh-only"`
	PlanOnly         *bool    `json:"plan-only"`
	SavePlan         *bool    `json:"save-plan"`
	AutoApply        *bool    `json:"auto-apply"`
	AllowEmptyApply  *bool    `json:"allow-empty-apply"`
	AllowConfigGen   *bool    `json:"allow-config-generation"`
	DebuggingMode    *bool    `json:"debugging-mode"`
	TerraformVersion *string  `json:"terraform-version"`
	TargetAddrs      []string `json:"target-addrs"`
	ReplaceAddrs     []string `json:"replace-addrs"`
	InvokeActions    []string `json:"invoke-action-addrs"`
	PolicyPaths      []string `json:"policy-paths"`
	Variables        []RunVar `json:"variables"`
}

func (a *API) create(w http.ResponseWriter, req *http.Request) {
	doc, err := tfeapi.Decode(w, req, 0)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	var at createAttrs
	if err := doc.Attrs(&at); err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	wsID, err := doc.RelID("workspace")
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	cvID, err := doc.RelID("configuration-version")
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	r, err := a.Service.Create(req.Context(), CreateOptions{
		WorkspaceID: wsID, ConfigurationVersionID: cvID, Message: at.Message, IsDestroy: at.IsDestroy,
		Refresh: at.Refresh, RefreshOnly: at.RefreshOnly, PlanOnly: at.PlanOnly, SavePlan: at.SavePlan,
		AutoApply: at.AutoApply, AllowEmptyApply: at.AllowEmptyApply, AllowConfigGeneration: at.AllowConfigGen, DebuggingMode: at.DebuggingMode, TerraformVersion: at.TerraformVersion,
		TargetAddrs: at.TargetAddrs, ReplaceAddrs: at.ReplaceAddrs, Variables: at.Variables,
		InvokeActionAddrs: at.InvokeActions, PolicyPaths: at.PolicyPaths,
		FromCLI: fromCLI(req), TextLog: TextLogFor(req.Header),
	})
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	a.respond(w, req, http.StatusCreated, r)
}

func (a *API) get(w http.ResponseWriter, req *http.Request) {
	r, err := a.Service.Get(req.Context(), req.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	a.respond(w, req, http.StatusOK, r)
}

func (a *API) listOptions(req *http.Request) (ListOptions, error) {
	q := req.URL.Query()
	split := func(k string) []string {
		if v := q.Get(k); v != "" {
			return strings.Split(v, ",")
		}
		return nil
	}
	o := ListOptions{Statuses: split("filter[status]"), Operations: split("filter[operation]"), Sources: split("filter[source]"),
		Commit: q.Get("search[commit]"), Basic: q.Get("search[basic]"), StatusGroup: q.Get("filter[status_group]"),
		WorkspaceNames: split("filter[workspace_names]"), AgentPools: split("filter[agent_pool_names]")}
	switch o.StatusGroup {
	case "", "non_final", "final", "discardable":
	default:
		return o, core.Invalid("filter[status_group] must be non_final, final or discardable")
	}
	if name := q.Get("search[user]"); name != "" {
		if a.UserByName == nil {
			o.NoSuchUser = true
		} else if id, err := a.UserByName(req, name); core.KindOf(err) == core.KindNotFound {
			o.NoSuchUser = true
		} else if err != nil {
			return o, err
		} else {
			o.CreatedBy = id
		}
	}
	return o, nil
}

// respondList writes a page of runs: all of them paged here, or, when
// page is not nil, the page the store returned out of total.
func (a *API) respondList(w http.ResponseWriter, req *http.Request, runs []*Run, page *tfeapi.Page, total int) {
	inc, err := tfeapi.Includes(req, runIncludes...)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	var items []*Run
	var pg tfeapi.Pagination
	if page == nil {
		p, err := tfeapi.ParsePage(req)
		if err != nil {
			tfeapi.Error(w, req, err)
			return
		}
		items, pg = tfeapi.Paginate(runs, p)
	} else {
		items, pg = runs, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	}
	positions, err := a.Service.QueuePositions(req.Context(), items)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	// Each run's events and task stages, for the whole page at once.
	if err := a.Service.prefetchRelations(req.Context(), items); err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	if a.PrefetchTaskStages != nil && len(items) > 0 {
		ids := make([]string, len(items))
		for i, r := range items {
			ids[i] = r.ID
		}
		if err := a.PrefetchTaskStages(req, ids); err != nil {
			tfeapi.Error(w, req, err)
			return
		}
	}
	out := make([]*jsonRun, len(items))
	var included []any
	for i, r := range items {
		if out[i], err = a.toJSONAt(req, r, positions[r.ID]); err != nil {
			tfeapi.Error(w, req, err)
			return
		}
		more, err := a.included(req, inc, r)
		if err != nil {
			tfeapi.Error(w, req, err)
			return
		}
		included = append(included, more...)
	}
	tfeapi.RespondList(w, req, out, pg, included...)
}

// pagedOptions reads a list's filters and page.
func (a *API) pagedOptions(req *http.Request) (ListOptions, tfeapi.Page, error) {
	o, err := a.listOptions(req)
	if err != nil {
		return o, tfeapi.Page{}, err
	}
	page, err := tfeapi.ParsePage(req)
	o.Offset, o.Limit = page.Offset(), page.Size
	return o, page, err
}

func (a *API) list(w http.ResponseWriter, req *http.Request) {
	o, page, err := a.pagedOptions(req)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	runs, total, err := a.Service.ListPage(req.Context(), req.PathValue("id"), o)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	a.respondList(w, req, runs, &page, total)
}

func (a *API) listOrg(w http.ResponseWriter, req *http.Request) {
	o, page, err := a.pagedOptions(req)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	runs, total, err := a.Service.ListOrganizationPage(req.Context(), req.PathValue("org"), o)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	a.respondList(w, req, runs, &page, total)
}

func (a *API) queue(w http.ResponseWriter, req *http.Request) {
	runs, err := a.Service.Queue(req.Context(), req.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	a.respondList(w, req, runs, nil, 0)
}

func (a *API) action(w http.ResponseWriter, req *http.Request) {
	doc, err := tfeapi.Decode(w, req, 0)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	var body struct {
		Comment string `json:"comment"`
	}
	_ = json.Unmarshal(doc.Attributes, &body)
	id, ctx := req.PathValue("id"), req.Context()
	if p := auth.FromContext(ctx); p != nil && p.Kind == auth.KindRun {
		tfeapi.Error(w, req, core.Forbidden("a run token cannot act on runs"))
		return
	}
	switch req.PathValue("action") {
	case "apply":
		err = a.Service.Apply(ctx, id, body.Comment)
	case "discard":
		err = a.Service.Discard(ctx, id, body.Comment)
	case "cancel":
		err = a.Service.Cancel(ctx, id, body.Comment)
	case "force-cancel":
		err = a.Service.ForceCancel(ctx, id, body.Comment)
	case "force-execute":
		err = a.Service.ForceExecute(ctx, id)
	default:
		err = core.NotFound("unknown run action %q", req.PathValue("action"))
	}
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

var eventIncludes = []string{"actor", "comment"}

// eventJSON renders an event and what ?include= asks for with it.
func (a *API) eventJSON(req *http.Request, e *Event, inc map[string]bool) (*jsonRunEvent, []any, error) {
	j := &jsonRunEvent{ID: e.ID, Action: e.Action, Description: e.Description, CreatedAt: core.FromMicros(e.CreatedAt)}
	var included []any
	if core.HasPrefix(e.Actor, core.PrefixUser) {
		j.Actor = &jsonUserRef{ID: e.Actor}
		if inc["actor"] && a.IncludeUser != nil {
			u, err := a.IncludeUser(req, e.Actor)
			if err != nil && core.KindOf(err) != core.KindNotFound {
				return nil, nil, err
			}
			if u != nil {
				included = append(included, u)
			}
		}
	}
	if e.CommentID != "" {
		j.Comment = &jsonComment{ID: e.CommentID}
		if inc["comment"] {
			c, err := a.Service.GetComment(req.Context(), e.CommentID)
			if err != nil {
				return nil, nil, err
			}
			included = append(included, commentJSON(c))
		}
	}
	return j, included, nil
}

func commentJSON(c *Comment) *jsonComment {
	t := core.FromMicros(c.CreatedAt)
	return &jsonComment{ID: c.ID, Body: c.Body, CreatedAt: &t}
}

func (a *API) events(w http.ResponseWriter, req *http.Request) {
	inc, err := tfeapi.Includes(req, eventIncludes...)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	page, err := tfeapi.ParsePage(req)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	evs, err := a.Service.Events(req.Context(), req.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	items, pg := tfeapi.Paginate(evs, page)
	out := make([]*jsonRunEvent, len(items))
	var included []any
	for i, e := range items {
		var more []any
		if out[i], more, err = a.eventJSON(req, e, inc); err != nil {
			tfeapi.Error(w, req, err)
			return
		}
		included = append(included, more...)
	}
	tfeapi.RespondList(w, req, out, pg, included...)
}

func (a *API) event(w http.ResponseWriter, req *http.Request) {
	inc, err := tfeapi.Includes(req, eventIncludes...)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	e, err := a.Service.GetEvent(req.Context(), req.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	j, included, err := a.eventJSON(req, e, inc)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	tfeapi.Respond(w, req, http.StatusOK, j, included...)
}

func (a *API) comments(w http.ResponseWriter, req *http.Request) {
	page, err := tfeapi.ParsePage(req)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	cs, err := a.Service.Comments(req.Context(), req.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	items, pg := tfeapi.Paginate(cs, page)
	out := make([]*jsonComment, len(items))
	for i, c := range items {
		out[i] = commentJSON(c)
	}
	tfeapi.RespondList(w, req, out, pg)
}

func (a *API) createComment(w http.ResponseWriter, req *http.Request) {
	doc, err := tfeapi.Decode(w, req, 0)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	var at struct {
		Body *string `json:"body"`
	}
	if err := doc.Attrs(&at); err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	if at.Body == nil {
		tfeapi.Error(w, req, core.Invalid("body is required"))
		return
	}
	c, err := a.Service.CreateComment(req.Context(), req.PathValue("id"), *at.Body)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	tfeapi.Respond(w, req, http.StatusCreated, commentJSON(c))
}

func (a *API) comment(w http.ResponseWriter, req *http.Request) {
	c, err := a.Service.GetComment(req.Context(), req.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	tfeapi.Respond(w, req, http.StatusOK, commentJSON(c))
}

func (a *API) taskStages(w http.ResponseWriter, req *http.Request) {
	if _, err := a.Service.Get(req.Context(), req.PathValue("id")); err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	page, err := tfeapi.ParsePage(req)
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	stages := []any{}
	if a.TaskStages != nil {
		_, rendered, err := a.TaskStages(req, req.PathValue("id"), true)
		if err != nil {
			tfeapi.Error(w, req, err)
			return
		}
		stages = append(stages, rendered...)
	}
	items, pg := tfeapi.Paginate(stages, page)
	tfeapi.RespondList(w, req, items, pg)
}

func (a *API) runPlan(w http.ResponseWriter, req *http.Request) {
	r, err := a.Service.Get(req.Context(), req.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	tfeapi.Respond(w, req, http.StatusOK, a.toPlan(r))
}

func (a *API) runApply(w http.ResponseWriter, req *http.Request) {
	r, err := a.Service.Get(req.Context(), req.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	tfeapi.Respond(w, req, http.StatusOK, a.toApply(r))
}

func (a *API) plan(w http.ResponseWriter, req *http.Request) {
	r, err := a.Service.GetByPhase(req.Context(), req.PathValue("id"))
	if err != nil || r.Plan.ID != req.PathValue("id") {
		tfeapi.Error(w, req, core.NotFound("plan %s not found", req.PathValue("id")))
		return
	}
	tfeapi.Respond(w, req, http.StatusOK, a.toPlan(r))
}

func (a *API) apply(w http.ResponseWriter, req *http.Request) {
	r, err := a.Service.GetByPhase(req.Context(), req.PathValue("id"))
	if err != nil || r.Apply.ID != req.PathValue("id") {
		tfeapi.Error(w, req, core.NotFound("apply %s not found", req.PathValue("id")))
		return
	}
	tfeapi.Respond(w, req, http.StatusOK, a.toApply(r))
}

func (a *API) writePlanJSON(w http.ResponseWriter, req *http.Request, r *Run, name string) {
	// The unredacted plan ("json") holds sensitive values: its routes ask
	// authz.RunReadPlanJSON (workspace admins, and the access token of a
	// run task of this very run).
	b, err := a.Service.PlanJSON(req.Context(), r, name)
	if core.KindOf(err) == core.KindNotFound {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if core.KindOf(err) == core.KindTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if err != nil {
		tfeapi.Error(w, req, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (a *API) planJSON(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		r, err := a.Service.GetByPhase(req.Context(), req.PathValue("id"))
		if err != nil || r.Plan.ID != req.PathValue("id") {
			tfeapi.Error(w, req, core.NotFound("plan %s not found", req.PathValue("id")))
			return
		}
		a.writePlanJSON(w, req, r, name)
	}
}

func (a *API) runPlanJSON(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		r, err := a.Service.Get(req.Context(), req.PathValue("id"))
		if err != nil {
			tfeapi.Error(w, req, err)
			return
		}
		a.writePlanJSON(w, req, r, name)
	}
}

// logs serves a phase's log through a capability URL, honouring offset and
// limit as terraform's and go-tfe's log readers expect.
func (a *API) logs(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	offset, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
	limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
	if offset < 0 || limit < 0 {
		http.Error(w, "offset and limit must not be negative", http.StatusBadRequest)
		return
	}
	if limit == 0 || limit > 1<<20 {
		limit = 1 << 20
	}
	data, err := a.Service.ReadLog(req.Context(), req.PathValue("id"), offset, limit)
	if err != nil {
		if errors.Is(err, core.ErrNotFound) {
			http.NotFound(w, req)
			return
		}
		http.Error(w, "reading log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(data)
}

// Render is a run's wire form for other domains' includes (a workspace's
// current_run).
func (a *API) Render(req *http.Request, id string) (any, error) {
	r, err := a.Service.Get(req.Context(), id)
	if err != nil {
		return nil, err
	}
	return a.toJSON(req, r)
}

// TextLogFor reports whether the client that creates a run prints its
// logs as they are, unable to render terraform's JSON log lines: the
// remote backend (it sends Terraform-Version but not
// X-Terraform-Integration: cloud), and the cloud backend before
// terraform 1.4, which first rendered structured run output. Its run
// logs text whatever the workspace's structured run output, as HCP
// Terraform's do for those clients.
func TextLogFor(h http.Header) bool {
	v := h.Get("Terraform-Version")
	if v == "" {
		return false // not terraform: the API, the UI, a VCS or trigger
	}
	if h.Get("X-Terraform-Integration") != "cloud" {
		return true
	}
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimPrefix(v, "v"), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major < 1 || major == 1 && minor < 4
}

// fromCLI reports whether a request came from terraform's or OpenTofu's
// cloud backend: both send X-Terraform-Integration: cloud, and every
// version (also the older remote backend) sends Terraform-Version.
func fromCLI(req *http.Request) bool {
	return req.Header.Get("X-Terraform-Integration") != "" || req.Header.Get("Terraform-Version") != ""
}
