// Package agent keeps agent pools (with the workspaces and projects they
// serve), agent tokens and the agents registered with them. A workspace
// in the "agent" execution mode runs only on its pool's agents: `terrace
// agent` processes speaking the job protocol (internal/jobapi).
// docs/design/agents.md describes the whole.
package agent

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// PrefixPool is the ID prefix of agent pools.
const PrefixPool = "apool"

// Pool is an agent pool.
type Pool struct {
	ID                 string
	Organization       string
	Name               string
	OrganizationScoped bool
	CreatedAt          time.Time
	// Scope: the workspaces and projects a pool that is not organization
	// scoped serves, and the workspaces it never serves.
	AllowedWorkspaces, AllowedProjects, ExcludedWorkspaces []string
}

// Service manages agent pools, agent tokens and agents.
type Service struct {
	db *store.DB
	// Auth stores agent tokens; Lookup checks workspaces and projects
	// (both wired by the composition root).
	Auth   *auth.Service
	Lookup Lookup
	// HeartbeatTimeout is how long an agent may stay silent before it
	// reads as unknown (the job lease). Defaults to 30s.
	HeartbeatTimeout time.Duration
	// OnDelete runs inside the transaction that deletes a pool, after the
	// pool's row is locked: each domain that can point at a pool
	// (workspaces, projects, stacks, run tasks) refuses, with a
	// core.Conflict saying what still uses it, a pool still in use.
	OnDelete []func(ctx context.Context, q store.Q, pool *Pool) error
}

// NewService returns an agent pool service.
func NewService(db *store.DB) *Service { return &Service{db: db} }

var nameRE = core.NewPattern(`^[A-Za-z0-9 ._-]+$`, 1, 90)

const cols = `id, organization_name, name, organization_scoped, created_at`

func scan(sc interface{ Scan(...any) error }) (*Pool, error) {
	var p Pool
	var created int64
	if err := sc.Scan(&p.ID, &p.Organization, &p.Name, &p.OrganizationScoped, &created); err != nil {
		return nil, err
	}
	p.CreatedAt = core.FromMicros(created)
	return &p, nil
}

// Get returns a pool the caller may see.
func (s *Service) Get(ctx context.Context, id string) (*Pool, error) {
	if !core.HasPrefix(id, PrefixPool) {
		return nil, core.NotFound("agent pool %q not found", id)
	}
	p, err := scan(s.db.QueryRow(ctx, `SELECT `+cols+` FROM agent_pools WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("agent pool %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if !auth.FromContext(ctx).CanAccessOrganization(p.Organization) {
		return nil, core.NotFound("agent pool %q not found", id)
	}
	return p, s.loadScopes(ctx, p)
}

func (s *Service) loadScopes(ctx context.Context, p *Pool) error {
	sc, err := s.scopes(ctx, s.db, p.ID)
	if err != nil {
		return err
	}
	p.AllowedWorkspaces, p.AllowedProjects, p.ExcludedWorkspaces = sc[scopeAllowedWorkspace], sc[scopeAllowedProject], sc[scopeExcludedWorkspace]
	return nil
}

// List returns an organization's pools, optionally filtered by a name substring.
func (s *Service) List(ctx context.Context, org string) ([]*Pool, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	ps, err := store.All(ctx, s.db, scan, `SELECT `+cols+` FROM agent_pools WHERE organization_name = ? ORDER BY name`, org)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if err := s.loadScopes(ctx, p); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// Scope is a change of a pool's scope: nil lists are left as they are.
type Scope struct {
	AllowedWorkspaces, AllowedProjects, ExcludedWorkspaces *[]string
}

// checkScope makes sure every workspace and project of a scope change is
// of the pool's organization (not found otherwise). It reads through other
// domains, so it runs before the transaction that saves the scope.
func (s *Service) checkScope(ctx context.Context, org string, sc Scope) error {
	for _, c := range []struct {
		project bool
		ids     *[]string
	}{{false, sc.AllowedWorkspaces}, {true, sc.AllowedProjects}, {false, sc.ExcludedWorkspaces}} {
		if c.ids == nil || len(*c.ids) == 0 {
			continue
		}
		if s.Lookup == nil {
			return core.Invalid("workspace and project scopes are not available")
		}
		for _, id := range *c.ids {
			var got string
			var err error
			if c.project {
				got, err = s.Lookup.ProjectOrganization(ctx, id)
			} else {
				got, err = s.Lookup.WorkspaceOrganization(ctx, id)
			}
			if err != nil || got != org {
				return core.NotFound("%s %q not found in organization %q", map[bool]string{true: "project", false: "workspace"}[c.project], id, org)
			}
		}
	}
	return nil
}

// saveScope writes a scope change checked by checkScope.
func (s *Service) saveScope(ctx context.Context, q store.Q, p *Pool, sc Scope) error {
	for _, c := range []struct {
		kind string
		ids  *[]string
		dst  *[]string
	}{{scopeAllowedWorkspace, sc.AllowedWorkspaces, &p.AllowedWorkspaces}, {scopeAllowedProject, sc.AllowedProjects, &p.AllowedProjects}, {scopeExcludedWorkspace, sc.ExcludedWorkspaces, &p.ExcludedWorkspaces}} {
		if c.ids == nil {
			continue
		}
		if err := s.setScope(ctx, q, p, c.kind, *c.ids); err != nil {
			return err
		}
		*c.dst = *c.ids
	}
	return nil
}

func requireOwner(ctx context.Context, org string) error {
	if authz.Allows(ctx, authz.OrgManageAgents, authz.Resource{Organization: org}) != nil {
		return core.Forbidden("you may not manage agent pools of organization %q", org)
	}
	return nil
}

// Create adds a pool.
func (s *Service) Create(ctx context.Context, org, name string, scoped *bool, sc Scope) (*Pool, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	if err := requireOwner(ctx, org); err != nil {
		return nil, err
	}
	if !nameRE.MatchString(name) {
		return nil, core.Invalid("name %q is invalid: use 1 to 90 letters, digits, spaces, '.', '-' and '_'", name)
	}
	p := &Pool{ID: core.NewID(PrefixPool), Organization: org, Name: name, OrganizationScoped: scoped == nil || *scoped, CreatedAt: core.Now()}
	if err := s.checkScope(ctx, org, sc); err != nil {
		return nil, err
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agent_pools (id, organization_name, name, organization_scoped, created_at) VALUES (?, ?, ?, ?, ?)`,
			p.ID, org, p.Name, p.OrganizationScoped, core.Micros(p.CreatedAt)); err != nil {
			return err
		}
		return s.saveScope(ctx, tx, p, sc)
	})
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Invalid("name %q has already been taken", name)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Update renames a pool or changes its scope.
func (s *Service) Update(ctx context.Context, id string, name *string, scoped *bool, sc Scope) (*Pool, error) {
	p, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := requireOwner(ctx, p.Organization); err != nil {
		return nil, err
	}
	if name != nil && !nameRE.MatchString(*name) {
		return nil, core.Invalid("name %q is invalid: use 1 to 90 letters, digits, spaces, '.', '-' and '_'", *name)
	}
	if err := s.checkScope(ctx, p.Organization, sc); err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		// Locked, in the transaction that writes it back: before
		// (2026-11-30) the pool read before it was written back whole,
		// and a change of its organization-scoped beside a rename was
		// undone. The pool's row is the only one locked here.
		cur, err := scan(tx.QueryRow(ctx, `SELECT `+cols+` FROM agent_pools WHERE id = ?`+store.ForUpdate(tx), id))
		if store.IsNoRows(err) {
			return core.NotFound("agent pool %q not found", id)
		}
		if err != nil {
			return err
		}
		sc0, err := s.scopes(ctx, tx, id)
		if err != nil {
			return err
		}
		p = cur
		p.AllowedWorkspaces, p.AllowedProjects, p.ExcludedWorkspaces = sc0[scopeAllowedWorkspace], sc0[scopeAllowedProject], sc0[scopeExcludedWorkspace]
		if name != nil {
			p.Name = *name
		}
		if scoped != nil {
			p.OrganizationScoped = *scoped
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_pools SET name = ?, organization_scoped = ? WHERE id = ?`, p.Name, p.OrganizationScoped, p.ID); err != nil {
			return err
		}
		return s.saveScope(ctx, tx, p, sc)
	})
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Invalid("name %q has already been taken", p.Name)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Delete removes a pool.
func (s *Service) Delete(ctx context.Context, id string) error {
	p, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := requireOwner(ctx, p.Organization); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		// The pool's row first: a change that assigns the pool and locks
		// it too is seen by the checks, or waits and finds it gone.
		var locked string
		if err := tx.QueryRow(ctx, `SELECT id FROM agent_pools WHERE id = ?`+store.ForUpdate(tx), p.ID).Scan(&locked); err != nil {
			if store.IsNoRows(err) {
				return core.NotFound("agent pool %q not found", p.ID)
			}
			return err
		}
		// As in HCP Terraform, a pool still in use is not deleted: the
		// runs of a workspace (or stack) that names it would wait for an
		// agent for good, and a run task's requests would go out from
		// the server instead, to a service it may not reach.
		for _, fn := range s.OnDelete {
			if err := fn(ctx, tx, p); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM agent_pools WHERE id = ?`, p.ID); err != nil {
			return err
		}
		if s.Auth != nil {
			// Its agent tokens go with it.
			return s.Auth.DeleteTokens(ctx, tx, auth.KindAgent, p.ID)
		}
		return nil
	})
}

// KeepPool keeps pool id of organization org from being deleted until q's
// transaction ends (a shared lock on its row, which Delete takes first):
// the domains that assign a pool (workspaces, projects, stacks, run tasks,
// the organization's default) call it in the transaction that writes the
// assignment. core.Invalid when org has no such pool, or has it no more.
func (s *Service) KeepPool(ctx context.Context, q store.Q, org, id string) error {
	var got string
	err := q.QueryRow(ctx, `SELECT organization_name FROM agent_pools WHERE id = ?`+store.ForShare(q), id).Scan(&got)
	if store.IsNoRows(err) || err == nil && got != org {
		return core.Invalid("agent pool %q not found in organization %q", id, org)
	}
	return err
}

// PoolOrganization returns the organization of a pool the caller may see;
// run tasks check their agent pool with it before they verify their
// service through it (an assignment itself asks KeepPool).
func (s *Service) PoolOrganization(ctx context.Context, id string) (string, error) {
	p, err := s.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}
