package agent

import (
	"context"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// PrefixAgent is the ID prefix of agents.
const PrefixAgent = "agent"

// Agent statuses, as HCP Terraform reports them. The server records idle
// and busy as an agent claims and heartbeats; the agent reports exited
// (it stopped) and errored (a job failed because of the agent, or a fatal
// error before it exits); one idle or busy agent silent for longer than
// the heartbeat timeout reads as unknown.
const (
	StatusIdle    = "idle"
	StatusBusy    = "busy"
	StatusExited  = "exited"
	StatusErrored = "errored"
	StatusUnknown = "unknown"
)

// Agent is a registered `terrace agent` process.
type Agent struct {
	ID, PoolID, Name, IP, Status string
	LastPingAt, CreatedAt        time.Time
}

// Lookup is what the pool service needs of workspaces and projects (the
// composition root provides it).
type Lookup interface {
	// WorkspaceOrganization and ProjectOrganization name the
	// organization of a workspace or project (not found: an error).
	WorkspaceOrganization(ctx context.Context, id string) (string, error)
	ProjectOrganization(ctx context.Context, id string) (string, error)
	// WorkspacesOfPool lists the workspaces that run on the pool.
	WorkspacesOfPool(ctx context.Context, org, poolID string) ([]string, error)
	// WorkspaceID and ProjectID find a workspace or project by name.
	WorkspaceID(ctx context.Context, org, name string) (string, error)
	ProjectID(ctx context.Context, org, name string) (string, error)
}

const agentCols = `id, pool_id, name, ip_address, status, last_ping_at, created_at`

func (s *Service) scanAgent(sc interface{ Scan(...any) error }) (*Agent, error) {
	var a Agent
	var ping, created int64
	if err := sc.Scan(&a.ID, &a.PoolID, &a.Name, &a.IP, &a.Status, &ping, &created); err != nil {
		return nil, err
	}
	a.LastPingAt, a.CreatedAt = core.FromMicros(ping), core.FromMicros(created)
	if (a.Status == StatusIdle || a.Status == StatusBusy) && core.Now().Sub(a.LastPingAt) > s.silentAfter() {
		a.Status = StatusUnknown
	}
	return &a, nil
}

func (s *Service) silentAfter() time.Duration {
	if s.HeartbeatTimeout > 0 {
		return s.HeartbeatTimeout
	}
	return 30 * time.Second
}

// Register records a new agent of a pool and returns its ID (the job
// protocol's register call; the caller is the pool's agent token).
func (s *Service) Register(ctx context.Context, poolID, name, address string) (string, error) {
	if name == "" {
		name = "agent"
	}
	if !nameRE.MatchString(name) {
		return "", core.Invalid("agent name %q is invalid: use 1 to 90 letters, digits, spaces, '.', '-' and '_'", name)
	}
	id := core.NewID(PrefixAgent)
	now := core.Micros(core.Now())
	_, err := s.db.Exec(ctx, `INSERT INTO agents (id, pool_id, name, ip_address, status, last_ping_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		id, poolID, name, address, StatusIdle, now, now)
	if err != nil {
		return "", err
	}
	return id, nil
}

// AgentPool returns the pool of an agent.
func (s *Service) AgentPool(ctx context.Context, agentID string) (string, error) {
	var pool string
	err := s.db.QueryRow(ctx, `SELECT pool_id FROM agents WHERE id = ?`, agentID).Scan(&pool)
	if store.IsNoRows(err) {
		return "", core.NotFound("agent %s not found: register first", agentID)
	}
	return pool, err
}

// SetStatus records an agent's status and that it is alive. An errored
// agent (one that could not run a job because of itself) stays errored
// while it waits for jobs (idle): it reads busy again when it takes the
// next job, and idle after that job.
func (s *Service) SetStatus(ctx context.Context, agentID, status string) error {
	q := `UPDATE agents SET status = ?, last_ping_at = ? WHERE id = ?`
	switch status {
	case StatusIdle:
		q = `UPDATE agents SET status = CASE WHEN status = '` + StatusErrored + `' THEN status ELSE ? END, last_ping_at = ? WHERE id = ?`
	case StatusBusy, StatusExited, StatusErrored:
	default:
		return core.Invalid("status %q is not one of idle, busy, exited, errored", status)
	}
	_, err := s.db.Exec(ctx, q, status, core.Micros(core.Now()), agentID)
	return err
}

// ListAgents returns the agents of a pool the caller may see, newest
// first; exited agents are left out after a day, as in HCP Terraform.
func (s *Service) ListAgents(ctx context.Context, poolID string) ([]*Agent, error) {
	if _, err := s.Get(ctx, poolID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, s.scanAgent, `SELECT `+agentCols+` FROM agents WHERE pool_id = ? AND (status <> ? OR last_ping_at > ?) ORDER BY created_at DESC, id`,
		poolID, StatusExited, core.Micros(core.Now().Add(-24*time.Hour)))
}

// GetAgent returns an agent the caller may see.
func (s *Service) GetAgent(ctx context.Context, id string) (*Agent, error) {
	a, err := s.scanAgent(s.db.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("agent %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.Get(ctx, a.PoolID); err != nil {
		return nil, core.NotFound("agent %q not found", id)
	}
	return a, nil
}

// agentCount counts a pool's agents as HCP Terraform's agent-count does:
// those idle, busy or unknown (an idle or busy one gone silent); exited
// and errored agents are left out.
func (s *Service) agentCount(ctx context.Context, poolID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM agents WHERE pool_id = ? AND status IN (?, ?)`, poolID, StatusIdle, StatusBusy).Scan(&n)
	return n, err
}

// Live reports whether an agent of the pool is running: idle or busy, and
// heard from within the heartbeat timeout (request forwarding fails at
// once without one rather than wait for nobody).
func (s *Service) Live(ctx context.Context, poolID string) (bool, error) {
	timeout := s.HeartbeatTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM agents WHERE pool_id = ? AND status IN (?, ?) AND last_ping_at > ?`,
		poolID, StatusIdle, StatusBusy, core.Micros(core.Now().Add(-timeout))).Scan(&n)
	return n > 0, err
}

// PoolOrganizationSystem names the organization of a pool without a
// caller (auth resolving an agent token).
func (s *Service) PoolOrganizationSystem(ctx context.Context, poolID string) (string, error) {
	var org string
	err := s.db.QueryRow(ctx, `SELECT organization_name FROM agent_pools WHERE id = ?`, poolID).Scan(&org)
	if store.IsNoRows(err) {
		return "", core.NotFound("agent pool %q not found", poolID)
	}
	return org, err
}

// PoolName names a pool without a caller ("" when it does not exist),
// reading through q (inside a transaction, its Tx).
func (s *Service) PoolName(ctx context.Context, q store.Q, poolID string) string {
	var name string
	if err := q.QueryRow(ctx, `SELECT name FROM agent_pools WHERE id = ?`, poolID).Scan(&name); err != nil {
		return ""
	}
	return name
}

// Serves reports whether a pool runs the jobs of a workspace (in a
// project): an organization-scoped pool serves every workspace, another
// only its allowed workspaces and projects; excluded workspaces never.
// It reads through q (inside a transaction, its Tx).
func (s *Service) Serves(ctx context.Context, q store.Q, poolID, workspaceID, projectID string) (bool, error) {
	var scoped bool
	if err := q.QueryRow(ctx, `SELECT organization_scoped FROM agent_pools WHERE id = ?`, poolID).Scan(&scoped); err != nil {
		if store.IsNoRows(err) {
			return false, nil
		}
		return false, err
	}
	sc, err := s.scopes(ctx, q, poolID)
	if err != nil {
		return false, err
	}
	for _, id := range sc[scopeExcludedWorkspace] {
		if id == workspaceID {
			return false, nil
		}
	}
	if scoped {
		return true, nil
	}
	for _, id := range sc[scopeAllowedWorkspace] {
		if id == workspaceID {
			return true, nil
		}
	}
	for _, id := range sc[scopeAllowedProject] {
		if id == projectID {
			return true, nil
		}
	}
	return false, nil
}

// Scope kinds (agent_pool_scopes.kind).
const (
	scopeAllowedWorkspace  = "allowed-workspace"
	scopeAllowedProject    = "allowed-project"
	scopeExcludedWorkspace = "excluded-workspace"
)

func (s *Service) scopes(ctx context.Context, q store.Q, poolID string) (map[string][]string, error) {
	rows, err := q.Query(ctx, `SELECT kind, target_id FROM agent_pool_scopes WHERE pool_id = ? ORDER BY kind, target_id`, poolID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var kind, id string
		if err := rows.Scan(&kind, &id); err != nil {
			return nil, err
		}
		out[kind] = append(out[kind], id)
	}
	return out, rows.Err()
}

// setScope replaces the targets of one kind of a pool's scope (checked by
// checkScope before the transaction).
func (s *Service) setScope(ctx context.Context, q store.Q, p *Pool, kind string, ids []string) error {
	if _, err := q.Exec(ctx, `DELETE FROM agent_pool_scopes WHERE pool_id = ? AND kind = ?`, p.ID, kind); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, err := q.Exec(ctx, `INSERT INTO agent_pool_scopes (pool_id, kind, target_id) VALUES (?, ?, ?)`, p.ID, kind, id); err != nil {
			return err
		}
	}
	return nil
}

// Tokens: agent tokens are auth tokens of kind agent whose subject is the
// pool.

// CreateToken makes an agent token for a pool; the secret is returned once.
func (s *Service) CreateToken(ctx context.Context, poolID, description, createdBy string) (*auth.Token, string, error) {
	p, err := s.Get(ctx, poolID)
	if err != nil {
		return nil, "", err
	}
	if err := requireOwner(ctx, p.Organization); err != nil {
		return nil, "", err
	}
	if description == "" {
		return nil, "", core.Invalid("description is required")
	}
	if s.Auth == nil {
		return nil, "", core.Invalid("agent tokens are not available")
	}
	return s.Auth.CreateToken(ctx, s.db, auth.NewToken{Kind: auth.KindAgent, Subject: p.ID, Description: description, CreatedBy: createdBy})
}

// ListTokens returns a pool's agent tokens.
func (s *Service) ListTokens(ctx context.Context, poolID string) ([]*auth.Token, error) {
	p, err := s.Get(ctx, poolID)
	if err != nil {
		return nil, err
	}
	if err := requireOwner(ctx, p.Organization); err != nil {
		return nil, err
	}
	return s.Auth.ListTokens(ctx, auth.KindAgent, p.ID)
}

// CheckToken checks that the caller may see and manage an agent token.
func (s *Service) CheckToken(ctx context.Context, t *auth.Token) error {
	p, err := s.Get(ctx, t.Subject)
	if err != nil {
		return core.NotFound("authentication token %q not found", t.ID)
	}
	return requireOwner(ctx, p.Organization)
}

// DeleteToken deletes an agent token.
func (s *Service) DeleteToken(ctx context.Context, t *auth.Token) error {
	if err := s.CheckToken(ctx, t); err != nil {
		return err
	}
	return s.Auth.DeleteToken(ctx, s.db, t.ID)
}

// allowsByName reports whether pool p may run the workspace or the
// project so named (the allowed_workspaces / allowed_projects list
// filters): organization-scoped pools, and those allowing it.
func (s *Service) allowsByName(ctx context.Context, p *Pool, wsName, projName string) (bool, error) {
	if p.OrganizationScoped {
		return true, nil
	}
	if s.Lookup == nil {
		return false, nil
	}
	if wsName != "" {
		id, err := s.Lookup.WorkspaceID(ctx, p.Organization, wsName)
		if err != nil {
			return false, nil
		}
		if slices.Contains(p.AllowedWorkspaces, id) {
			return true, nil
		}
	}
	if projName != "" {
		id, err := s.Lookup.ProjectID(ctx, p.Organization, projName)
		if err != nil {
			return false, nil
		}
		if slices.Contains(p.AllowedProjects, id) {
			return true, nil
		}
	}
	return false, nil
}
