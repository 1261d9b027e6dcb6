package server

import (
	"context"
	"database/sql"

	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/workspace"
)

// orgDefaults gives the project domain an organization's default
// execution mode and agent pool.
type orgDefaults struct{ orgs *organization.Service }

func (a orgDefaults) OrgDefaults(ctx context.Context, q store.Q, org string) (string, string, error) {
	o, err := a.orgs.SystemIn(ctx, q, org)
	if err != nil {
		return "", "", err
	}
	return o.Settings.DefaultExecutionMode, o.Settings.DefaultAgentPoolID, nil
}

// workspaceProjects gives the workspace domain what it needs of projects.
type workspaceProjects struct{ projects *project.Service }

func (a workspaceProjects) DefaultID(ctx context.Context, org string) (string, error) {
	return a.projects.DefaultID(ctx, org)
}

func (a workspaceProjects) ProjectInfo(ctx context.Context, id string) (*workspace.ProjectInfo, error) {
	p, err := a.projects.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	mode, pool, err := a.projects.Effective(ctx, p)
	if err != nil {
		return nil, err
	}
	return projectInfo(p, mode, pool), nil
}

func (a workspaceProjects) WorkspaceProject(ctx context.Context, q store.Q, id string) (*workspace.ProjectInfo, error) {
	p, err := a.projects.SystemIn(ctx, q, id)
	if err != nil {
		return nil, err
	}
	mode, pool, err := a.projects.EffectiveIn(ctx, q, p)
	if err != nil {
		return nil, err
	}
	return projectInfo(p, mode, pool), nil
}

func projectInfo(p *project.Project, mode, pool string) *workspace.ProjectInfo {
	info := &workspace.ProjectInfo{ID: p.ID, Organization: p.Organization, Name: p.Name, Description: p.Description, ExecutionMode: mode, AgentPoolID: pool,
		AutoDestroyActivityDuration: p.Settings.AutoDestroyActivityDuration}
	for _, b := range p.TagBindings {
		info.TagBindings = append(info.TagBindings, workspace.TagBinding{ID: b.ID, Key: b.Key, Value: b.Value})
	}
	return info
}

// OrgDefaultsSQL says OrgDefaults in SQL (project.OrgDefaultsSQL), so
// that a workspace read folds its organization's defaults into its one
// document statement.
func (orgDefaults) OrgDefaultsSQL(org string) string { return organization.SettingsSQL(org) }

func (orgDefaults) OrgDefaultsOf(v string) (string, string, error) { return organization.DefaultsOf(v) }

// WorkspaceProjectSQL says in SQL what a workspace read shows of its
// project (workspace.ProjectSQL).
func (a workspaceProjects) WorkspaceProjectSQL() ([]string, bool) {
	return a.projects.EffectiveSQL("ws.project_id")
}

func (a workspaceProjects) WorkspaceProjectOf(vals []sql.NullString) (workspace.ProjectDefaults, error) {
	mode, pool, autoDestroy, err := a.projects.EffectiveOf(vals)
	return workspace.ProjectDefaults{ExecutionMode: mode, AgentPoolID: pool, AutoDestroyActivityDuration: autoDestroy}, err
}
