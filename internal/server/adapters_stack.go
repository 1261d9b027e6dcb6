package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/variable"
	"github.com/terracehq/terrace/internal/workspace"
)

// wireStacks builds the stack service; a project that holds stacks is not
// deleted.
func (s *Server) wireStacks() error {
	var err error
	s.Stacks, err = stack.NewService(stack.Options{DB: s.DB, Blobs: s.Blobs, Signer: s.Signer,
		Projects: stackProjects{s.Projects}, Orgs: orchOrgs{s}, Logger: s.logger.With("component", "stack"),
		Executor: stackExecutor{s}, States: stackStates{s}, ApplyWait: s.cfg.StackApplyWait, Keys: s.Keys,
		Pools: s.AgentPools})
	if err != nil {
		return err
	}
	s.Projects.OnDelete = append(s.Projects.OnDelete, func(ctx context.Context, q store.Q, projectID string) error {
		n, err := stack.CountInProject(ctx, q, projectID)
		if err != nil {
			return err
		}
		if n > 0 {
			return core.Conflict("project %s still holds %d stacks; delete them first", projectID, n)
		}
		return nil
	})
	return nil
}

type stackProjects struct{ p *project.Service }

func (a stackProjects) Organization(ctx context.Context, id string) (string, error) {
	p, err := a.p.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}

func (a stackProjects) Name(ctx context.Context, org, id string) (string, error) {
	p, err := a.p.Get(auth.AsOrganization(ctx, org), id)
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

// stackExecutor runs deployments as runs on one workspace per deployment,
// like the orchestrator's environments. It acts with an organization
// principal of the stack's own organization, nothing wider.
type stackExecutor struct{ s *Server }

func (e stackExecutor) Workspace(ctx context.Context, org, projectID string, d stack.DeploymentWorkspace) (string, error) {
	ctx = auth.AsOrganization(ctx, org)
	var tfVersion *string
	if d.TerraformVersion != "" {
		tfVersion = &d.TerraformVersion
	}
	// The stack's execution mode is the workspace's own (not its
	// project's): an agent stack runs only on its pool's agents.
	mode, pool := cmp.Or(d.ExecutionMode, "remote"), ""
	if mode == "agent" {
		pool = d.AgentPoolID
	}
	w, err := e.s.Workspaces.GetByName(ctx, org, d.Name)
	if err == nil {
		if w.Settings.ManagedBy != d.StackID {
			// A workspace is marked as a stack's when it is created, and
			// the mark never changes (the authorization model remembers
			// it): one of the same name made by someone else is not
			// taken over.
			return "", core.Conflict("workspace %s exists and is not this stack's deployment: rename or delete it", d.Name)
		}
		var o workspace.Options
		if tfVersion != nil && w.Settings.TerraformVersion != d.TerraformVersion {
			o.TerraformVersion = tfVersion
		}
		if !w.Settings.ExecutionModeOverwrite || w.Settings.ExecutionMode != mode || w.Settings.AgentPoolID != pool {
			o.ExecutionMode, o.AgentPoolID = &mode, &pool
		}
		if o.TerraformVersion != nil || o.ExecutionMode != nil {
			if _, err := e.s.Workspaces.Update(ctx, w.ID, o); err != nil {
				return "", err
			}
		}
		return w.ID, nil
	}
	if !errors.Is(err, core.ErrNotFound) {
		return "", err
	}
	w, err = e.s.Workspaces.Create(ctx, org, workspace.Options{Name: &d.Name, ProjectID: &projectID, ExecutionMode: &mode, AgentPoolID: &pool,
		AutoApply: ptr(false), TerraformVersion: tfVersion, Description: ptr("State of a stack deployment; changed by its deployment runs."),
		ManagedBy: &d.StackID})
	if err != nil {
		return "", err
	}
	return w.ID, nil
}

func (e stackExecutor) RemoveWorkspaces(ctx context.Context, org, projectID, prefix string) (map[string]string, error) {
	ctx = auth.AsOrganization(ctx, org)
	ws, err := e.s.Workspaces.List(ctx, org, workspace.ListOptions{ProjectID: projectID, WildcardName: prefix + "*"})
	if err != nil {
		return nil, err
	}
	kept := map[string]string{}
	for _, w := range ws {
		if !strings.HasPrefix(w.Name, prefix) {
			continue
		}
		if err := e.s.Workspaces.SafeDelete(ctx, w.ID); err != nil {
			kept[w.Name] = err.Error()
		}
	}
	return kept, nil
}

func (e stackExecutor) Upload(ctx context.Context, org, workspaceID string, tgz []byte, speculative bool) (string, error) {
	cv, err := e.s.ConfigVersions.CreateFromArchive(auth.AsOrganization(ctx, org), workspaceID, tgz, configversion.CreateOptions{AutoQueueRuns: ptr(false), Speculative: ptr(speculative)})
	if err != nil {
		return "", err
	}
	return cv.ID, nil
}

func (e stackExecutor) Start(ctx context.Context, org string, req stack.RunRequest) (string, error) {
	var vars []run.RunVar
	for k, v := range req.Variables {
		vars = append(vars, run.RunVar{Key: k, Value: v, Sensitive: req.Sensitive[k]})
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].Key < vars[j].Key })
	// A deployment run's logs are the deployment's debug logs, which no
	// cloud backend renders: text, as they were, whatever its
	// workspace's structured run output. The stack domain decided who may
	// start it; the organization principal never runs terraform itself.
	o := run.CreateOptions{WorkspaceID: req.WorkspaceID, ConfigurationVersionID: req.ConfigVersionID,
		SavePlan: ptr(true), AutoApply: ptr(false), IsDestroy: ptr(req.Destroy), Message: ptr(req.Message), Variables: vars, TextLog: true}
	if req.PlanOnly {
		o.SavePlan, o.PlanOnly = nil, ptr(true)
	}
	r, err := e.s.Runs.CreateSystem(auth.AsOrganization(ctx, org), o)
	if err != nil {
		return "", err
	}
	return r.ID, nil
}

func (e stackExecutor) Status(ctx context.Context, org, runID string) (stack.RunReport, error) {
	r, err := e.s.Runs.Get(auth.AsOrganization(ctx, org), runID)
	if err != nil {
		return stack.RunReport{}, err
	}
	p := r.Plan
	return stack.RunReport{Status: string(r.Status), Final: r.Status.Final(), OK: r.Status == run.Applied || r.Status == run.PlannedAndFinished,
		Saved: r.Status == run.PlannedAndSaved, Stale: r.Status == run.Discarded,
		Error: r.ErrorMessage, Changes: stack.ChangeCounts{Add: p.Additions, Change: p.Changes, Remove: p.Destructions, Import: p.Imports,
			Total: p.Additions + p.Changes + p.Destructions + p.Imports}}, nil
}

func (e stackExecutor) Apply(ctx context.Context, org, runID, comment string) error {
	return e.s.Runs.Apply(auth.AsOrganization(ctx, org), runID, comment)
}

func (e stackExecutor) Artifact(ctx context.Context, org, runID, name string) ([]byte, error) {
	ctx = auth.AsOrganization(ctx, org)
	r, err := e.s.Runs.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	switch name {
	case stack.ArtifactPlanDescription:
		return e.s.Runs.PlanBlob(ctx, r.Plan.ID, "json-redacted")
	case stack.ArtifactPlanDebugLog:
		return e.s.Runs.ReadLog(ctx, r.Plan.ID, 0, 0)
	case stack.ArtifactApplyDebugLog:
		return e.s.Runs.ReadLog(ctx, r.Apply.ID, 0, 0)
	case stack.ArtifactApplyDescription:
		if r.Apply.Status == "" || r.Apply.Status == run.PhasePending {
			return nil, core.NotFound("run %s has not applied", runID)
		}
		return json.Marshal(map[string]any{"run-id": r.ID, "status": r.Apply.Status, "resource-additions": r.Apply.Additions,
			"resource-changes": r.Apply.Changes, "resource-destructions": r.Apply.Destructions, "resource-imports": r.Apply.Imports})
	}
	return nil, core.NotFound("no artifact %q", name)
}

func (e stackExecutor) Cancel(ctx context.Context, org, runID string) error {
	ctx = auth.AsOrganization(ctx, org)
	r, err := e.s.Runs.Get(ctx, runID)
	if err != nil {
		return err
	}
	if r.Status == run.PlannedAndSaved {
		return e.s.Runs.Discard(ctx, runID, "Discarded with its stack deployment run")
	}
	return e.s.Runs.Cancel(ctx, runID, "Cancelled with its stack deployment run")
}

func (e stackExecutor) Outputs(ctx context.Context, org, workspaceID string) (map[string]stack.OutputValue, error) {
	outs, err := e.s.States.CurrentOutputs(auth.AsOrganization(ctx, org), workspaceID)
	if err != nil {
		return nil, err
	}
	m := map[string]stack.OutputValue{}
	for _, o := range outs {
		m[o.Name] = stack.OutputValue{Value: o.Value, Type: o.DetailedType, Sensitive: o.Sensitive}
	}
	return m, nil
}

// stackStates reads deployments' state versions with the caller's rights.
type stackStates struct{ s *Server }

func stateInfo(v *state.Version) stack.StateInfo {
	return stack.StateInfo{ID: v.ID, WorkspaceID: v.WorkspaceID, Serial: v.Serial, Resources: v.Summary.ResourceCount, CreatedAt: v.CreatedAt}
}

func (a stackStates) Current(ctx context.Context, workspaceID string) (stack.StateInfo, error) {
	v, err := a.s.States.Current(ctx, workspaceID)
	if err != nil {
		return stack.StateInfo{}, err
	}
	return stateInfo(v), nil
}

func (a stackStates) Get(ctx context.Context, id string) (stack.StateInfo, error) {
	v, err := a.s.States.Get(ctx, id)
	if err != nil {
		return stack.StateInfo{}, err
	}
	return stateInfo(v), nil
}

func (a stackStates) Description(ctx context.Context, id string) ([]byte, error) {
	if _, err := a.s.States.Get(ctx, id); err != nil {
		return nil, err
	}
	// The JSON form when the runner stored one, the state file otherwise.
	r, _, err := a.s.States.Content(ctx, id, true)
	if core.KindOf(err) == core.KindNotFound {
		r, _, err = a.s.States.Content(ctx, id, false)
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, 64<<20))
}

// Varset reads a variable set for a stack's store "varset" block: by ID, or
// by its exact name (names are unique in an organization), when it is
// global, applied to the stack's project or owned by it.
func (e stackExecutor) Varset(ctx context.Context, org, projectID, id, name string) ([]stack.VarsetVariable, error) {
	ctx = auth.AsOrganization(ctx, org)
	var vs *variable.VariableSet
	if id != "" {
		got, err := e.s.Variables.GetVarset(ctx, id)
		if core.KindOf(err) == core.KindNotFound || err == nil && got.Organization != org {
			return nil, core.NotFound("there is no variable set %q in organization %s", id, org)
		}
		if err != nil {
			return nil, err
		}
		vs = got
	} else {
		sets, _, err := e.s.Variables.ListVarsets(ctx, org, name, 0, -1)
		if err != nil {
			return nil, err
		}
		for _, s := range sets {
			if s.Name == name {
				vs = s
			}
		}
		if vs == nil {
			return nil, core.NotFound("there is no variable set named %q in organization %s", name, org)
		}
	}
	if !vs.Global && vs.ParentProjectID != projectID && !slices.Contains(vs.ProjectIDs, projectID) {
		return nil, core.Invalid("variable set %s (%s) is neither global nor applied to the stack's project", vs.Name, vs.ID)
	}
	vars, err := e.s.Variables.ListVarsetVariables(ctx, vs.ID)
	if err != nil {
		return nil, err
	}
	out := make([]stack.VarsetVariable, 0, len(vars))
	for _, v := range vars {
		out = append(out, stack.VarsetVariable{Key: v.Key, Value: v.Value, Category: string(v.Category), HCL: v.HCL, Sensitive: v.Sensitive})
	}
	return out, nil
}
