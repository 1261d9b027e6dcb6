package authz

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Team is what the model needs of a team.
type Team struct {
	ID           string
	Organization string
	Owners       bool
	// Secret: the team's visibility is secret (seen only by its members,
	// owners and holders of access-secret-teams).
	Secret bool
	// MembersManageTokens: the team's members may manage its tokens
	// (its allow-member-token-management setting).
	MembersManageTokens bool
	Access              OrgAccess
}

// Teams gives the model the teams a caller acts as (the team package
// provides it).
type Teams interface {
	// UserTeams returns the teams of org the user is a member of.
	UserTeams(ctx context.Context, userID, org string) ([]Team, error)
	// Team returns one team, whoever asks (core.ErrNotFound for none).
	Team(ctx context.Context, id string) (Team, error)
}

// Resolver tells where a resource lives, whoever asks (the server wires
// the domains in). An unknown ID is core.ErrNotFound.
type Resolver interface {
	// Resolve locates a resource by its prefixed ID (ws-, run-, plan-,
	// apply-, sv-, wsout-, cv-, prj-, team-).
	Resolve(ctx context.Context, id string) (Resource, error)
	// WorkspaceByName locates a workspace by organization and name.
	WorkspaceByName(ctx context.Context, org, name string) (Resource, error)
	// SharesState reports whether workspace target lets workspace reader
	// read its state (global-remote-state or remote-state-consumers).
	SharesState(ctx context.Context, target, reader string) (bool, error)
	// OrganizationExists returns core.ErrNotFound for an unknown
	// organization.
	OrganizationExists(ctx context.Context, name string) error
	// SharesModules and SharesProviders report whether organization org
	// shares its private modules, or providers, with any of the readers
	// (organization names).
	SharesModules(ctx context.Context, org string, readers []string) (bool, error)
	SharesProviders(ctx context.Context, org string, readers []string) (bool, error)
	// ManagedBy returns the stack whose deployment workspace workspaceID
	// is ("" for none, or when that stack is gone).
	ManagedBy(ctx context.Context, workspaceID string) (string, error)
	// AllowsForceDelete reports organization org's
	// allow-force-delete-workspaces setting: whether workspace admins
	// who are not owners may delete workspaces that manage resources.
	AllowsForceDelete(ctx context.Context, org string) (bool, error)
}

// Resource locates what a request acts on. Organization is always set;
// the others when the resource is inside a project, workspace, run or team.
type Resource struct {
	Organization string
	ProjectID    string
	WorkspaceID  string
	RunID        string
	TeamID       string
	// ConfigVersionID is set for a configuration version (what a task
	// result token may download).
	ConfigVersionID string
	// AgentPoolID is the pool of a job of the job protocol ("" for the
	// jobs of the server's own runners).
	AgentPoolID string
	// UserID is the user a resource belongs to (an organization
	// membership's), for the actions a user may do to their own (rule.self).
	UserID string
}

// SiteSettings are the site administrators' settings that decisions
// follow (internal/sitesettings provides them).
type SiteSettings interface {
	// LimitUserOrganizationCreation: only site admins create
	// organizations (OrgCreate).
	LimitUserOrganizationCreation(ctx context.Context) (bool, error)
}

// Service is the authorization model and the store of team access grants.
type Service struct {
	db       *store.DB
	teams    Teams
	resolver Resolver
	settings SiteSettings
}

// Options build a Service.
type Options struct {
	DB       *store.DB
	Teams    Teams
	Resolver Resolver
	// Settings are the site's settings; nil decides as they are by
	// default (every user creates organizations).
	Settings SiteSettings
}

// NewService returns the model; DB, Teams and Resolver are required.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Teams == nil || o.Resolver == nil {
		return nil, fmt.Errorf("authz: DB, Teams and Resolver are required")
	}
	return &Service{db: o.DB, teams: o.Teams, resolver: o.Resolver, settings: o.Settings}, nil
}

// standing is a caller's position in one organization.
type standing struct {
	member   bool // may see the organization at all
	owner    bool // site admin, owners team, its token
	orgToken bool
	user     bool // a user token (site admins too)
	run      bool // a run token of this organization
	teamIDs  []string
	access   OrgAccess
}

// seesTeam reports whether the caller may see team t of the organization:
// an organization-visible team, a team the caller is in (or whose token it
// holds), or a secret team with access-secret-teams (which owners and the
// organization's token have).
func (st standing) seesTeam(t Team) bool {
	return st.member && (!t.Secret || st.access.AccessSecretTeams || slices.Contains(st.teamIDs, t.ID))
}

func (s *Service) standing(ctx context.Context, p *auth.Principal, org string) (standing, error) {
	var st standing
	if p == nil || org == "" {
		return st, nil
	}
	if p.SiteAdmin {
		return standing{member: true, owner: true, user: p.Kind == auth.KindUser, access: orgAll}, nil
	}
	if p.Organization != org && p.Kind != auth.KindUser {
		return st, nil
	}
	switch p.Kind {
	case auth.KindUser:
		if !slices.Contains(p.Orgs, org) {
			return st, nil
		}
		st.member, st.user = true, true
		teams, err := s.teams.UserTeams(ctx, p.UserID, org)
		if err != nil {
			return st, err
		}
		for _, t := range teams {
			st.teamIDs = append(st.teamIDs, t.ID)
			st.owner = st.owner || t.Owners
			st.access = st.access.union(t.Access)
		}
	case auth.KindTeam:
		t, err := s.teams.Team(ctx, p.TeamID)
		if err != nil {
			return st, nil
		}
		st.member, st.owner, st.teamIDs, st.access = true, t.Owners, []string{t.ID}, t.Access
	case auth.KindOrganization:
		// HCP Terraform's organization tokens manage the organization
		// (workspaces, teams, projects, registry) but never run
		// terraform: see the workspace limits in Workspace.
		st.member, st.orgToken, st.access = true, true, orgAll
	case auth.KindRun:
		st.run = true
	}
	if st.owner {
		st.access = orgAll
	}
	return st, nil
}

// shares reports whether org shares its private modules or providers
// (what) with an organization of p: a user's (those it is a member of, not
// disabled and not refusing user tokens), or a token's own.
func (s *Service) shares(ctx context.Context, p *auth.Principal, org string, what sharing) (bool, error) {
	if s.resolver == nil {
		return false, nil
	}
	readers := []string{}
	switch p.Kind {
	case auth.KindUser:
		for _, o := range p.Orgs {
			if !slices.Contains(p.UserTokensBlocked, o) {
				readers = append(readers, o)
			}
		}
	case auth.KindTeam, auth.KindOrganization, auth.KindRun, auth.KindTestRun:
		if p.Organization != "" && !slices.Contains(p.Disabled, p.Organization) {
			readers = append(readers, p.Organization)
		}
	}
	if what == sharedProviders {
		return s.resolver.SharesProviders(ctx, org, readers)
	}
	return s.resolver.SharesModules(ctx, org, readers)
}

// Workspace returns the caller's permissions in a workspace (the zero
// value when the caller may not see it).
func (s *Service) Workspace(ctx context.Context, p *auth.Principal, res Resource) (WorkspacePerms, error) {
	st, err := s.standing(ctx, p, res.Organization)
	if err != nil {
		return WorkspacePerms{}, err
	}
	w, err := s.workspace(ctx, p, st, res)
	if err != nil {
		return WorkspacePerms{}, err
	}
	return s.withForceDelete(ctx, st, res, w)
}

// withForceDelete fills w.ForceDelete: an admin of the workspace who is
// an owner or holds the organization's token, or any admin when the
// organization allows it (reading its setting only then). Only what
// tells or decides a force delete asks it.
func (s *Service) withForceDelete(ctx context.Context, st standing, res Resource, w WorkspacePerms) (WorkspacePerms, error) {
	if !w.Admin {
		return w, nil
	}
	if st.owner || st.orgToken {
		w.ForceDelete = true
		return w, nil
	}
	allowed, err := s.resolver.AllowsForceDelete(ctx, res.Organization)
	if err != nil {
		return WorkspacePerms{}, err
	}
	w.ForceDelete = allowed
	return w, nil
}

func (s *Service) workspace(ctx context.Context, p *auth.Principal, st standing, res Resource) (WorkspacePerms, error) {
	w, _, err := s.workspaceManaged(ctx, p, st, res)
	return w, err
}

// workspaceManaged is workspace, with the stack whose deployment the
// workspace is: in a stack's deployment workspace people hold what they
// hold elsewhere, but only to read (HCP Terraform has no such workspace
// to change): a run applied there, a variable or setting changed, a lock
// taken would go around the stack's deployment runs and their approval.
// The runs the stack starts change it with their tokens; the stack's own
// work on it is the server's, which no request's model decides.
func (s *Service) workspaceManaged(ctx context.Context, p *auth.Principal, st standing, res Resource) (WorkspacePerms, string, error) {
	w, err := s.workspaceGrants(ctx, p, st, res)
	if err != nil || st.run || w.readOnly() == w {
		return w, "", err
	}
	stack, err := s.resolver.ManagedBy(ctx, res.WorkspaceID)
	if err != nil || stack == "" {
		return w, "", err
	}
	return w.readOnly(), stack, nil
}

func (s *Service) workspaceGrants(ctx context.Context, p *auth.Principal, st standing, res Resource) (WorkspacePerms, error) {
	switch {
	case st.run:
		// A run token: its own workspace's state and locks, and the
		// state of workspaces sharing theirs with it; nothing else.
		if res.WorkspaceID == p.WorkspaceID {
			return WorkspacePerms{Read: true, Runs: RunsRead, StateVersions: StateWritable, Locking: true}, nil
		}
		ok, err := s.resolver.SharesState(ctx, res.WorkspaceID, p.WorkspaceID)
		if err != nil || !ok {
			return WorkspacePerms{}, err
		}
		return WorkspacePerms{Read: true, StateVersions: StateFull}, nil
	case !st.member:
		return WorkspacePerms{}, nil
	case st.orgToken:
		w := wsAdmin
		w.Runs, w.StateVersions, w.Locking = RunsRead, StateFull, false
		return w, nil
	case st.owner, st.access.ManageWorkspaces, st.access.ManageProjects:
		return wsAdmin, nil
	}
	var w WorkspacePerms
	if st.access.ReadWorkspaces {
		w = wsRead
	}
	// manage-policy-overrides: override policies (task stages) in every
	// workspace, and see the runs to do it.
	if st.access.ManagePolicyOverrides {
		w.PolicyOverrides = true
		w.Read = true
		w.Runs = max(w.Runs, RunsRead)
	}
	if len(st.teamIDs) == 0 {
		return w, nil
	}
	grants, err := s.grantsFor(ctx, st.teamIDs, res.WorkspaceID, res.ProjectID)
	if err != nil {
		return WorkspacePerms{}, err
	}
	for _, g := range grants {
		w = w.union(g)
	}
	return w, nil
}

// grantsFor returns the workspace permissions the teams hold on a
// workspace, directly and through its project.
func (s *Service) grantsFor(ctx context.Context, teamIDs []string, workspaceID, projectID string) ([]WorkspacePerms, error) {
	in, teams := store.In(teamIDs)
	type row struct{ access, perms string }
	scan := func(sc interface{ Scan(...any) error }) (row, error) {
		var r row
		return r, sc.Scan(&r.access, &r.perms)
	}
	direct, err := store.All(ctx, s.db, scan, `SELECT access, perms FROM team_workspaces WHERE workspace_id = ? AND team_id IN (`+in+`)`, append([]any{workspaceID}, teams...)...)
	if err != nil {
		return nil, err
	}
	var out []WorkspacePerms
	for _, r := range direct {
		var g WorkspaceGrant
		if err := json.Unmarshal([]byte(r.perms), &g); err != nil {
			return nil, fmt.Errorf("decoding team access: %w", err)
		}
		out = append(out, g.perms(r.access))
	}
	if projectID == "" {
		return out, nil
	}
	viaProject, err := store.All(ctx, s.db, scan, `SELECT access, perms FROM team_projects WHERE project_id = ? AND team_id IN (`+in+`)`, append([]any{projectID}, teams...)...)
	if err != nil {
		return nil, err
	}
	for _, r := range viaProject {
		var g ProjectGrant
		if err := json.Unmarshal([]byte(r.perms), &g); err != nil {
			return nil, fmt.Errorf("decoding team project access: %w", err)
		}
		_, w := g.perms(r.access)
		out = append(out, w)
	}
	return out, nil
}

// teamGrant is one grant of the caller's teams, decoded: on a workspace
// (project ""), or on a project (workspace ""), with what it gives on the
// project itself and on each of the project's workspaces.
type teamGrant struct {
	workspace, project string
	onProject          ProjectPerms
	onWorkspaces       WorkspacePerms
}

// teamGrants returns every grant of the caller's teams (in the
// organization st is of), each decoded as the model decides with it
// (WorkspaceGrant.perms, ProjectGrant.perms).
func (s *Service) teamGrants(ctx context.Context, st standing) ([]teamGrant, error) {
	if len(st.teamIDs) == 0 {
		return nil, nil
	}
	in, teams := store.In(st.teamIDs)
	type row struct{ id, access, perms string }
	scan := func(sc interface{ Scan(...any) error }) (row, error) {
		var x row
		return x, sc.Scan(&x.id, &x.access, &x.perms)
	}
	direct, err := store.All(ctx, s.db, scan, `SELECT workspace_id, access, perms FROM team_workspaces WHERE team_id IN (`+in+`)`, teams...)
	if err != nil {
		return nil, err
	}
	var out []teamGrant
	for _, x := range direct {
		var g WorkspaceGrant
		if err := json.Unmarshal([]byte(x.perms), &g); err != nil {
			return nil, fmt.Errorf("decoding team access: %w", err)
		}
		out = append(out, teamGrant{workspace: x.id, onWorkspaces: g.perms(x.access)})
	}
	viaProject, err := store.All(ctx, s.db, scan, `SELECT project_id, access, perms FROM team_projects WHERE team_id IN (`+in+`)`, teams...)
	if err != nil {
		return nil, err
	}
	for _, x := range viaProject {
		var g ProjectGrant
		if err := json.Unmarshal([]byte(x.perms), &g); err != nil {
			return nil, fmt.Errorf("decoding team project access: %w", err)
		}
		pp, w := g.perms(x.access)
		out = append(out, teamGrant{project: x.id, onProject: pp, onWorkspaces: w})
	}
	return out, nil
}

// adminSomewhere reports whether the caller is an admin of at least one
// workspace of the organization: everywhere with manage workspaces or
// manage projects (owners, organization tokens), else through a team's
// grant whose workspace permissions include admin (admin on a
// workspace; maintain or admin on a project).
func (s *Service) adminSomewhere(ctx context.Context, st standing) (bool, error) {
	if st.owner || st.orgToken || st.access.ManageWorkspaces || st.access.ManageProjects {
		return true, nil
	}
	grants, err := s.teamGrants(ctx, st)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(grants, func(g teamGrant) bool { return g.onWorkspaces.Admin }), nil
}

// Project returns the caller's permissions on a project.
func (s *Service) Project(ctx context.Context, p *auth.Principal, res Resource) (ProjectPerms, error) {
	st, err := s.standing(ctx, p, res.Organization)
	if err != nil {
		return ProjectPerms{}, err
	}
	return s.project(ctx, st, res)
}

// orgProjects is what the caller may do with every project of the
// organization, before any team's grant on one; all is true when no grant
// can add to it.
func orgProjects(st standing) (p ProjectPerms, all bool) {
	switch {
	case !st.member:
		return ProjectPerms{}, true
	case st.owner, st.orgToken, st.access.ManageProjects:
		return projectAll, true
	}
	p.Read = st.access.ReadProjects || st.access.ManageWorkspaces
	return p, len(st.teamIDs) == 0
}

// projectGrants returns the project permissions the caller's teams are
// granted on project id, or on every project when id is "", added up per
// project.
func (s *Service) projectGrants(ctx context.Context, st standing, id string) (map[string]ProjectPerms, error) {
	in, teams := store.In(st.teamIDs)
	where, args := `team_id IN (`+in+`)`, teams
	if id != "" {
		where, args = `project_id = ? AND `+where, append([]any{id}, teams...)
	}
	type row struct{ project, access, perms string }
	rows, err := store.All(ctx, s.db, func(sc interface{ Scan(...any) error }) (row, error) {
		var r row
		return r, sc.Scan(&r.project, &r.access, &r.perms)
	}, `SELECT project_id, access, perms FROM team_projects WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]ProjectPerms{}
	for _, r := range rows {
		var g ProjectGrant
		if err := json.Unmarshal([]byte(r.perms), &g); err != nil {
			return nil, fmt.Errorf("decoding team project access: %w", err)
		}
		pp, _ := g.perms(r.access)
		out[r.project] = out[r.project].union(pp)
	}
	return out, nil
}

func (s *Service) project(ctx context.Context, st standing, res Resource) (ProjectPerms, error) {
	out, all := orgProjects(st)
	if all {
		return out, nil
	}
	grants, err := s.projectGrants(ctx, st, res.ProjectID)
	if err != nil {
		return ProjectPerms{}, err
	}
	for _, g := range grants {
		out = out.union(g)
	}
	return out, nil
}

// someProject reports whether ok holds of the caller's permissions on at
// least one of the organization's projects (it has a default project, so
// one without any grant counts too).
func (s *Service) someProject(ctx context.Context, st standing, ok func(standing, ProjectPerms) bool) (bool, error) {
	base, all := orgProjects(st)
	if ok(st, base) {
		return true, nil
	}
	if all {
		return false, nil
	}
	grants, err := s.projectGrants(ctx, st, "")
	if err != nil {
		return false, err
	}
	for _, g := range grants {
		if ok(st, base.union(g)) {
			return true, nil
		}
	}
	return false, nil
}

// Check asks the model whether the caller in ctx may do action on res:
// nil, or a core.Forbidden or core.NotFound error.
func (s *Service) Check(ctx context.Context, action Action, res Resource) error {
	return s.Decide(ctx, auth.FromContext(ctx), action, res)
}

// Decide is the one decision: principal × action × resource.
func (s *Service) Decide(ctx context.Context, p *auth.Principal, action Action, res Resource) error {
	if p != nil && (action == AgentJobs || p.Kind == auth.KindAgent || p.Kind == auth.KindRunner) {
		return agentDecision(p, action, res)
	}
	rule, ok := rules[action]
	if !ok {
		return fmt.Errorf("authz: no rule for action %q", action)
	}
	if p == nil {
		return core.Unauthorized("this request needs an API token in the Authorization header")
	}
	if p.Kind == auth.KindTaskResult {
		return taskResultDecision(p, action, res)
	}
	if p.Kind == auth.KindTestRun {
		return s.testRunDecision(ctx, p, action, res)
	}

	if rule.scope == scopeAny {
		if rule.anyAsk != nil {
			return rule.anyAsk(s, ctx, p)
		}
		return rule.any(p)
	}
	if res.Organization == "" {
		return core.NotFound("%s not found", rule.noun)
	}
	st, err := s.standing(ctx, p, res.Organization)
	if err != nil {
		return err
	}
	if !st.member && p.Kind == auth.KindUser && slices.Contains(p.Disabled, res.Organization) {
		// A member of an organization a site admin disabled: no
		// membership counts there (auth leaves it out), and the
		// refusal says why.
		return auth.OrganizationDisabled(res.Organization)
	}
	// The refusals are made when refused: an allowed request (most)
	// formats neither.
	notFound := func() error { return core.NotFound("%s not found", rule.noun) }
	forbidden := func() error { return core.Forbidden("insufficient permissions to %s", rule.verb) }
	switch rule.scope {
	case scopeOrg:
		if rule.shared != sharedNothing && !st.member && !st.run {
			// A caller of another organization: one that org shares its
			// modules (or providers) with reads them.
			ok, err := s.shares(ctx, p, res.Organization, rule.shared)
			if err != nil || ok {
				return err
			}
		}
		if st.run {
			if rule.runToken {
				return nil
			}
			return core.Forbidden("a run token cannot %s", rule.verb)
		}
		// Their own (an invited user declining their invitation is no
		// member yet).
		if rule.self && p.Kind == auth.KindUser && res.UserID != "" && res.UserID == p.UserID {
			return nil
		}
		if !st.member {
			return notFound()
		}
		if st.orgToken && rule.noOrgToken {
			return core.Forbidden("an organization token cannot %s: use a user or team token", rule.verb)
		}
		if rule.userOnly && !st.user {
			return core.Forbidden("%s cannot %s: use a user token", p.Kind.Token(), rule.verb)
		}
		if rule.org(st) {
			return nil
		}
		if rule.orgAsk != nil {
			ok, err := rule.orgAsk(s, ctx, st)
			if err != nil || ok {
				return err
			}
		}
		return forbidden()
	case scopeProject:
		if st.run {
			return core.Forbidden("a run token cannot %s", rule.verb)
		}
		pp, err := s.project(ctx, st, res)
		if err != nil {
			return err
		}
		if st.orgToken && rule.noOrgToken {
			return core.Forbidden("an organization token cannot %s: use a user or team token", rule.verb)
		}
		if rule.project(st, pp) {
			return nil
		}
		if !pp.Read {
			return notFound()
		}
		return forbidden()
	case scopeWorkspace, scopeRun:
		wp, managedBy, err := s.workspaceManaged(ctx, p, st, res)
		if err != nil {
			return err
		}
		if action == WorkspaceForceDelete {
			if wp, err = s.withForceDelete(ctx, st, res, wp); err != nil {
				return err
			}
			if wp.Admin && !wp.ForceDelete {
				return core.Forbidden("insufficient permissions to %s: organization %s lets only its owners delete workspaces that may manage resources (its allow-force-delete-workspaces setting is off); delete it safely once it manages none", rule.verb, res.Organization)
			}
		}
		if !wp.Read {
			return notFound()
		}
		if st.run {
			if !rule.runToken {
				return core.Forbidden("a run token cannot %s", rule.verb)
			}
			if rule.scope == scopeRun && res.RunID != p.RunID {
				return core.Forbidden("a run token may only %s of its own run", rule.verb)
			}
		}
		if st.orgToken && rule.noOrgToken {
			return core.Forbidden("an organization token cannot %s: use a user or team token", rule.verb)
		}
		if rule.workspace(wp) {
			return nil
		}
		if managedBy != "" {
			return core.Forbidden("insufficient permissions to %s: the workspace is a deployment of stack %s, and only the stack's deployment runs change it", rule.verb, managedBy)
		}
		return forbidden()
	case scopeTeam:
		if res.TeamID == "" {
			return decideTeam(st, action, rule, nil)
		}
		t, err := s.teams.Team(ctx, res.TeamID)
		if core.KindOf(err) == core.KindNotFound {
			return notFound()
		}
		if err != nil {
			return err
		}
		if t.Organization != res.Organization {
			return notFound()
		}
		return decideTeam(st, action, rule, &t)
	}
	return forbidden()
}

// decideTeam is Decide for a team action on team t (nil: the
// organization's teams in general, or one being created).
func decideTeam(st standing, action Action, rule rule, t *Team) error {
	switch {
	case st.run:
		return core.Forbidden("a run token cannot %s", rule.verb)
	case !st.member, t != nil && !st.seesTeam(*t):
		return core.NotFound("%s not found", rule.noun)
	case t != nil && t.Owners && action != TeamRead && !st.owner && !st.orgToken:
		// HCP Terraform keeps the owners team's membership and settings
		// to owners (and the organization's token, which manages teams and
		// their members).
		return core.Forbidden("insufficient permissions to %s: only owners change the owners team", rule.verb)
	case rule.team != nil && t != nil:
		if rule.team(st, *t) {
			return nil
		}
	case rule.org(st):
		return nil
	}
	return core.Forbidden("insufficient permissions to %s", rule.verb)
}

// teamDecision is the decision of a team action for p on org's teams,
// made on p's standing read once, without reading a team (the caller's
// request already read it): AllowsTeam and TeamsAllowing ask it. An error
// for a caller no team decision admits, or for an action that is no team
// action.
func (s *Service) teamDecision(ctx context.Context, p *auth.Principal, org string, action Action) (func(Team) error, error) {
	rule, ok := rules[action]
	if !ok || rule.scope != scopeTeam {
		return nil, fmt.Errorf("authz: %q is no team action", action)
	}
	if p == nil {
		return nil, core.Unauthorized("this request needs an API token in the Authorization header")
	}
	if p.Kind == auth.KindTaskResult || p.Kind == auth.KindTestRun || p.Kind == auth.KindAgent || p.Kind == auth.KindRunner {
		return nil, core.Forbidden("%s cannot be used for this request", p.Kind.Token())
	}
	st, err := s.standing(ctx, p, org)
	if err != nil {
		return nil, err
	}
	return func(t Team) error { return decideTeam(st, action, rule, &t) }, nil
}

// errTestRunToken is the refusal of a test run's token (the guard's and
// the model's).
func errTestRunToken() error {
	return core.Forbidden("a test run's token can only read the private registry")
}

// testRunDecision is the decision for a module test run's token: terraform
// test reads private modules and providers (terraform init), of the test
// run's organization or of one sharing them with it; nothing else.
func (s *Service) testRunDecision(ctx context.Context, p *auth.Principal, action Action, res Resource) error {
	what := sharedModules
	switch action {
	case OrgReadModules:
	case OrgReadProviders:
		what = sharedProviders
	default:
		return errTestRunToken()
	}
	if res.Organization != "" && res.Organization == p.Organization {
		return nil
	}
	if res.Organization != "" {
		ok, err := s.shares(ctx, p, res.Organization, what)
		if err != nil || ok {
			return err
		}
	}
	return core.NotFound("%s not found", rules[action].noun)
}

// taskResultDecision is the whole reach of a task result's access token
// (the token a run task service gets): its run's plan JSON (RunRead on
// that run), its run's configuration version (RunInputs), and its own
// result's callback (an Authenticated route whose service checks the
// result). The guard keeps the token off every route not marked
// TaskToken, so RunRead cannot reach the run's other reads.
func taskResultDecision(p *auth.Principal, action Action, res Resource) error {
	switch action {
	case Authenticated:
		return nil
	case RunRead, RunReadPlanJSON:
		if res.Organization == p.Organization && res.RunID != "" && res.RunID == p.RunID {
			return nil
		}
		return core.NotFound("run not found")
	case RunInputs:
		if res.Organization == p.Organization && res.ConfigVersionID != "" && res.ConfigVersionID == p.ConfigVersionID {
			return nil
		}
		return core.NotFound("configuration version not found")
	}
	return core.Forbidden("a task result's access token cannot be used for this request")
}
