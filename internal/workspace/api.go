package workspace

import (
	"context"
	"database/sql"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/retention"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// API serves the workspace endpoints of the TFE API v2.
type API struct {
	Service *Service
	// Permissions computes the caller's permissions from the one
	// authorization model, for the permissions and actions objects (nil:
	// owners may do everything, members read).
	Permissions func(ctx context.Context, p *auth.Principal, res authz.Resource) (authz.WorkspacePerms, error)
	// Vars lists a workspace's variable IDs for the vars relationship (nil: none).
	Vars interface {
		WorkspaceVariableIDs(ctx context.Context, workspaceID string) ([]string, error)
	}
	// CurrentAssessment names the workspace's newest finished health
	// assessment result ("" when none; nil: left out).
	CurrentAssessment func(ctx context.Context, workspaceID string) (string, error)
	// CurrentAssessmentSQL, when set, says CurrentAssessment in SQL (see
	// readDocument).
	CurrentAssessmentSQL string
	// IncludeRun renders a run for ?include=current_run (nil: left out).
	IncludeRun func(r *http.Request, id string) (any, error)
	// IncludeConfigVersion renders a configuration version for
	// ?include=current_configuration_version (nil: left out).
	IncludeConfigVersion func(r *http.Request, id string) (any, error)
	// IncludeStateVersion renders a state version for
	// ?include=current_state_version (nil: left out).
	IncludeStateVersion func(r *http.Request, id string) (any, error)
	// IncludeOrganization renders an organization for
	// ?include=organization (nil: left out).
	IncludeOrganization func(r *http.Request, name string) (any, error)
	// IncludeOrganizationOwners renders organizations as the admin API
	// shows them, with their owners, and the owners' documents, for the
	// admin routes' ?include=organization.owners (nil: left out).
	IncludeOrganizationOwners func(r *http.Request, names []string) ([]any, error)
	// NoCode reports the registry module a workspace was provisioned from
	// and whether a no-code upgrade is available (nil: none).
	NoCode interface {
		WorkspaceNoCode(ctx context.Context, workspaceID string) (sourceModuleID string, upgradeAvailable bool)
	}
}

// Respond writes a workspace as the workspace endpoints do (for endpoints
// of other domains that return workspaces, such as no-code provisioning).
func (a *API) Respond(w http.ResponseWriter, r *http.Request, status int, ws *Workspace) {
	a.respond(w, r, status, ws)
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	// A workspace read by name reads its document with its row.
	a.Service.document = a.documentColumns
	mux.HandleFunc("GET /api/v2/organizations/{org}/workspaces", a.list)
	mux.HandleFunc("POST /api/v2/organizations/{org}/workspaces", a.create)
	mux.HandleFunc("GET /api/v2/organizations/{org}/workspaces/{name}", a.byName(a.get))
	mux.HandleFunc("PATCH /api/v2/organizations/{org}/workspaces/{name}", a.byName(a.update))
	mux.HandleFunc("DELETE /api/v2/organizations/{org}/workspaces/{name}", a.byName(a.delete))
	mux.HandleFunc("POST /api/v2/organizations/{org}/workspaces/{name}/actions/safe-delete", a.byName(a.safeDelete))
	a.registerTags(mux)
	mux.HandleFunc("GET /api/v2/workspaces/{id}", a.byID(a.get))
	mux.HandleFunc("PATCH /api/v2/workspaces/{id}", a.byID(a.update))
	mux.HandleFunc("DELETE /api/v2/workspaces/{id}", a.byID(a.delete))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/actions/safe-delete", a.byID(a.safeDelete))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/actions/lock", a.byID(a.lock))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/actions/unlock", a.byID(a.unlock(false)))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/actions/force-unlock", a.byID(a.unlock(true)))
	mux.HandleFunc("GET /api/v2/workspaces/{id}/relationships/tags", a.byID(a.listTags))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/relationships/tags", a.byID(a.changeTags(true)))
	mux.HandleFunc("DELETE /api/v2/workspaces/{id}/relationships/tags", a.byID(a.changeTags(false)))
	mux.HandleFunc("GET /api/v2/workspaces/{id}/tag-bindings", a.byID(a.listTagBindings))
	mux.HandleFunc("PATCH /api/v2/workspaces/{id}/tag-bindings", a.byID(a.addTagBindings))
	mux.HandleFunc("GET /api/v2/workspaces/{id}/effective-tag-bindings", a.byID(a.listEffectiveTagBindings))
	mux.HandleFunc("PATCH /api/v2/workspaces/{id}/relationships/ssh-key", a.byID(a.assignSSHKey))
	mux.HandleFunc("GET /api/v2/workspaces/{id}/relationships/remote-state-consumers", a.byID(a.listConsumers))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/relationships/remote-state-consumers", a.byID(a.changeConsumers("add")))
	mux.HandleFunc("PATCH /api/v2/workspaces/{id}/relationships/remote-state-consumers", a.byID(a.changeConsumers("replace")))
	mux.HandleFunc("DELETE /api/v2/workspaces/{id}/relationships/remote-state-consumers", a.byID(a.changeConsumers("remove")))
	mux.HandleFunc("GET /api/v2/workspaces/{id}/relationships/data-retention-policy", a.byID(a.readRetention))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/relationships/data-retention-policy", a.byID(a.setRetention))
	mux.HandleFunc("PATCH /api/v2/workspaces/{id}/relationships/data-retention-policy", a.byID(a.setRetention))
	mux.HandleFunc("DELETE /api/v2/workspaces/{id}/relationships/data-retention-policy", a.byID(a.deleteRetention))
	a.registerAdmin(mux)
}

type handler func(w http.ResponseWriter, r *http.Request, ws *Workspace)

func (a *API) byName(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ws, err := a.Service.GetByName(r.Context(), r.PathValue("org"), r.PathValue("name"))
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		h(w, r, ws)
	}
}

func (a *API) byID(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ws, err := a.Service.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		h(w, r, ws)
	}
}

// jsonWorkspace is the wire form (go-tfe's Workspace).
type jsonWorkspace struct {
	ID                          string                          `jsonapi:"primary,workspaces"`
	Actions                     *jsonActions                    `jsonapi:"attr,actions"`
	AllowDestroyPlan            bool                            `jsonapi:"attr,allow-destroy-plan"`
	AssessmentsEnabled          bool                            `jsonapi:"attr,assessments-enabled"`
	AutoApply                   bool                            `jsonapi:"attr,auto-apply"`
	AutoApplyRunTrigger         bool                            `jsonapi:"attr,auto-apply-run-trigger"`
	AutoDestroyAt               jsonapi.NullableAttr[time.Time] `jsonapi:"attr,auto-destroy-at,iso8601,omitempty"`
	AutoDestroyActivityDuration jsonapi.NullableAttr[string]    `jsonapi:"attr,auto-destroy-activity-duration,omitempty"`
	CanQueueDestroyPlan         bool                            `jsonapi:"attr,can-queue-destroy-plan"`
	CreatedAt                   time.Time                       `jsonapi:"attr,created-at,iso8601"`
	Description                 string                          `jsonapi:"attr,description"`
	Environment                 string                          `jsonapi:"attr,environment"`
	ExecutionMode               string                          `jsonapi:"attr,execution-mode"`
	FileTriggersEnabled         bool                            `jsonapi:"attr,file-triggers-enabled"`
	GlobalRemoteState           bool                            `jsonapi:"attr,global-remote-state"`
	ProjectRemoteState          bool                            `jsonapi:"attr,project-remote-state"`
	InheritsProjectAutoDestroy  bool                            `jsonapi:"attr,inherits-project-auto-destroy"`
	Locked                      bool                            `jsonapi:"attr,locked"`
	MigrationEnvironment        string                          `jsonapi:"attr,migration-environment"`
	Name                        string                          `jsonapi:"attr,name"`
	NoCodeUpgradeAvailable      bool                            `jsonapi:"attr,no-code-upgrade-available"`
	Operations                  bool                            `jsonapi:"attr,operations"`
	Permissions                 *jsonPermissions                `jsonapi:"attr,permissions"`
	QueueAllRuns                bool                            `jsonapi:"attr,queue-all-runs"`
	SpeculativeEnabled          bool                            `jsonapi:"attr,speculative-enabled"`
	Source                      string                          `jsonapi:"attr,source"`
	SourceName                  string                          `jsonapi:"attr,source-name"`
	SourceURL                   string                          `jsonapi:"attr,source-url"`
	SourceModuleID              string                          `jsonapi:"attr,source-module-id"`
	StructuredRunOutputEnabled  bool                            `jsonapi:"attr,structured-run-output-enabled"`
	TerraformVersion            string                          `jsonapi:"attr,terraform-version"`
	TriggerPrefixes             []string                        `jsonapi:"attr,trigger-prefixes"`
	TriggerPatterns             []string                        `jsonapi:"attr,trigger-patterns"`
	WorkingDirectory            string                          `jsonapi:"attr,working-directory"`
	UpdatedAt                   time.Time                       `jsonapi:"attr,updated-at,iso8601"`
	ResourceCount               int                             `jsonapi:"attr,resource-count"`
	ApplyDurationAverage        int64                           `jsonapi:"attr,apply-duration-average"`
	PlanDurationAverage         int64                           `jsonapi:"attr,plan-duration-average"`
	PolicyCheckFailures         int                             `jsonapi:"attr,policy-check-failures"`
	RunFailures                 int                             `jsonapi:"attr,run-failures"`
	RunsCount                   int                             `jsonapi:"attr,workspace-kpis-runs-count"`
	TagNames                    []string                        `jsonapi:"attr,tag-names"`
	SettingOverwrites           *jsonSettingOverwrites          `jsonapi:"attr,setting-overwrites"`
	VCSRepo                     *vcsrepo.View                   `jsonapi:"attr,vcs-repo"`

	AgentPool            *jsonRef                `jsonapi:"relation,agent-pool"`
	CurrentRun           *jsonRunRef             `jsonapi:"relation,current-run"`
	CurrentConfigVersion *jsonCVRef              `jsonapi:"relation,current-configuration-version,omitempty"`
	CurrentAssessment    *jsonAssessmentRef      `jsonapi:"relation,current-assessment-result,omitempty"`
	CurrentStateVersion  *jsonStateVersionRef    `jsonapi:"relation,current-state-version"`
	Organization         *jsonOrgRef             `jsonapi:"relation,organization"`
	Project              *jsonProjectRef         `jsonapi:"relation,project"`
	LockedBy             *jsonLockedBy           `jsonapi:"polyrelation,locked-by"`
	Outputs              []*jsonOutput           `jsonapi:"relation,outputs"`
	Vars                 []*jsonVarRef           `jsonapi:"relation,vars"`
	SSHKey               *jsonSSHKeyRef          `jsonapi:"relation,ssh-key"`
	DataRetentionPolicy  *retention.Choice       `jsonapi:"polyrelation,data-retention-policy"`
	EffectiveTagBindings []*jsonEffectiveBinding `jsonapi:"relation,effective-tag-bindings,omitempty"`

	links *jsonapi.Links
}

func (j *jsonWorkspace) JSONAPILinks() *jsonapi.Links { return j.links }

type jsonActions struct {
	IsDestroyable bool `json:"is-destroyable"`
}

type jsonSettingOverwrites struct {
	ExecutionMode bool `json:"execution-mode"`
	AgentPool     bool `json:"agent-pool"`
}

type jsonPermissions struct {
	CanDestroy           bool `json:"can-destroy"`
	CanForceUnlock       bool `json:"can-force-unlock"`
	CanLock              bool `json:"can-lock"`
	CanManageRunTasks    bool `json:"can-manage-run-tasks"`
	CanManageHYOK        bool `json:"can-manage-hyok"`
	CanQueueApply        bool `json:"can-queue-apply"`
	CanQueueDestroy      bool `json:"can-queue-destroy"`
	CanQueueRun          bool `json:"can-queue-run"`
	CanReadSettings      bool `json:"can-read-settings"`
	CanReadStateVersions bool `json:"can-read-state-versions"`
	CanReadVariable      bool `json:"can-read-variable"`
	CanUnlock            bool `json:"can-unlock"`
	CanUpdate            bool `json:"can-update"`
	CanUpdateVariable    bool `json:"can-update-variable"`
	CanForceDelete       bool `json:"can-force-delete"`
}

type jsonRef struct {
	ID string `jsonapi:"primary,agent-pools"`
}

type jsonAssessmentRef struct {
	ID string `jsonapi:"primary,assessment-results"`
}

type jsonRunRef struct {
	ID string `jsonapi:"primary,runs"`
}

type jsonCVRef struct {
	ID string `jsonapi:"primary,configuration-versions"`
}

type jsonStateVersionRef struct {
	ID string `jsonapi:"primary,state-versions"`
}

type jsonSSHKeyRef struct {
	ID string `jsonapi:"primary,ssh-keys"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonProjectRef struct {
	ID          string `jsonapi:"primary,projects"`
	Name        string `jsonapi:"attr,name,omitempty"`
	Description string `jsonapi:"attr,description,omitempty"`
}

type jsonUserRef struct {
	ID string `jsonapi:"primary,users"`
}

type jsonTeamRef struct {
	ID string `jsonapi:"primary,teams"`
}

type jsonLockedBy struct {
	Run  *jsonRunRef
	User *jsonUserRef
	Team *jsonTeamRef
}

type jsonOutput struct {
	ID        string `jsonapi:"primary,workspace-outputs"`
	Name      string `jsonapi:"attr,name"`
	Sensitive bool   `jsonapi:"attr,sensitive"`
	Type      string `jsonapi:"attr,output-type"`
	Value     any    `jsonapi:"attr,value"`
}

type jsonEffectiveBinding struct {
	ID    string `jsonapi:"primary,effective-tag-bindings"`
	Key   string `jsonapi:"attr,key"`
	Value string `jsonapi:"attr,value"`
}

type jsonTagBinding struct {
	ID    string `jsonapi:"primary,tag-bindings"`
	Key   string `jsonapi:"attr,key"`
	Value string `jsonapi:"attr,value"`
}

type jsonTag struct {
	ID            string      `jsonapi:"primary,tags"`
	Name          string      `jsonapi:"attr,name"`
	InstanceCount int         `jsonapi:"attr,instance-count"`
	Organization  *jsonOrgRef `jsonapi:"relation,organization,omitempty"`
}

var includeNames = []string{"organization", "project", "locked_by", "current_run", "current_run.plan",
	"current_run.configuration_version", "current_configuration_version", "current_state_version",
	"current-state-version", "outputs", "readme", "effective_tag_bindings"}

// permissions renders what the caller may do in w: from the authorization
// model when wired, so that what terraform is told is what is enforced.
func (a *API) permissions(ctx context.Context, p *auth.Principal, w *Workspace) *jsonPermissions {
	if a.Permissions == nil {
		// No model wired (a service used on its own): Allows' answer.
		owner := authz.Allows(ctx, authz.WorkspaceUpdate, authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID}) == nil
		member := p.CanAccessOrganization(w.Organization)
		return &jsonPermissions{
			CanDestroy: owner, CanForceUnlock: owner, CanLock: member, CanManageRunTasks: owner, CanManageHYOK: owner,
			CanQueueApply: owner, CanQueueDestroy: owner, CanQueueRun: owner, CanReadSettings: member,
			CanReadStateVersions: member, CanReadVariable: member, CanUnlock: member, CanUpdate: owner,
			CanUpdateVariable: owner, CanForceDelete: owner,
		}
	}
	perms, err := a.Permissions(ctx, p, authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID})
	if err != nil {
		perms = authz.WorkspacePerms{}
	}
	return &jsonPermissions{
		CanDestroy: perms.Admin || perms.Delete, CanForceUnlock: perms.Admin, CanLock: perms.Locking,
		CanManageRunTasks: perms.RunTasks, CanManageHYOK: perms.Admin, CanQueueApply: perms.Runs >= authz.RunsApply,
		CanQueueDestroy: perms.Runs >= authz.RunsApply, CanQueueRun: perms.Runs >= authz.RunsPlan, CanReadSettings: perms.Read,
		CanReadStateVersions: perms.StateVersions >= authz.StateFull, CanReadVariable: perms.Variables >= authz.VarsRead,
		CanUnlock: perms.Locking, CanUpdate: perms.Admin, CanUpdateVariable: perms.Variables >= authz.VarsWrite,
		CanForceDelete: perms.ForceDelete,
	}
}

// toJSON renders a workspace; inc names the includes asked for and the
// returned slice holds the included objects.
func (a *API) toJSON(r *http.Request, w *Workspace, inc map[string]bool) (*jsonWorkspace, []any) {
	ctx := r.Context()
	s := w.Settings
	doc, _ := a.readDocument(ctx, w.ID)
	var mode, pool, autoDestroy string
	if doc.hasProject {
		pd, err := a.Service.projects.(ProjectSQL).WorkspaceProjectOf(doc.project)
		mode, pool = effectiveExecution(w, pd, err == nil)
		autoDestroy = inheritedAutoDestroy(w, pd.AutoDestroyActivityDuration)
	} else {
		mode, pool = a.Service.EffectiveExecution(ctx, w)
		autoDestroy = a.Service.autoDestroyDuration(ctx, w)
	}
	p := auth.FromContext(ctx)
	perms := a.permissions(ctx, p, w)
	j := &jsonWorkspace{
		ID: w.ID,
		// Destroyable by the caller: WorkspaceDelete, as can-destroy.
		Actions:                    &jsonActions{IsDestroyable: perms.CanDestroy},
		AllowDestroyPlan:           s.AllowDestroyPlan,
		AssessmentsEnabled:         s.AssessmentsEnabled,
		AutoApply:                  s.AutoApply,
		AutoApplyRunTrigger:        s.AutoApplyRunTrigger,
		CanQueueDestroyPlan:        s.AllowDestroyPlan,
		CreatedAt:                  w.CreatedAt,
		Description:                s.Description,
		Environment:                "default",
		ExecutionMode:              mode,
		FileTriggersEnabled:        s.FileTriggersEnabled,
		GlobalRemoteState:          s.GlobalRemoteState,
		ProjectRemoteState:         s.ProjectRemoteState,
		InheritsProjectAutoDestroy: s.InheritsProjectAutoDestroy,
		Locked:                     w.Locked(),
		MigrationEnvironment:       s.MigrationEnvironment,
		Name:                       w.Name,
		Operations:                 mode != "local",
		QueueAllRuns:               s.QueueAllRuns,
		SpeculativeEnabled:         s.SpeculativeEnabled,
		Source:                     s.Source,
		SourceName:                 s.SourceName,
		SourceURL:                  s.SourceURL,
		StructuredRunOutputEnabled: s.StructuredRunOutputEnabled,
		TerraformVersion:           s.TerraformVersion,
		TriggerPrefixes:            s.TriggerPrefixes,
		TriggerPatterns:            s.TriggerPatterns,
		WorkingDirectory:           s.WorkingDirectory,
		UpdatedAt:                  w.UpdatedAt,
		TagNames:                   w.TagNames,
		SettingOverwrites:          &jsonSettingOverwrites{ExecutionMode: s.ExecutionModeOverwrite, AgentPool: s.AgentPoolOverwrite},
		VCSRepo:                    s.VCSRepo.View(),
		Permissions:                perms,
		Organization:               &jsonOrgRef{Name: w.Organization},
		Project:                    &jsonProjectRef{ID: w.ProjectID},
		Outputs:                    []*jsonOutput{},
		Vars:                       []*jsonVarRef{},
		links: &jsonapi.Links{
			"self":      "/api/v2/organizations/" + url.PathEscape(w.Organization) + "/workspaces/" + url.PathEscape(w.Name),
			"self-html": "/app/" + url.PathEscape(w.Organization) + "/workspaces/" + url.PathEscape(w.Name),
		},
	}
	if a.NoCode != nil && (!doc.hasNoCode || doc.noCode.Valid) {
		j.SourceModuleID, j.NoCodeUpgradeAvailable = a.NoCode.WorkspaceNoCode(ctx, w.ID)
	}
	if j.TagNames == nil {
		j.TagNames = []string{}
	}
	if s.AutoDestroyAt != nil {
		j.AutoDestroyAt = jsonapi.NewNullableAttrWithValue(s.AutoDestroyAt.UTC())
	}
	if autoDestroy != "" {
		j.AutoDestroyActivityDuration = jsonapi.NewNullableAttrWithValue(autoDestroy)
	}
	if pool != "" {
		j.AgentPool = &jsonRef{ID: pool}
	}
	if w.SSHKeyID != "" {
		j.SSHKey = &jsonSSHKeyRef{ID: w.SSHKeyID}
	}
	j.DataRetentionPolicy = retention.Relationship(w.Settings.DataRetention)
	switch w.LockKind {
	case LockUser:
		j.LockedBy = &jsonLockedBy{User: &jsonUserRef{ID: w.LockID}}
	case LockTeam:
		j.LockedBy = &jsonLockedBy{Team: &jsonTeamRef{ID: w.LockID}}
	case LockRun:
		j.LockedBy = &jsonLockedBy{Run: &jsonRunRef{ID: w.LockID}}
	}
	if doc.hasVars {
		for _, id := range doc.varIDs() {
			j.Vars = append(j.Vars, &jsonVarRef{ID: id})
		}
	} else if a.Vars != nil {
		if ids, err := a.Vars.WorkspaceVariableIDs(ctx, w.ID); err == nil {
			for _, id := range ids {
				j.Vars = append(j.Vars, &jsonVarRef{ID: id})
			}
		}
	}
	var included []any
	if sum, ok := a.stateSummaryOf(ctx, w.ID, doc, inc); ok {
		if sum.CurrentStateVersionID != "" {
			j.CurrentStateVersion = &jsonStateVersionRef{ID: sum.CurrentStateVersionID}
			if inc["current_state_version"] && a.IncludeStateVersion != nil {
				if sv, err := a.IncludeStateVersion(r, sum.CurrentStateVersionID); err == nil {
					included = append(included, sv)
				}
			}
		}
		j.ResourceCount = sum.ResourceCount
		for _, o := range sum.Outputs {
			jo := &jsonOutput{ID: o.ID, Name: o.Name, Sensitive: o.Sensitive, Type: o.Type}
			if !o.Sensitive {
				jo.Value = o.Value
			}
			j.Outputs = append(j.Outputs, jo)
		}
		if inc["outputs"] {
			included = append(included, j.Outputs)
		}
	}
	if a.CurrentAssessment != nil {
		if id, err := docPart(doc.hasAssessment, doc.assessment, func() (string, error) { return a.CurrentAssessment(ctx, w.ID) }); err == nil && id != "" {
			j.CurrentAssessment = &jsonAssessmentRef{ID: id}
		}
	}
	if a.Service.Runs != nil {
		if id, err := docPart(doc.hasRun, doc.currentRun, func() (string, error) { return a.Service.Runs.CurrentRunID(ctx, w.ID) }); err == nil && id != "" {
			j.CurrentRun = &jsonRunRef{ID: id}
			if (inc["current_run"] || inc["current_run.plan"] || inc["current_run.configuration_version"]) && a.IncludeRun != nil {
				if run, err := a.IncludeRun(r, id); err == nil {
					included = append(included, run)
				}
			}
		}
		if doc.hasRunsCount {
			j.RunsCount = int(doc.runsCount.Int64)
		} else if h, ok := a.Service.Runs.(RunHistory); ok {
			if n, err := h.RunsCount(ctx, w.ID); err == nil {
				j.RunsCount = n
			}
		}
	}
	if a.Service.Configs != nil {
		if id, err := docPart(doc.hasConfig, doc.config, func() (string, error) { return a.Service.Configs.CurrentConfigurationVersionID(ctx, w.ID) }); err == nil && id != "" {
			j.CurrentConfigVersion = &jsonCVRef{ID: id}
			if inc["current_configuration_version"] && a.IncludeConfigVersion != nil {
				if cv, err := a.IncludeConfigVersion(r, id); err == nil {
					included = append(included, cv)
				}
			}
		}
	}
	if inc["organization"] && a.IncludeOrganization != nil {
		if o, err := a.IncludeOrganization(r, w.Organization); err == nil {
			included = append(included, o)
		}
	}
	if inc["project"] {
		if pi, err := a.Service.projectInfo(ctx, w.ProjectID); err == nil {
			included = append(included, &jsonProjectRef{ID: pi.ID, Name: pi.Name, Description: pi.Description})
		}
	}
	if inc["effective_tag_bindings"] {
		if eff, err := a.Service.EffectiveTagBindings(ctx, w.ID); err == nil {
			j.EffectiveTagBindings = []*jsonEffectiveBinding{}
			for _, b := range eff {
				e := &jsonEffectiveBinding{ID: b.ID, Key: b.Key, Value: b.Value}
				j.EffectiveTagBindings = append(j.EffectiveTagBindings, e)
				if b.InheritedFrom != "" { // included with its inherited-from link
					included = append(included, &jsonInheritedBinding{ID: b.ID, Key: b.Key, Value: b.Value, from: b.InheritedFrom})
				} else {
					included = append(included, e)
				}
			}
		}
	}
	return j, included
}

// docPart is a part of the workspace document: as readDocument read it
// when it did, else asked of its domain.
func docPart(read bool, v sql.NullString, ask func() (string, error)) (string, error) {
	if read {
		return v.String, nil
	}
	return ask()
}

// stateSummaryOf is stateSummary when the document read says there is no
// state: nothing to ask.
//
// A read whose document took the rest of the summary along (and includes
// no outputs, whose attributes it does not have) takes it from there.
func (a *API) stateSummaryOf(ctx context.Context, id string, doc document, inc map[string]bool) (StateSummary, bool) {
	if doc.hasState && doc.state.String == "" {
		return StateSummary{}, a.Service.State != nil
	}
	if doc.hasState && doc.hasStateSummary && !inc["outputs"] {
		if sum, err := a.Service.State.(StateSummarySQL).StateSummaryOf(ctx, id, doc.state.String, doc.stateSummary); err == nil {
			return sum, true
		}
	}
	return a.stateSummary(ctx, id)
}

// stateSummary returns what the workspace's JSON shows of its state; ok is
// false when there is nothing to show (no state domain, or it failed).
func (a *API) stateSummary(ctx context.Context, id string) (sum StateSummary, ok bool) {
	st := a.Service.State
	if st == nil {
		return sum, false
	}
	if ss, isSum := st.(StateSummarizer); isSum {
		sum, err := ss.StateSummary(ctx, id)
		return sum, err == nil
	}
	var err error
	if sum.CurrentStateVersionID, err = st.CurrentStateVersionID(ctx, id); err != nil {
		return sum, false
	}
	if sum.ResourceCount, err = st.ResourceCount(ctx, id); err != nil {
		return sum, false
	}
	if ol, isOL := st.(OutputLister); isOL {
		if sum.Outputs, err = ol.CurrentOutputs(ctx, id); err != nil {
			return sum, false
		}
	}
	return sum, true
}

// body is a workspace's attributes as sent.
type body struct {
	Name                        *string         `json:"name"`
	Description                 *string         `json:"description"`
	ExecutionMode               *string         `json:"execution-mode"`
	AgentPoolID                 *string         `json:"agent-pool-id"`
	Operations                  *bool           `json:"operations"`
	AllowDestroyPlan            *bool           `json:"allow-destroy-plan"`
	AssessmentsEnabled          *bool           `json:"assessments-enabled"`
	AutoApply                   *bool           `json:"auto-apply"`
	AutoApplyRunTrigger         *bool           `json:"auto-apply-run-trigger"`
	FileTriggersEnabled         *bool           `json:"file-triggers-enabled"`
	GlobalRemoteState           *bool           `json:"global-remote-state"`
	ProjectRemoteState          *bool           `json:"project-remote-state"`
	QueueAllRuns                *bool           `json:"queue-all-runs"`
	SpeculativeEnabled          *bool           `json:"speculative-enabled"`
	StructuredRunOutputEnabled  *bool           `json:"structured-run-output-enabled"`
	InheritsProjectAutoDestroy  *bool           `json:"inherits-project-auto-destroy"`
	AutoDestroyAt               json.RawMessage `json:"auto-destroy-at"`
	AutoDestroyActivityDuration json.RawMessage `json:"auto-destroy-activity-duration"`
	SourceName                  *string         `json:"source-name"`
	SourceURL                   *string         `json:"source-url"`
	TerraformVersion            *string         `json:"terraform-version"`
	WorkingDirectory            *string         `json:"working-directory"`
	MigrationEnvironment        *string         `json:"migration-environment"`
	TriggerPrefixes             *[]string       `json:"trigger-prefixes"`
	TriggerPatterns             *[]string       `json:"trigger-patterns"`
	VCSRepo                     json.RawMessage `json:"vcs-repo"`
	SettingOverwrites           *struct {
		ExecutionMode *bool `json:"execution-mode"`
		AgentPool     *bool `json:"agent-pool"`
	} `json:"setting-overwrites"`
}

func decodeOptions(w http.ResponseWriter, r *http.Request) (Options, error) {
	var o Options
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return o, err
	}
	var b body
	if err := doc.Attrs(&b); err != nil {
		return o, err
	}
	o = Options{
		Name: b.Name, Description: b.Description, ExecutionMode: b.ExecutionMode, AgentPoolID: b.AgentPoolID,
		Operations: b.Operations, AllowDestroyPlan: b.AllowDestroyPlan, AssessmentsEnabled: b.AssessmentsEnabled,
		AutoApply: b.AutoApply, AutoApplyRunTrigger: b.AutoApplyRunTrigger, FileTriggersEnabled: b.FileTriggersEnabled,
		GlobalRemoteState: b.GlobalRemoteState, ProjectRemoteState: b.ProjectRemoteState, QueueAllRuns: b.QueueAllRuns,
		SpeculativeEnabled: b.SpeculativeEnabled, StructuredRunOutputEnabled: b.StructuredRunOutputEnabled,
		InheritsProjectAutoDestroy: b.InheritsProjectAutoDestroy, SourceName: b.SourceName, SourceURL: b.SourceURL,
		TerraformVersion: b.TerraformVersion, WorkingDirectory: b.WorkingDirectory, MigrationEnvironment: b.MigrationEnvironment,
		TriggerPrefixes: b.TriggerPrefixes, TriggerPatterns: b.TriggerPatterns,
	}
	if b.SettingOverwrites != nil {
		o.ExecutionModeOverwrite, o.AgentPoolOverwrite = b.SettingOverwrites.ExecutionMode, b.SettingOverwrites.AgentPool
	}
	if o.VCSRepo, o.RemoveVCSRepo, err = vcsrepo.Decode(b.VCSRepo); err != nil {
		return o, err
	}
	if len(b.AutoDestroyAt) > 0 {
		o.AutoDestroyAtSet = true
		if string(b.AutoDestroyAt) != "null" {
			var t time.Time
			if err := json.Unmarshal(b.AutoDestroyAt, &t); err != nil {
				return o, core.Invalid("attribute \"auto-destroy-at\" must be an RFC 3339 time")
			}
			t = t.UTC()
			o.AutoDestroyAt = &t
		}
	}
	if len(b.AutoDestroyActivityDuration) > 0 {
		d := ""
		if string(b.AutoDestroyActivityDuration) != "null" {
			if err := json.Unmarshal(b.AutoDestroyActivityDuration, &d); err != nil {
				return o, core.Invalid("attribute \"auto-destroy-activity-duration\" must be a string")
			}
		}
		o.AutoDestroyActivityDuration = &d
	}
	if id, err := doc.RelID("project"); err != nil {
		return o, err
	} else if id != "" {
		o.ProjectID = &id
	}
	tags, err := doc.RelResources("tags")
	if err != nil {
		return o, err
	}
	if o.Tags, err = tagRefs(tags); err != nil {
		return o, err
	}
	if _, ok := doc.Relationships["tag-bindings"]; ok {
		res, err := doc.RelResources("tag-bindings")
		if err != nil {
			return o, err
		}
		bs, err := parseBindings(res)
		if err != nil {
			return o, err
		}
		o.TagBindings = &bs
	}
	return o, nil
}

func tagRefs(res []tfeapi.Resource) ([]TagRef, error) {
	var out []TagRef
	for _, r := range res {
		var attrs struct {
			Name string `json:"name"`
		}
		if len(r.Attributes) > 0 {
			if err := json.Unmarshal(r.Attributes, &attrs); err != nil {
				return nil, core.Invalid("tag attributes must hold a string name")
			}
		}
		out = append(out, TagRef{ID: r.ID, Name: attrs.Name})
	}
	return out, nil
}

// parseBindings reads tag bindings sent as JSON:API resources (the same
// wire form as a project's).
func parseBindings(res []tfeapi.Resource) ([]TagBinding, error) {
	pbs, err := project.ParseTagBindings(res)
	if err != nil {
		return nil, err
	}
	out := make([]TagBinding, len(pbs))
	for i, b := range pbs {
		out[i] = TagBinding(b)
	}
	return out, nil
}

func (a *API) respond(w http.ResponseWriter, r *http.Request, status int, ws *Workspace) {
	r = r.WithContext(WithProjectCache(r.Context()))
	inc, err := tfeapi.Includes(r, includeNames...)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	j, included := a.toJSON(r, ws, inc)
	tfeapi.Respond(w, r, status, j, included...)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	o, err := decodeOptions(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ws, err := a.Service.Create(r.Context(), r.PathValue("org"), o)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusCreated, ws)
}

func (a *API) get(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	a.respond(w, r, http.StatusOK, ws)
}

func (a *API) update(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	o, err := decodeOptions(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ws, err = a.Service.Update(r.Context(), ws.ID, o)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusOK, ws)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	if err := a.Service.Delete(r.Context(), ws.ID); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) safeDelete(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	if err := a.Service.SafeDelete(r.Context(), ws.ID); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(WithProjectCache(r.Context()))
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	inc, err := tfeapi.Includes(r, includeNames...)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	opts := ListOptions{
		Search:       q.Get("search[name]"),
		WildcardName: q.Get("search[wildcard-name]"),
		ProjectID:    q.Get("filter[project][id]"),
		Sort:         q.Get("sort"),
		Tagged:       parseTagFilters(q),
	}
	if v := q.Get("search[tags]"); v != "" {
		opts.Tags = strings.Split(v, ",")
	}
	if v := q.Get("search[exclude-tags]"); v != "" {
		opts.ExcludeTags = strings.Split(v, ",")
	}
	if v := q.Get("filter[current-run][status]"); v != "" {
		opts.CurrentRunStatus = strings.Split(v, ",")
	}
	items, total, err := a.Service.ListPage(r.Context(), r.PathValue("org"), opts, page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	a.readDocuments(r.Context(), items)
	out := make([]*jsonWorkspace, len(items))
	var included []any
	// Every workspace of the page is the organization's: it is rendered
	// and included once.
	each := inc
	if inc["organization"] && len(items) > 0 && a.IncludeOrganization != nil {
		if o, err := a.IncludeOrganization(r, items[0].Organization); err == nil {
			included = append(included, o)
		}
		each = maps.Clone(inc)
		delete(each, "organization")
	}
	for i, ws := range items {
		var inc1 []any
		out[i], inc1 = a.toJSON(r, ws, each)
		included = append(included, inc1...)
	}
	tfeapi.RespondList(w, r, out, pg, included...)
}

func parseTagFilters(q url.Values) []TagBinding {
	var out []TagBinding
	for i := 0; ; i++ {
		k := q.Get("filter[tagged][" + itoa(i) + "][key]")
		if k == "" {
			return out
		}
		out = append(out, TagBinding{Key: k, Value: q.Get("filter[tagged][" + itoa(i) + "][value]")})
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func (a *API) lock(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var b struct {
		Reason string `json:"reason"`
	}
	if err := doc.Attrs(&b); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ws, err = a.Service.Lock(r.Context(), ws.ID, b.Reason)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusOK, ws)
}

func (a *API) unlock(force bool) handler {
	return func(w http.ResponseWriter, r *http.Request, ws *Workspace) {
		ws, err := a.Service.Unlock(r.Context(), ws.ID, force)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		a.respond(w, r, http.StatusOK, ws)
	}
}

// assignSSHKey sets or (id null) removes the workspace's SSH key. go-tfe
// sends the key's ID as the attribute "id" of a workspaces document.
func (a *API) assignSSHKey(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var b struct {
		ID json.RawMessage `json:"id"`
	}
	if err := doc.Attrs(&b); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	keyID := ""
	switch {
	case len(b.ID) == 0:
		tfeapi.Error(w, r, core.Invalid("attribute \"id\" is required: an SSH key ID, or null to unassign the key"))
		return
	case string(b.ID) != "null":
		if err := json.Unmarshal(b.ID, &keyID); err != nil || keyID == "" {
			tfeapi.Error(w, r, core.Invalid("attribute \"id\" must be an SSH key ID, or null to unassign the key"))
			return
		}
	}
	ws, err = a.Service.AssignSSHKey(r.Context(), ws.ID, keyID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusOK, ws)
}

func (a *API) listTags(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tags, err := a.Service.Tags(r.Context(), ws.ID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(tags, page)
	out := make([]*jsonTag, len(items))
	for i, t := range items {
		out[i] = &jsonTag{ID: t.ID, Name: t.Name}
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) changeTags(add bool) handler {
	return func(w http.ResponseWriter, r *http.Request, ws *Workspace) {
		res, err := tfeapi.DecodeResources(w, r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		refs, err := tagRefs(res)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		if add {
			err = a.Service.AddTags(r.Context(), ws.ID, refs)
		} else {
			err = a.Service.RemoveTags(r.Context(), ws.ID, refs)
		}
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (a *API) orgTags(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	org := r.PathValue("org")
	items, total, err := a.Service.OrganizationTags(r.Context(), org, q.Get("q"), q.Get("filter[exclude][taggable][id]"), page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	out := make([]*jsonTag, len(items))
	for i, t := range items {
		out[i] = &jsonTag{ID: t.ID, Name: t.Name, InstanceCount: t.InstanceCount, Organization: &jsonOrgRef{Name: org}}
	}
	tfeapi.RespondList(w, r, out, pg)
}

func bindingsList(w http.ResponseWriter, r *http.Request, bs []TagBinding) {
	out := make([]*jsonTagBinding, len(bs))
	for i, b := range bs {
		out[i] = &jsonTagBinding{ID: b.ID, Key: b.Key, Value: b.Value}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 1), Total: len(out)})
}

func (a *API) listTagBindings(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	bs, err := a.Service.TagBindings(r.Context(), ws.ID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	bindingsList(w, r, bs)
}

func (a *API) addTagBindings(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	res, err := tfeapi.DecodeResources(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	in, err := parseBindings(res)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	bs, err := a.Service.AddTagBindings(r.Context(), ws.ID, in)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	bindingsList(w, r, bs)
}

// jsonInheritedBinding is an effective binding inherited from the project:
// it carries an inherited-from link; the workspace's own bindings carry none.
type jsonInheritedBinding struct {
	ID    string `jsonapi:"primary,effective-tag-bindings"`
	Key   string `jsonapi:"attr,key"`
	Value string `jsonapi:"attr,value"`
	from  string
}

func (j *jsonInheritedBinding) JSONAPILinks() *jsonapi.Links {
	return &jsonapi.Links{"inherited-from": "/api/v2/projects/" + url.PathEscape(j.from)}
}

func (a *API) listEffectiveTagBindings(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	eff, err := a.Service.EffectiveTagBindings(r.Context(), ws.ID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]any, len(eff))
	for i, b := range eff {
		if b.InheritedFrom != "" {
			out[i] = &jsonInheritedBinding{ID: b.ID, Key: b.Key, Value: b.Value, from: b.InheritedFrom}
		} else {
			out[i] = &jsonEffectiveBinding{ID: b.ID, Key: b.Key, Value: b.Value}
		}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 1), Total: len(out)})
}

func (a *API) listConsumers(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	r = r.WithContext(WithProjectCache(r.Context()))
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	cs, err := a.Service.Consumers(r.Context(), ws.ID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(cs, page)
	out := make([]*jsonWorkspace, len(items))
	for i, c := range items {
		out[i], _ = a.toJSON(r, c, nil)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) changeConsumers(op string) handler {
	return func(w http.ResponseWriter, r *http.Request, ws *Workspace) {
		res, err := tfeapi.DecodeResources(w, r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		ids := make([]string, 0, len(res))
		for _, x := range res {
			ids = append(ids, x.ID)
		}
		if err := a.Service.ChangeConsumers(r.Context(), ws.ID, op, ids); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

type jsonVarRef struct {
	ID string `jsonapi:"primary,vars"`
}

// Render is a workspace's wire form for other domains' ?include=workspace.
func (a *API) Render(r *http.Request, w *Workspace) any {
	j, _ := a.toJSON(r, w, nil)
	return j
}
