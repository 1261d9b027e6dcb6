package runtask

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the run task endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	a.RegisterStages(mux)
	// Spelled out, so that the authorization route table's test can read
	// every pattern.
	mux.HandleFunc("GET /api/v2/organizations/{org}/tasks", a.list)
	mux.HandleFunc("POST /api/v2/organizations/{org}/tasks", a.create)
	mux.HandleFunc("GET /api/v2/tasks/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/tasks/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/tasks/{id}", a.delete)
	mux.HandleFunc("GET /api/v2/workspaces/{id}/tasks", a.listWorkspace)
	mux.HandleFunc("POST /api/v2/workspaces/{id}/tasks", a.attach)
	mux.HandleFunc("GET /api/v2/workspaces/{id}/tasks/{task}", a.getWorkspace)
	mux.HandleFunc("PATCH /api/v2/workspaces/{id}/tasks/{task}", a.updateWorkspace)
	mux.HandleFunc("DELETE /api/v2/workspaces/{id}/tasks/{task}", a.detach)
}

// jsonTask is the wire form (go-tfe's RunTask). hmac-key is always null:
// the field exists so that no response can carry the key.
type jsonTask struct {
	ID             string               `jsonapi:"primary,tasks"`
	Name           string               `jsonapi:"attr,name"`
	URL            string               `jsonapi:"attr,url"`
	Description    string               `jsonapi:"attr,description"`
	Category       string               `jsonapi:"attr,category"`
	HMACKey        *string              `jsonapi:"attr,hmac-key"`
	Enabled        bool                 `jsonapi:"attr,enabled"`
	Global         map[string]any       `jsonapi:"attr,global-configuration"`
	CreatedAt      string               `jsonapi:"attr,created-at"`
	UpdatedAt      string               `jsonapi:"attr,updated-at"`
	Organization   *jsonOrganization    `jsonapi:"relation,organization"`
	WorkspaceTasks []*jsonWorkspaceTask `jsonapi:"relation,workspace-tasks"`
	AgentPool      *jsonAgentPool       `jsonapi:"relation,agent-pool,omitempty"`
}

type jsonOrganization struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonAgentPool struct {
	ID string `jsonapi:"primary,agent-pools"`
}

type jsonWorkspace struct {
	ID string `jsonapi:"primary,workspaces"`
}

type jsonTaskRef struct {
	ID string `jsonapi:"primary,tasks"`
}

// jsonWorkspaceTask is go-tfe's WorkspaceRunTask.
type jsonWorkspaceTask struct {
	ID               string         `jsonapi:"primary,workspace-tasks"`
	EnforcementLevel string         `jsonapi:"attr,enforcement-level"`
	Stage            string         `jsonapi:"attr,stage"`
	Stages           []string       `jsonapi:"attr,stages"`
	CreatedAt        string         `jsonapi:"attr,created-at"`
	Task             *jsonTaskRef   `jsonapi:"relation,task"`
	Workspace        *jsonWorkspace `jsonapi:"relation,workspace"`
}

func timeText(t interface{ Format(string) string }) string {
	return t.Format("2006-01-02T15:04:05.000Z")
}

func stageStrings(s []Stage) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

func toJSON(t *Task, wts []*WorkspaceTask) *jsonTask {
	out := &jsonTask{ID: t.ID, Name: t.Name, URL: t.URL, Description: t.Description, Category: t.Category, Enabled: t.Enabled,
		Global:    map[string]any{"enabled": t.Global.Enabled, "stages": stageStrings(t.Global.Stages), "enforcement-level": string(t.Global.EnforcementLevel)},
		CreatedAt: timeText(t.CreatedAt), UpdatedAt: timeText(t.UpdatedAt),
		Organization: &jsonOrganization{Name: t.Organization}, WorkspaceTasks: []*jsonWorkspaceTask{}}
	for _, w := range wts {
		out.WorkspaceTasks = append(out.WorkspaceTasks, &jsonWorkspaceTask{ID: w.ID})
	}
	if t.AgentPoolID != "" {
		out.AgentPool = &jsonAgentPool{ID: t.AgentPoolID}
	}
	return out
}

func workspaceTaskJSON(w *WorkspaceTask) *jsonWorkspaceTask {
	return &jsonWorkspaceTask{ID: w.ID, EnforcementLevel: string(w.EnforcementLevel), Stage: string(w.Stage()),
		Stages: stageStrings(w.Stages), CreatedAt: timeText(w.CreatedAt),
		Task: &jsonTaskRef{ID: w.TaskID}, Workspace: &jsonWorkspace{ID: w.WorkspaceID}}
}

func decodeTask(w http.ResponseWriter, r *http.Request) (TaskChanges, error) {
	var c TaskChanges
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return c, err
	}
	if doc.Type != "" && doc.Type != "tasks" {
		return c, core.Invalid("data.type must be tasks, not %q", doc.Type)
	}
	var b struct {
		Name        *string `json:"name"`
		URL         *string `json:"url"`
		Description *string `json:"description"`
		Category    *string `json:"category"`
		HMACKey     *string `json:"hmac-key"`
		Enabled     *bool   `json:"enabled"`
		Global      *struct {
			Enabled          *bool        `json:"enabled"`
			Stages           *[]Stage     `json:"stages"`
			EnforcementLevel *Enforcement `json:"enforcement-level"`
		} `json:"global-configuration"`
	}
	if err := doc.Attrs(&b); err != nil {
		return c, err
	}
	c = TaskChanges{Name: b.Name, URL: b.URL, Description: b.Description, Category: b.Category, HMACKey: b.HMACKey, Enabled: b.Enabled}
	if b.Global != nil {
		c.Global = &GlobalChanges{Enabled: b.Global.Enabled, Stages: b.Global.Stages, EnforcementLevel: b.Global.EnforcementLevel}
	}
	if _, ok := doc.Relationships["agent-pool"]; ok {
		id, err := doc.RelID("agent-pool")
		if err != nil {
			return c, err
		}
		c.AgentPoolID = &id
	}
	return c, nil
}

func (a *API) respondTask(w http.ResponseWriter, r *http.Request, status int, t *Task) {
	inc, err := tfeapi.Includes(r, "workspace_tasks")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	wts, err := a.Service.WorkspaceTasksOf(r.Context(), t)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var included []*jsonWorkspaceTask
	if inc["workspace_tasks"] {
		for _, wt := range wts {
			included = append(included, workspaceTaskJSON(wt))
		}
	}
	tfeapi.Respond(w, r, status, toJSON(t, wts), included)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	inc, err := tfeapi.Includes(r, "workspace_tasks")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ts, err := a.Service.List(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(ts, page)
	out := make([]*jsonTask, len(items))
	var included []*jsonWorkspaceTask
	for i, t := range items {
		wts, err := a.Service.WorkspaceTasksOf(r.Context(), t)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		out[i] = toJSON(t, wts)
		if inc["workspace_tasks"] {
			for _, wt := range wts {
				included = append(included, workspaceTaskJSON(wt))
			}
		}
	}
	tfeapi.RespondList(w, r, out, pg, included)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	c, err := decodeTask(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	t, err := a.Service.Create(r.Context(), r.PathValue("org"), c)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTask(w, r, http.StatusCreated, t)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTask(w, r, http.StatusOK, t)
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.Get(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	c, err := decodeTask(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	t, err := a.Service.Update(r.Context(), r.PathValue("id"), c)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTask(w, r, http.StatusOK, t)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}

func decodeWorkspaceTask(w http.ResponseWriter, r *http.Request) (WorkspaceTaskChanges, error) {
	var c WorkspaceTaskChanges
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return c, err
	}
	if doc.Type != "" && doc.Type != "workspace-tasks" {
		return c, core.Invalid("data.type must be workspace-tasks, not %q", doc.Type)
	}
	var b struct {
		EnforcementLevel *Enforcement `json:"enforcement-level"`
		Stage            *Stage       `json:"stage"`
		Stages           *[]Stage     `json:"stages"`
	}
	if err := doc.Attrs(&b); err != nil {
		return c, err
	}
	c = WorkspaceTaskChanges{EnforcementLevel: b.EnforcementLevel, Stage: b.Stage, Stages: b.Stages}
	c.TaskID, err = doc.RelID("task")
	return c, err
}

func (a *API) listWorkspace(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	wts, err := a.Service.ListWorkspaceTasks(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(wts, page)
	out := make([]*jsonWorkspaceTask, len(items))
	for i, wt := range items {
		out[i] = workspaceTaskJSON(wt)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) attach(w http.ResponseWriter, r *http.Request) {
	c, err := decodeWorkspaceTask(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusCreated, workspaceTaskJSON)(a.Service.AttachTask(r.Context(), r.PathValue("id"), c))
}

func (a *API) getWorkspace(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, workspaceTaskJSON)(a.Service.GetWorkspaceTask(r.Context(), r.PathValue("id"), r.PathValue("task")))
}

func (a *API) updateWorkspace(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.GetWorkspaceTask(r.Context(), r.PathValue("id"), r.PathValue("task")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	c, err := decodeWorkspaceTask(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusOK, workspaceTaskJSON)(a.Service.UpdateWorkspaceTask(r.Context(), r.PathValue("id"), r.PathValue("task"), c))
}

func (a *API) detach(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DetachTask(r.Context(), r.PathValue("id"), r.PathValue("task")))
}

// RegisterStages adds the routes of task stages and results.
func (a *API) RegisterStages(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/task-stages/{id}", a.getStage)
	mux.HandleFunc("POST /api/v2/task-stages/{id}/actions/override", a.override)
	mux.HandleFunc("GET /api/v2/task-results/{id}", a.getResult)
	mux.HandleFunc("PATCH /api/v2/task-results/{id}/callback", a.callback)
}

// jsonStage is go-tfe's TaskStage.
type jsonStage struct {
	ID                string            `jsonapi:"primary,task-stages"`
	Stage             string            `jsonapi:"attr,stage"`
	Status            string            `jsonapi:"attr,status"`
	StatusTimestamps  map[string]string `jsonapi:"attr,status-timestamps"`
	CreatedAt         string            `jsonapi:"attr,created-at"`
	UpdatedAt         string            `jsonapi:"attr,updated-at"`
	Permissions       map[string]bool   `jsonapi:"attr,permissions"`
	Actions           map[string]bool   `jsonapi:"attr,actions"`
	Run               *jsonRunRef       `jsonapi:"relation,run"`
	TaskResults       []*jsonResultRef  `jsonapi:"relation,task-results"`
	PolicyEvaluations []*jsonPolicyEval `jsonapi:"relation,policy-evaluations"`
}

type jsonRunRef struct {
	ID string `jsonapi:"primary,runs"`
}

type jsonResultRef struct {
	ID string `jsonapi:"primary,task-results"`
}

type jsonPolicyEval struct {
	ID string `jsonapi:"primary,policy-evaluations"`
}

type jsonStageRef struct {
	ID string `jsonapi:"primary,task-stages"`
}

// jsonResult is go-tfe's TaskResult.
type jsonResult struct {
	ID                            string            `jsonapi:"primary,task-results"`
	Status                        string            `jsonapi:"attr,status"`
	Message                       string            `jsonapi:"attr,message"`
	StatusTimestamps              map[string]string `jsonapi:"attr,status-timestamps"`
	URL                           string            `jsonapi:"attr,url"`
	CreatedAt                     string            `jsonapi:"attr,created-at"`
	UpdatedAt                     string            `jsonapi:"attr,updated-at"`
	TaskID                        string            `jsonapi:"attr,task-id"`
	TaskName                      string            `jsonapi:"attr,task-name"`
	TaskURL                       string            `jsonapi:"attr,task-url"`
	Stage                         string            `jsonapi:"attr,stage"`
	WorkspaceTaskID               string            `jsonapi:"attr,workspace-task-id"`
	WorkspaceTaskEnforcementLevel string            `jsonapi:"attr,workspace-task-enforcement-level"`
	Outcomes                      []Outcome         `jsonapi:"attr,outcomes"`
	TaskStage                     *jsonStageRef     `jsonapi:"relation,task-stage"`
}

func stamps(m map[string]time.Time) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v.UTC().Format(time.RFC3339)
	}
	return out
}

// StageJSON renders a stage (for the runs API's task_stages too).
func (a *API) StageJSON(ctx context.Context, st *TaskStageRecord, results []*Result) any {
	overridable := st.Status == StageAwaitingOverride
	canOverride := authz.Allows(ctx, authz.RunOverrideTasks, authz.Resource{Organization: st.Organization, WorkspaceID: st.WorkspaceID, RunID: st.RunID}) == nil
	j := &jsonStage{ID: st.ID, Stage: string(st.Stage), Status: string(st.Status), StatusTimestamps: stamps(st.Timestamps),
		CreatedAt: timeText(st.CreatedAt), UpdatedAt: timeText(st.UpdatedAt),
		Permissions: map[string]bool{"can-override-policy": canOverride, "can-override-tasks": canOverride, "can-override": canOverride},
		Actions:     map[string]bool{"is-overridable": overridable},
		Run:         &jsonRunRef{ID: st.RunID}, TaskResults: []*jsonResultRef{}, PolicyEvaluations: []*jsonPolicyEval{}}
	for _, r := range results {
		j.TaskResults = append(j.TaskResults, &jsonResultRef{ID: r.ID})
	}
	if p := a.Service.o.Policies; p != nil {
		ids, err := p.EvaluationIDs(ctx, st.ID)
		if err != nil {
			a.Service.o.Logger.Error("listing the policy evaluations of a task stage", "stage", st.ID, "error", err)
		}
		for _, id := range ids {
			j.PolicyEvaluations = append(j.PolicyEvaluations, &jsonPolicyEval{ID: id})
		}
	}
	return j
}

func resultJSON(r *Result, stage Stage) *jsonResult {
	outcomes := r.Outcomes
	if outcomes == nil {
		outcomes = []Outcome{}
	}
	return &jsonResult{ID: r.ID, Status: string(r.Status), Message: r.Message, StatusTimestamps: stamps(r.Timestamps), URL: r.URL,
		CreatedAt: timeText(r.CreatedAt), UpdatedAt: timeText(r.UpdatedAt), TaskID: r.TaskID, TaskName: r.TaskName, TaskURL: r.TaskURL,
		Stage: string(stage), WorkspaceTaskID: r.WorkspaceTaskID, WorkspaceTaskEnforcementLevel: string(r.Enforcement),
		Outcomes: outcomes, TaskStage: &jsonStageRef{ID: r.StageID}}
}

// PrefetchRunStages reads the task stage IDs of a page of runs at once
// for RunStages (run.API's PrefetchTaskStages).
func (a *API) PrefetchRunStages(req *http.Request, runIDs []string) error {
	return a.Service.PrefetchStageIDs(req.Context(), runIDs)
}

// RunStages renders a run's task stages for the runs API (run.API's
// TaskStages): IDs, and objects when asked for.
func (a *API) RunStages(req *http.Request, runID string, objects bool) ([]string, []any, error) {
	if !objects {
		ids, err := a.Service.StageIDsOfRun(req.Context(), runID)
		return ids, nil, err
	}
	stages, results, err := a.Service.StagesOfRun(req.Context(), runID)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(stages))
	objs := make([]any, len(stages))
	for i, st := range stages {
		ids[i] = st.ID
		objs[i] = a.StageJSON(req.Context(), st, results[st.ID])
	}
	return ids, objs, nil
}

func (a *API) getStage(w http.ResponseWriter, r *http.Request) {
	inc, err := tfeapi.Includes(r, "task_results", "policy_evaluations")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	st, results, err := a.Service.Stage(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var included []any
	if inc["task_results"] {
		for _, res := range results {
			included = append(included, resultJSON(res, st.Stage))
		}
	}
	if p := a.Service.o.Policies; p != nil && inc["policy_evaluations"] {
		evals, err := p.Evaluations(r.Context(), st.ID)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		included = append(included, evals...)
	}
	tfeapi.Respond(w, r, http.StatusOK, a.StageJSON(r.Context(), st, results), included...)
}

func (a *API) override(w http.ResponseWriter, r *http.Request) {
	var comment string
	if r.ContentLength != 0 {
		doc, err := tfeapi.Decode(w, r, 0)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		var b struct {
			Comment *string `json:"comment"`
		}
		if len(doc.Attributes) > 0 {
			if err := doc.Attrs(&b); err != nil {
				tfeapi.Error(w, r, err)
				return
			}
		}
		if b.Comment != nil {
			comment = *b.Comment
		}
	}
	st, err := a.Service.Override(r.Context(), r.PathValue("id"), comment)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	_, results, err := a.Service.Stage(r.Context(), st.ID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.StageJSON(r.Context(), st, results))
}

func (a *API) getResult(w http.ResponseWriter, r *http.Request) {
	res, st, err := a.Service.Result(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, resultJSON(res, st.Stage))
}

func (a *API) callback(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 6<<20)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	rep, err := DecodeCallback(doc)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if err := a.Service.Callback(r.Context(), r.PathValue("id"), rep); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// DecodeCallback reads a run task service's callback document (PATCH
// /api/v2/task-results/:id/callback): status, message, url and the
// optional outcomes relationship.
func DecodeCallback(doc *tfeapi.Document) (Report, error) {
	if doc.Type != "" && doc.Type != "task-results" {
		return Report{}, core.Invalid("data.type must be task-results, not %q", doc.Type)
	}
	var b struct {
		Status  ResultStatus `json:"status"`
		Message string       `json:"message"`
		URL     string       `json:"url"`
	}
	if err := doc.Attrs(&b); err != nil {
		return Report{}, err
	}
	rep := Report{Status: b.Status, Message: b.Message, URL: b.URL}
	if rel, ok := doc.Relationships["outcomes"]; ok && len(rel.Data) > 0 && string(rel.Data) != "null" {
		var items []struct {
			Type       string  `json:"type"`
			Attributes Outcome `json:"attributes"`
		}
		if err := json.Unmarshal(rel.Data, &items); err != nil {
			return Report{}, core.Invalid("relationships.outcomes.data must be a list of task-result-outcomes: %v", err)
		}
		rep.Outcomes = []Outcome{}
		for _, it := range items {
			if it.Type != "task-result-outcomes" {
				return Report{}, core.Invalid("outcomes must be of type task-result-outcomes, not %q", it.Type)
			}
			rep.Outcomes = append(rep.Outcomes, it.Attributes)
		}
	}
	return rep, nil
}
