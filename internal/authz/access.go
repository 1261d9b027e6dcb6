package authz

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ID prefixes of grants (HCP Terraform's).
const (
	prefixTeamWorkspace = "tws"
	prefixTeamProject   = "tprj"
)

// TeamWorkspace is a team's access to a workspace.
type TeamWorkspace struct {
	ID          string
	TeamID      string
	WorkspaceID string
	Access      string
	Grant       WorkspaceGrant
	CreatedAt   time.Time
}

// TeamProject is a team's access to a project.
type TeamProject struct {
	ID        string
	TeamID    string
	ProjectID string
	Access    string
	Grant     ProjectGrant
	CreatedAt time.Time
}

// resolve locates a resource, grants included.
func (s *Service) resolve(ctx context.Context, id string) (Resource, error) {
	switch {
	case core.HasPrefix(id, prefixTeamWorkspace):
		g, err := s.getTeamWorkspace(ctx, id)
		if err != nil {
			return Resource{}, err
		}
		return s.resolver.Resolve(ctx, g.WorkspaceID)
	case core.HasPrefix(id, prefixTeamProject):
		g, err := s.getTeamProject(ctx, id)
		if err != nil {
			return Resource{}, err
		}
		return s.resolver.Resolve(ctx, g.ProjectID)
	}
	return s.resolver.Resolve(ctx, id)
}

const twCols = `id, team_id, workspace_id, access, perms, created_at`

func scanTeamWorkspace(sc interface{ Scan(...any) error }) (*TeamWorkspace, error) {
	var g TeamWorkspace
	var perms string
	var created int64
	if err := sc.Scan(&g.ID, &g.TeamID, &g.WorkspaceID, &g.Access, &perms, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(perms), &g.Grant); err != nil {
		return nil, fmt.Errorf("decoding team access %s: %w", g.ID, err)
	}
	g.CreatedAt = core.FromMicros(created)
	return &g, nil
}

func (s *Service) getTeamWorkspace(ctx context.Context, id string) (*TeamWorkspace, error) {
	return teamWorkspaceIn(ctx, s.db, id, "")
}

// teamWorkspaceIn reads a grant through q, lock its row-locking suffix
// ("" or store.ForUpdate).
func teamWorkspaceIn(ctx context.Context, q store.Q, id, lock string) (*TeamWorkspace, error) {
	g, err := scanTeamWorkspace(q.QueryRow(ctx, `SELECT `+twCols+` FROM team_workspaces WHERE id = ?`+lock, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("team access %q not found", id)
	}
	return g, err
}

// The methods below are called after the guard allowed the request (the
// route table names the action each needs).

// TeamWorkspace returns a grant.
func (s *Service) TeamWorkspace(ctx context.Context, id string) (*TeamWorkspace, error) {
	return s.getTeamWorkspace(ctx, id)
}

// ListTeamWorkspaces returns a workspace's grants, oldest first.
func (s *Service) ListTeamWorkspaces(ctx context.Context, workspaceID string) ([]*TeamWorkspace, error) {
	return store.All(ctx, s.db, scanTeamWorkspace, `SELECT `+twCols+` FROM team_workspaces WHERE workspace_id = ? ORDER BY created_at, id`, workspaceID)
}

// sameOrg checks that a team and a resource are of one organization.
func (s *Service) sameOrg(ctx context.Context, teamID, resourceID string) error {
	res, err := s.resolver.Resolve(ctx, resourceID)
	if err != nil {
		return err
	}
	t, err := s.teams.Team(ctx, teamID)
	if err != nil || t.Organization != res.Organization {
		return core.NotFound("team %q not found", teamID)
	}
	return nil
}

// AddTeamWorkspace grants a team access to a workspace.
func (s *Service) AddTeamWorkspace(ctx context.Context, teamID, workspaceID, access string, o WorkspaceGrantOptions) (*TeamWorkspace, error) {
	if err := s.sameOrg(ctx, teamID, workspaceID); err != nil {
		return nil, err
	}
	grant, err := o.resolve(access, customDefault)
	if err != nil {
		return nil, err
	}
	g := &TeamWorkspace{ID: core.NewID(prefixTeamWorkspace), TeamID: teamID, WorkspaceID: workspaceID, Access: access, Grant: grant, CreatedAt: core.Now()}
	perms, _ := json.Marshal(grant)
	_, err = s.db.Exec(ctx, `INSERT INTO team_workspaces (id, team_id, workspace_id, access, perms, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		g.ID, teamID, workspaceID, access, string(perms), core.Micros(g.CreatedAt))
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Invalid("team %s already has access to workspace %s", teamID, workspaceID)
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

// UpdateTeamWorkspace changes a grant's level or custom permissions. The
// permissions it does not name are kept as the grant has them: it reads
// the grant locked, in the transaction that writes it back. Before
// (2026-11-30) it read it outside, and a permission taken away by an
// update beside it came back with the next one's write.
func (s *Service) UpdateTeamWorkspace(ctx context.Context, id string, access *string, o WorkspaceGrantOptions) (*TeamWorkspace, error) {
	var g *TeamWorkspace
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if g, err = teamWorkspaceIn(ctx, tx, id, store.ForUpdate(tx)); err != nil {
			return err
		}
		if access != nil {
			g.Access = *access
		}
		if g.Grant, err = o.resolve(g.Access, g.Grant); err != nil {
			return err
		}
		perms, _ := json.Marshal(g.Grant)
		_, err = tx.Exec(ctx, `UPDATE team_workspaces SET access = ?, perms = ? WHERE id = ?`, g.Access, string(perms), id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// RemoveTeamWorkspace revokes a grant.
func (s *Service) RemoveTeamWorkspace(ctx context.Context, id string) error {
	res, err := s.db.Exec(ctx, `DELETE FROM team_workspaces WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.NotFound("team access %q not found", id)
	}
	return nil
}

const tpCols = `id, team_id, project_id, access, perms, created_at`

func scanTeamProject(sc interface{ Scan(...any) error }) (*TeamProject, error) {
	var g TeamProject
	var perms string
	var created int64
	if err := sc.Scan(&g.ID, &g.TeamID, &g.ProjectID, &g.Access, &perms, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(perms), &g.Grant); err != nil {
		return nil, fmt.Errorf("decoding team project access %s: %w", g.ID, err)
	}
	g.CreatedAt = core.FromMicros(created)
	return &g, nil
}

func (s *Service) getTeamProject(ctx context.Context, id string) (*TeamProject, error) {
	return teamProjectIn(ctx, s.db, id, "")
}

// teamProjectIn reads a project grant through q, lock its row-locking
// suffix ("" or store.ForUpdate).
func teamProjectIn(ctx context.Context, q store.Q, id, lock string) (*TeamProject, error) {
	g, err := scanTeamProject(q.QueryRow(ctx, `SELECT `+tpCols+` FROM team_projects WHERE id = ?`+lock, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("team project access %q not found", id)
	}
	return g, err
}

// TeamProject returns a grant.
func (s *Service) TeamProject(ctx context.Context, id string) (*TeamProject, error) {
	return s.getTeamProject(ctx, id)
}

// ListTeamProjects returns a project's grants, oldest first.
func (s *Service) ListTeamProjects(ctx context.Context, projectID string) ([]*TeamProject, error) {
	return store.All(ctx, s.db, scanTeamProject, `SELECT `+tpCols+` FROM team_projects WHERE project_id = ? ORDER BY created_at, id`, projectID)
}

// AddTeamProject grants a team access to a project.
func (s *Service) AddTeamProject(ctx context.Context, teamID, projectID, access string, o ProjectGrantOptions) (*TeamProject, error) {
	if err := s.sameOrg(ctx, teamID, projectID); err != nil {
		return nil, err
	}
	grant, err := o.resolve(access, projectCustomDefault)
	if err != nil {
		return nil, err
	}
	g := &TeamProject{ID: core.NewID(prefixTeamProject), TeamID: teamID, ProjectID: projectID, Access: access, Grant: grant, CreatedAt: core.Now()}
	perms, _ := json.Marshal(grant)
	_, err = s.db.Exec(ctx, `INSERT INTO team_projects (id, team_id, project_id, access, perms, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		g.ID, teamID, projectID, access, string(perms), core.Micros(g.CreatedAt))
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Invalid("team %s already has access to project %s", teamID, projectID)
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

// UpdateTeamProject changes a project grant, read locked in the
// transaction that writes it back (as UpdateTeamWorkspace).
func (s *Service) UpdateTeamProject(ctx context.Context, id string, access *string, o ProjectGrantOptions) (*TeamProject, error) {
	var g *TeamProject
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if g, err = teamProjectIn(ctx, tx, id, store.ForUpdate(tx)); err != nil {
			return err
		}
		if access != nil {
			if *access == "custom" && g.Access != "custom" {
				// Custom starts from the level it replaces.
				if fixed, ok := projectLevels[g.Access]; ok {
					g.Grant = fixed
				}
			}
			g.Access = *access
		}
		if g.Grant, err = o.resolve(g.Access, g.Grant); err != nil {
			return err
		}
		perms, _ := json.Marshal(g.Grant)
		_, err = tx.Exec(ctx, `UPDATE team_projects SET access = ?, perms = ? WHERE id = ?`, g.Access, string(perms), id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// RemoveTeamProject revokes a project grant.
func (s *Service) RemoveTeamProject(ctx context.Context, id string) error {
	res, err := s.db.Exec(ctx, `DELETE FROM team_projects WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.NotFound("team project access %q not found", id)
	}
	return nil
}
