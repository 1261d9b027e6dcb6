package orchestration

import (
	"context"
	"fmt"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Who may do what here. Every decision asks the authorization model
// (authz.Allows), and an environment's deployments, outputs and generated
// Terraform are its workspace's runs, state and configurations, so they
// need what /api/v2 needs for those in that workspace:
//
//   - every request: authz.OrgRead in the organization. Run, agent and
//     task-result tokens have no use for the orchestrator and are refused
//     by it on every endpoint.
//   - configuration objects: reading them authz.OrgRead, changing them
//     authz.OrgManageOrchestrator (owners and the organization's token).
//   - an environment's deployments, their graphs and diffs: authz.RunRead
//     on its workspace; their Terraform: authz.RunInputs; its outputs:
//     authz.StateReadOutputs. Before the environment has a workspace
//     there is nothing of one to show, and the organization read suffices.
//   - a dry run: what reading the deployments needs.
//   - a deployment: authz.RunPlan (plan_only) or authz.RunApply (deploy,
//     rollback, destroy) on the environment's workspace, which
//     organization tokens never have. An environment without a workspace
//     needs what creating a workspace in the project it goes into needs,
//     and the run's permission in a new workspace of that project.
//
// Without a model in the context (the service used on its own) only
// owners pass authz.Allows.

// canRead lets the caller into the organization's orchestrator.
func (s *Service) canRead(ctx context.Context, org string) error {
	// The organization check refuses user tokens where the organization
	// disabled them and answers 404 for other organizations.
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return err
	}
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		return err
	}
	if s.Orgs != nil {
		return s.Orgs.Exists(ctx, org)
	}
	return nil
}

// canWrite: configuration objects are the platform team's.
func (s *Service) canWrite(ctx context.Context, org string) error {
	if err := s.canRead(ctx, org); err != nil {
		return err
	}
	return authz.Allows(ctx, authz.OrgManageOrchestrator, authz.Resource{Organization: org})
}

// envWorkspace returns the ID of an environment's workspace, "" before its
// first deployment made one.
func (s *Service) envWorkspace(ctx context.Context, org, project, env string) (string, error) {
	var wsID string
	err := s.db.QueryRow(ctx, `SELECT workspace_id FROM orchestrator_env_workspaces WHERE organization_name = ? AND project_id = ? AND env_id = ?`, org, project, env).Scan(&wsID)
	if store.IsNoRows(err) {
		return "", nil
	}
	return wsID, err
}

// allowEnv asks the model whether the caller may do action in the
// environment's workspace, and returns the workspace ("" when the
// environment has none: then there is nothing of a workspace to guard).
func (s *Service) allowEnv(ctx context.Context, org, project, env string, action authz.Action) (string, error) {
	wsID, err := s.envWorkspace(ctx, org, project, env)
	if err != nil || wsID == "" {
		return "", err
	}
	return wsID, authz.Allows(ctx, action, authz.Resource{Organization: org, WorkspaceID: wsID})
}

// allowDeployment asks the model whether the caller may do action (a
// read) on a deployment: on its environment's workspace. A deployment of a
// workspace the caller may not see is not found.
func (s *Service) allowDeployment(ctx context.Context, org string, d *Deployment, action authz.Action) error {
	wsID, err := s.envWorkspace(ctx, org, d.ProjectID, d.EnvID)
	if err != nil {
		return err
	}
	if wsID == "" {
		wsID = d.WorkspaceID
	}
	if wsID == "" {
		return nil
	}
	err = authz.Allows(ctx, action, authz.Resource{Organization: org, WorkspaceID: wsID})
	return core.NotFoundAs(err, "deployment %s not found", d.ID)
}

// runAction is what a deployment's run needs, as POST /api/v2/runs asks
// it: plan for one that only plans, apply for one that applies or
// destroys.
func runAction(mode string) authz.Action {
	return authz.CreateRunAction(mode == ModePlanOnly)
}

// allowDeploy asks the model whether the caller may make the deployment
// req asks for in the environment.
func (s *Service) allowDeploy(ctx context.Context, org string, req DeployRequest) error {
	if req.IsDryRun {
		_, err := s.allowEnv(ctx, org, req.ProjectID, req.EnvID, authz.RunRead)
		return err
	}
	action := runAction(req.Mode)
	wsID, err := s.envWorkspace(ctx, org, req.ProjectID, req.EnvID)
	if err != nil {
		return err
	}
	if wsID != "" {
		return authz.Allows(ctx, action, authz.Resource{Organization: org, WorkspaceID: wsID})
	}
	if s.Workspaces == nil {
		return nil // Deploy refuses: deployments are not available
	}
	// The first deployment creates the workspace.
	prj, err := s.Workspaces.Project(ctx, org)
	if err != nil {
		return fmt.Errorf("finding the project of the environment's workspace: %w", err)
	}
	if err := s.Workspaces.CheckCreate(ctx, org, prj); err != nil {
		return err
	}
	// What the caller may do in a workspace of the project that has no
	// grants of its own yet: the new workspace.
	return authz.Allows(ctx, action, authz.Resource{Organization: org, ProjectID: prj})
}
