package authz

import (
	"context"
	"slices"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
)

// Action is something a caller asks to do.
type Action string

// Actions. Each has exactly one rule below.
const (
	// Anyone with a valid token (the caller's own account and tokens,
	// lists filtered by the service).
	Authenticated Action = "authenticated"
	// A user token (account endpoints).
	UserOnly Action = "user-only"
	// Site administration.
	SiteAdmin Action = "site-admin"
	// AnyToken is any token an API route takes, run tokens included (not
	// an agent's or a task result's): what the guard asks of a route whose
	// service decides every caller itself (Route.ServiceDecides).
	AnyToken Action = "any-token"
	// OrgCreate creates an organization: a user token (users create
	// organizations and own them), a site admin's only when the site's
	// limit-user-organization-creation setting is on.
	OrgCreate Action = "organization:create"

	OrgRead         Action = "organization:read"
	OrgEntitlements Action = "organization:read-entitlements"
	// OrgManage changes the organization's settings (its name, its
	// token TTL policies, its audit configuration, stacks among them) and
	// deletes it: owners (site admins, the owners team's members and its
	// token), never the organization's token.
	OrgManage Action = "organization:manage"
	// OrgManageTokens reads, generates and revokes the organization's
	// own tokens (organization and audit-trails): owners with a user
	// token.
	OrgManageTokens Action = "organization:manage-tokens"
	// OrgReadAuditTrail reads an organization's audit trail: with the
	// organization's own organization or audit-trails token, as HCP
	// Terraform documents it; user tokens (site admins', who read every
	// event through the admin route, and owners', who read it in the UI)
	// and team tokens are refused. The trail is the token's own
	// organization's, so the rule looks at the token alone.
	OrgReadAuditTrail Action = "organization:read-audit-trail"
	// OrgRemoveMember removes a user from the organization (their
	// organization membership): manage-membership, as HCP Terraform
	// documents it ("invite users to the organization, remove users from
	// the organization"), or the user themselves (Resource.UserID). The
	// organization service also asks TeamMembers of every team the user
	// is in, since HCP Terraform asks visibility into all of them and only
	// owners change the owners team.
	OrgRemoveMember  Action = "organization:remove-member"
	OrgManageMembers Action = "organization:manage-membership"
	OrgManageTeams   Action = "organization:manage-teams"
	OrgManageModules Action = "organization:manage-modules"
	OrgManageAgents  Action = "organization:manage-agent-pools"
	OrgManageVCS     Action = "organization:manage-vcs-settings"
	OrgManageVarsets Action = "organization:manage-variable-sets"
	// OrgCreateWorkspace: creating workspaces somewhere in the
	// organization, through manage-workspaces or a project grant that
	// creates them (ProjectCreateWorkspace decides the project itself).
	OrgCreateWorkspace Action = "organization:create-workspace"
	OrgCreateProject   Action = "organization:create-project"
	// OrgManageRunTasks creates, changes and deletes the organization's
	// run tasks (the manage-run-tasks organization access).
	OrgManageRunTasks Action = "organization:manage-run-tasks"
	// OrgManagePolicies creates, changes and deletes the organization's
	// policies, policy sets and their parameters and versions (the
	// manage-policies organization access).
	OrgManagePolicies Action = "organization:manage-policies"
	// OrgManageOrchestrator creates, changes and deletes the
	// resource-graph orchestrator's configuration objects (projects,
	// environment types, environments, resource types, providers, modules,
	// module rules): the platform team's, so owners and the organization's
	// token only. Deploying is decided on the environment's workspace.
	OrgManageOrchestrator Action = "organization:manage-orchestrator"
	// OrgManageNoCode enables, changes and disables no-code modules
	// (manage-modules), with a user or team token: HCP Terraform takes no
	// organization token there.
	OrgManageNoCode Action = "organization:manage-no-code-modules"
	// OrgDeployNoCode is whether the caller may provision no-code
	// workspaces somewhere in the organization: ProjectProvisionNoCode in
	// at least one of its projects (for the organization's permissions).
	OrgDeployNoCode Action = "organization:deploy-no-code-modules"
	// OrgReadSSHKeys lists and reads the organization's SSH keys (their
	// names; the key itself is write-only): as HCP Terraform documents it,
	// manage VCS settings, or admin access to at least one workspace
	// (which assigns keys to workspaces), with a user or team token: its
	// list and read "cannot be accessed with organization tokens".
	OrgReadSSHKeys Action = "organization:read-ssh-keys"
	// OrgReadVCS lists and reads the organization's VCS providers (OAuth
	// clients) and their OAuth tokens, never their secrets: manage VCS
	// settings (the organization's token too, which creates them), or
	// admin access to at least one workspace (which connects workspaces to
	// repositories through a token).
	OrgReadVCS Action = "organization:read-vcs-providers"
	// OrgReadModules lists and downloads the organization's private
	// registry modules through the module registry protocol (terraform
	// init): members, organization tokens, and run and test run tokens,
	// since terraform init inside a run or a module's test run fetches
	// private modules; not agent or task result tokens. The members and tokens (run tokens too) of an
	// organization it shares its modules with as well (global module
	// sharing, module consumers: Resolver.SharesModules).
	OrgReadModules Action = "organization:read-modules"
	// OrgReadProviders lists and downloads the organization's private
	// providers through the provider registry protocol: as OrgReadModules,
	// and the callers of every other organization when the organization
	// shares its providers globally (Resolver.SharesProviders).
	OrgReadProviders Action = "organization:read-providers"
	// OrgManageTags deletes the organization's tags (from every workspace
	// carrying them): manage workspaces, as in HCP Terraform. The tag
	// service still asks WorkspaceUpdate of each workspace it changes.
	OrgManageTags Action = "organization:manage-tags"
	// OrgManageReservedTagKeys creates, changes and deletes the
	// organization's reserved tag keys: HCP Terraform asks the admin
	// permission preset (owners here) or the organization's token.
	// Members read them (OrgRead): they are offered to whoever tags.
	OrgManageReservedTagKeys Action = "organization:manage-reserved-tag-keys"

	// The team actions decide on the team too: a secret team is seen only
	// by its members, owners and holders of access-secret-teams (others
	// are told it is not found), and only owners (and the organization's
	// token) change the owners team or its members.
	TeamRead Action = "team:read"
	// TeamManage changes a team's name, visibility, SSO team ID and token
	// management setting, and deletes it (manage-teams). A secret team
	// also needs access-secret-teams: HCP Terraform's manage teams "on its
	// own" does not reach secret teams, not even one the caller is in.
	TeamManage Action = "team:manage"
	// TeamMakeSecret creates a secret team (a new team is secret unless
	// it is given visibility "organization") or makes a team secret:
	// manage-teams with access-secret-teams, as HCP Terraform documents
	// it ("if a user has permission to include secret teams and manage
	// teams, that user can create secret teams"). Without a TeamID it asks
	// for a team about to be created.
	TeamMakeSecret Action = "team:make-secret"
	// TeamMembers changes a team's members, and invites people into it
	// (manage-membership).
	TeamMembers Action = "team:manage-members"
	// TeamManageTokens reads, generates and revokes a team's tokens:
	// owners and the organization's token, or, with a user token, a
	// member of the team when its members may manage its tokens
	// (allow-member-token-management).
	TeamManageTokens Action = "team:manage-tokens"
	// TeamManageAccess changes a team's organization access
	// (manage-organization-access; a secret team's also needs
	// access-secret-teams). Without a TeamID it asks for a team about to be
	// created with organization access.
	TeamManageAccess Action = "team:manage-organization-access"

	ProjectRead   Action = "project:read"
	ProjectUpdate Action = "project:update"
	ProjectDelete Action = "project:delete"
	// ProjectCreateWorkspace creates a workspace in the project: manage
	// workspaces, a grant with workspace create (maintain, admin, custom),
	// or write access to the project's workspaces (seed 000: a team with
	// project write provisions no-code workspaces into its project).
	ProjectCreateWorkspace Action = "project:create-workspace"
	ProjectManageTeams     Action = "project:manage-teams"
	// ProjectProvisionNoCode provisions a no-code workspace into the
	// project: ProjectCreateWorkspace, with a user or team token (HCP
	// Terraform takes no organization token there).
	ProjectProvisionNoCode Action = "project:provision-no-code"

	// Stacks belong to a project and follow its permissions, as in HCP
	// Terraform. StackRead sees a stack and everything under it
	// (configurations, deployments, runs, steps, states, diagnostics).
	StackRead Action = "stack:read"
	// StackManage creates, changes and deletes stacks and uploads their
	// configurations: manage workspaces, or a project grant that creates
	// workspaces (maintain, admin, custom with create).
	StackManage Action = "stack:manage"
	// StackApprove approves (advances) and cancels deployment runs, which
	// apply: write access to the project's workspaces or manage
	// workspaces. Organization tokens never run terraform, so they cannot.
	StackApprove Action = "stack:approve"

	WorkspaceRead   Action = "workspace:read"
	WorkspaceUpdate Action = "workspace:update"
	WorkspaceDelete Action = "workspace:delete"
	// WorkspaceForceDelete deletes a workspace without counting the
	// resources it manages (the API's DELETE, can-force-delete): the
	// workspace's admins who are owners or hold the organization's token,
	// and its other admins when the organization's
	// allow-force-delete-workspaces setting is on (WorkspacePerms.ForceDelete).
	WorkspaceForceDelete Action = "workspace:force-delete"
	WorkspaceLock        Action = "workspace:lock"
	WorkspaceForceUnlock Action = "workspace:force-unlock"
	// WorkspaceMove moves the workspace out of its project (the move
	// permission: workspace admin, a project grant's workspace-access
	// move). Moving it into another project also needs
	// ProjectCreateWorkspace there, as in HCP Terraform.
	WorkspaceMove        Action = "workspace:move"
	WorkspaceManageTeams Action = "workspace:manage-teams"
	// WorkspaceManageRunTasks attaches, changes and detaches the
	// workspace's run tasks (run-tasks in workspace access).
	WorkspaceManageRunTasks Action = "workspace:manage-run-tasks"
	// RunOverrideTasks lets a run go on past mandatory run tasks that did
	// not pass (policy-overrides in workspace access).
	RunOverrideTasks Action = "run:override-tasks"
	RunRead          Action = "run:read"
	RunPlan          Action = "run:plan"
	RunApply         Action = "run:apply"
	// RunInputs reads a run's inputs (its configuration).
	RunInputs Action = "run:read-inputs"
	// RunReadPlanJSON reads a run's unredacted plan JSON, which holds
	// sensitive values: admin access to the workspace, as HCP Terraform
	// documents it, and the access token of a run task of this very run
	// (plan_json_api_url).
	RunReadPlanJSON  Action = "run:read-plan-json"
	VariableRead     Action = "variable:read"
	VariableWrite    Action = "variable:write"
	StateRead        Action = "state:read"
	StateReadOutputs Action = "state:read-outputs"
	StateWrite       Action = "state:write"
)

// CreateRunAction is what creating a run asks: RunPlan for a run that can
// only plan (plan-only, or on a speculative configuration version, which
// terraform plan creates), RunApply for one that may apply. The run
// service asks it of every run it creates for a caller (POST /runs among
// them: Route.ServiceDecides).
func CreateRunAction(onlyPlans bool) Action {
	if onlyPlans {
		return RunPlan
	}
	return RunApply
}

type scope int

// sharing is what of its registry an organization may share with others.
type sharing int

const (
	sharedNothing sharing = iota
	sharedModules
	sharedProviders
)

const (
	scopeAny scope = iota
	scopeOrg
	scopeTeam
	scopeProject
	scopeWorkspace
	scopeRun
)

type rule struct {
	scope scope
	noun  string // what a 404 names
	verb  string // what a 403 says the caller cannot do
	// runToken: run tokens may (subject to the workspace permissions of a
	// run token); noOrgToken: organization tokens may not; userOnly: only
	// user tokens may (not team or organization tokens); self: a user
	// (with a user token, invited or member) may do it to what is their
	// own (the Resource's UserID is theirs), whatever org says.
	runToken, noOrgToken, userOnly, self bool
	// shared: the members and tokens of an organization that res's
	// organization shares its private modules (or providers) with may too.
	shared  sharing
	any     func(*auth.Principal) error
	org     func(standing) bool
	project func(standing, ProjectPerms) bool
	// team, when set, decides a team action on a named team instead of
	// org (org still decides without one).
	team      func(standing, Team) bool
	workspace func(WorkspacePerms) bool
	// orgAsk, when set, is asked when org refuses: an organization
	// permission that grants held inside the organization give.
	orgAsk func(s *Service, ctx context.Context, st standing) (bool, error)
	// anyAsk, when set, decides an action of scope "any" that the site's
	// settings take part in, instead of any (s is the zero Service when
	// no model is in the context: no settings).
	anyAsk func(s *Service, ctx context.Context, p *auth.Principal) error
}

func member(st standing) bool { return st.member }

// reachesTeam: the team's visibility keeps no team management from the
// caller: t is visible, or the caller has access-secret-teams (owners and
// the organization's token do). Being in a secret team shows it (TeamRead)
// but manages nothing of it.
func reachesTeam(st standing, t Team) bool { return !t.Secret || st.access.AccessSecretTeams }

// managesSecretTeams is TeamMakeSecret's rule.
func managesSecretTeams(st standing) bool {
	return st.access.ManageTeams && st.access.AccessSecretTeams
}

// createsWorkspaces is ProjectCreateWorkspace's rule: manage-workspaces,
// or a project grant whose workspace access says create (maintain, admin,
// custom with create). A write grant does not create, as HCP Terraform's
// levels say and as the grant's workspace-access.create tells clients.
func createsWorkspaces(st standing, p ProjectPerms) bool {
	return st.access.ManageWorkspaces || p.CreateWorkspaces
}

// createsSomewhere: the caller may create workspaces in at least one of the
// organization's projects (ProjectCreateWorkspace there).
func (s *Service) createsSomewhere(ctx context.Context, st standing) (bool, error) {
	return s.someProject(ctx, st, createsWorkspaces)
}

var rules = map[Action]rule{
	Authenticated: {scope: scopeAny, any: func(p *auth.Principal) error {
		if p.Kind == auth.KindRun {
			return core.Forbidden("a run token cannot be used for this request")
		}
		return nil
	}},
	AnyToken: {scope: scopeAny, any: func(*auth.Principal) error { return nil }},
	UserOnly: {scope: scopeAny, any: func(p *auth.Principal) error {
		if p.Kind != auth.KindUser {
			return core.Forbidden("%s cannot be used for this request: use a user token", p.Kind.Token())
		}
		return nil
	}},
	OrgCreate: {scope: scopeAny, anyAsk: func(s *Service, ctx context.Context, p *auth.Principal) error {
		if p.Kind != auth.KindUser {
			return core.Forbidden("%s cannot create organizations: use a user token", p.Kind.Token())
		}
		if p.SiteAdmin || s.settings == nil {
			return nil
		}
		limited, err := s.settings.LimitUserOrganizationCreation(ctx)
		if err != nil {
			return err
		}
		if limited {
			return core.Forbidden("only site administrators may create organizations on this site (its limit-user-organization-creation setting)")
		}
		return nil
	}},
	OrgReadAuditTrail: {scope: scopeAny, any: func(p *auth.Principal) error {
		if p.Kind != auth.KindOrganization && p.Kind != auth.KindAuditTrails {
			return core.Forbidden("the audit trail is read with an organization token or an audit-trails token, not %s", p.Kind.Token())
		}
		return nil
	}},
	SiteAdmin: {scope: scopeAny, any: func(p *auth.Principal) error {
		if !p.SiteAdmin {
			// Hidden from everyone else, as in Terraform Enterprise.
			return core.NotFound("not found")
		}
		return nil
	}},

	OrgRead:         {scope: scopeOrg, noun: "organization", verb: "read this organization", org: member},
	OrgEntitlements: {scope: scopeOrg, noun: "organization", verb: "read entitlements", org: member, runToken: true},
	OrgManage: {scope: scopeOrg, noun: "organization", verb: "manage this organization",
		org: func(st standing) bool { return st.owner }},
	OrgManageTokens: {scope: scopeOrg, noun: "organization", verb: "manage the organization's tokens", userOnly: true,
		org: func(st standing) bool { return st.owner }},
	OrgRemoveMember: {scope: scopeOrg, noun: "organization", verb: "remove members", self: true,
		org: func(st standing) bool { return st.access.ManageMembership }},
	OrgManageMembers: {scope: scopeOrg, noun: "organization", verb: "manage organization membership",
		org: func(st standing) bool { return st.access.ManageMembership }},
	OrgManageTeams: {scope: scopeOrg, noun: "organization", verb: "manage teams",
		org: func(st standing) bool { return st.access.ManageTeams }},
	OrgManageModules: {scope: scopeOrg, noun: "organization", verb: "manage the private registry",
		org: func(st standing) bool { return st.access.ManageModules }},
	OrgReadModules:   {scope: scopeOrg, noun: "organization", verb: "read the private registry", runToken: true, org: member, shared: sharedModules},
	OrgReadProviders: {scope: scopeOrg, noun: "organization", verb: "read the private registry", runToken: true, org: member, shared: sharedProviders},
	OrgManageAgents: {scope: scopeOrg, noun: "organization", verb: "manage agent pools",
		org: func(st standing) bool { return st.access.ManageAgentPools }},
	OrgManageVCS: {scope: scopeOrg, noun: "organization", verb: "manage VCS settings",
		org: func(st standing) bool { return st.access.ManageVCSSettings }},
	OrgReadSSHKeys: {scope: scopeOrg, noun: "organization", verb: "read SSH keys", noOrgToken: true,
		org: func(st standing) bool { return st.access.ManageVCSSettings }, orgAsk: (*Service).adminSomewhere},
	OrgReadVCS: {scope: scopeOrg, noun: "organization", verb: "read VCS providers",
		org: func(st standing) bool { return st.access.ManageVCSSettings }, orgAsk: (*Service).adminSomewhere},
	OrgManageVarsets: {scope: scopeOrg, noun: "organization", verb: "manage variable sets",
		org: func(st standing) bool { return st.access.ManageWorkspaces }},
	OrgManageTags: {scope: scopeOrg, noun: "organization", verb: "manage the organization's tags",
		org: func(st standing) bool { return st.access.ManageWorkspaces }},
	OrgManageReservedTagKeys: {scope: scopeOrg, noun: "organization", verb: "manage reserved tag keys",
		org: func(st standing) bool { return st.owner || st.orgToken }},
	OrgCreateWorkspace: {scope: scopeOrg, noun: "organization", verb: "create workspaces",
		org: func(st standing) bool { return st.access.ManageWorkspaces }, orgAsk: (*Service).createsSomewhere},
	OrgCreateProject: {scope: scopeOrg, noun: "organization", verb: "create projects",
		org: func(st standing) bool { return st.access.ManageProjects }},
	OrgManageRunTasks: {scope: scopeOrg, noun: "organization", verb: "manage run tasks",
		org: func(st standing) bool { return st.access.ManageRunTasks }},
	OrgManagePolicies: {scope: scopeOrg, noun: "organization", verb: "manage policies",
		org: func(st standing) bool { return st.access.ManagePolicies }},
	OrgManageOrchestrator: {scope: scopeOrg, noun: "organization", verb: "change orchestrator configuration",
		org: func(st standing) bool { return st.owner || st.orgToken }},
	OrgManageNoCode: {scope: scopeOrg, noun: "organization", verb: "manage no-code modules", noOrgToken: true,
		org: func(st standing) bool { return st.access.ManageModules }},
	OrgDeployNoCode: {scope: scopeOrg, noun: "organization", verb: "provision no-code workspaces", noOrgToken: true,
		org: func(standing) bool { return false }, orgAsk: (*Service).createsSomewhere},

	TeamRead: {scope: scopeTeam, noun: "team", verb: "read this team", org: member},
	TeamManage: {scope: scopeTeam, noun: "team", verb: "manage teams",
		org:  func(st standing) bool { return st.access.ManageTeams },
		team: func(st standing, t Team) bool { return st.access.ManageTeams && reachesTeam(st, t) }},
	TeamMakeSecret: {scope: scopeTeam, noun: "team", verb: "make teams secret (manage teams with access to secret teams)",
		org: managesSecretTeams, team: func(st standing, _ Team) bool { return managesSecretTeams(st) }},
	TeamMembers: {scope: scopeTeam, noun: "team", verb: "manage team membership",
		org: func(st standing) bool { return st.access.ManageMembership }},
	TeamManageTokens: {scope: scopeTeam, noun: "team", verb: "manage this team's tokens",
		org: func(st standing) bool { return st.owner || st.orgToken },
		team: func(st standing, t Team) bool {
			return st.owner || st.orgToken || st.user && t.MembersManageTokens && slices.Contains(st.teamIDs, t.ID)
		}},
	TeamManageAccess: {scope: scopeTeam, noun: "team", verb: "change teams' organization access",
		org:  func(st standing) bool { return st.access.ManageOrgAccess },
		team: func(st standing, t Team) bool { return st.access.ManageOrgAccess && reachesTeam(st, t) }},

	ProjectRead: {scope: scopeProject, noun: "project", verb: "read this project",
		project: func(_ standing, p ProjectPerms) bool { return p.Read }},
	ProjectUpdate: {scope: scopeProject, noun: "project", verb: "update this project",
		project: func(_ standing, p ProjectPerms) bool { return p.Update }},
	ProjectDelete: {scope: scopeProject, noun: "project", verb: "delete this project",
		project: func(_ standing, p ProjectPerms) bool { return p.Delete }},
	ProjectManageTeams: {scope: scopeProject, noun: "project", verb: "manage this project's team access",
		project: func(_ standing, p ProjectPerms) bool { return p.ManageTeams }},
	ProjectCreateWorkspace: {scope: scopeProject, noun: "project", verb: "create workspaces in this project",
		project: createsWorkspaces},
	ProjectProvisionNoCode: {scope: scopeProject, noun: "project", verb: "provision no-code workspaces in this project",
		noOrgToken: true, project: createsWorkspaces},

	StackRead: {scope: scopeProject, noun: "stack", verb: "read stacks",
		project: func(_ standing, p ProjectPerms) bool { return p.Read }},
	StackManage: {scope: scopeProject, noun: "stack", verb: "manage stacks in this project",
		project: func(st standing, p ProjectPerms) bool { return st.access.ManageWorkspaces || p.CreateWorkspaces }},
	StackApprove: {scope: scopeProject, noun: "stack", verb: "approve or cancel deployment runs", noOrgToken: true,
		project: func(st standing, p ProjectPerms) bool { return st.access.ManageWorkspaces || p.WriteWorkspaces }},

	WorkspaceRead: {scope: scopeWorkspace, noun: "workspace", verb: "read this workspace", runToken: true,
		workspace: func(w WorkspacePerms) bool { return w.Read }},
	WorkspaceUpdate: {scope: scopeWorkspace, noun: "workspace", verb: "change this workspace's settings",
		workspace: func(w WorkspacePerms) bool { return w.Admin }},
	WorkspaceDelete: {scope: scopeWorkspace, noun: "workspace", verb: "delete this workspace",
		workspace: func(w WorkspacePerms) bool { return w.Admin || w.Delete }},
	WorkspaceForceDelete: {scope: scopeWorkspace, noun: "workspace", verb: "force-delete this workspace",
		workspace: func(w WorkspacePerms) bool { return w.ForceDelete }},
	WorkspaceLock: {scope: scopeWorkspace, noun: "workspace", verb: "lock or unlock this workspace", runToken: true,
		noOrgToken: true, workspace: func(w WorkspacePerms) bool { return w.Locking }},
	WorkspaceForceUnlock: {scope: scopeWorkspace, noun: "workspace", verb: "force-unlock this workspace",
		workspace: func(w WorkspacePerms) bool { return w.Admin }},
	WorkspaceMove: {scope: scopeWorkspace, noun: "workspace", verb: "move this workspace to another project",
		workspace: func(w WorkspacePerms) bool { return w.Move }},
	WorkspaceManageTeams: {scope: scopeWorkspace, noun: "workspace", verb: "manage this workspace's team access",
		workspace: func(w WorkspacePerms) bool { return w.Admin }},
	WorkspaceManageRunTasks: {scope: scopeWorkspace, noun: "workspace", verb: "manage this workspace's run tasks",
		workspace: func(w WorkspacePerms) bool { return w.RunTasks }},
	RunOverrideTasks: {scope: scopeWorkspace, noun: "workspace", verb: "override run tasks", noOrgToken: true,
		workspace: func(w WorkspacePerms) bool { return w.PolicyOverrides }},
	RunRead: {scope: scopeRun, noun: "run", verb: "read runs", runToken: true,
		workspace: func(w WorkspacePerms) bool { return w.Runs >= RunsRead }},
	RunInputs: {scope: scopeRun, noun: "configuration version", verb: "read run inputs", runToken: true,
		workspace: func(w WorkspacePerms) bool { return w.Runs >= RunsRead }},
	RunReadPlanJSON: {scope: scopeRun, noun: "run", verb: "read the unredacted plan JSON",
		workspace: func(w WorkspacePerms) bool { return w.Admin }},
	RunPlan: {scope: scopeWorkspace, noun: "workspace", verb: "queue plans", noOrgToken: true,
		workspace: func(w WorkspacePerms) bool { return w.Runs >= RunsPlan }},
	RunApply: {scope: scopeWorkspace, noun: "workspace", verb: "apply runs", noOrgToken: true,
		workspace: func(w WorkspacePerms) bool { return w.Runs >= RunsApply }},
	VariableRead: {scope: scopeWorkspace, noun: "workspace", verb: "read variables",
		workspace: func(w WorkspacePerms) bool { return w.Variables >= VarsRead }},
	VariableWrite: {scope: scopeWorkspace, noun: "workspace", verb: "change variables",
		workspace: func(w WorkspacePerms) bool { return w.Variables >= VarsWrite }},
	StateRead: {scope: scopeWorkspace, noun: "workspace", verb: "read state versions", runToken: true,
		workspace: func(w WorkspacePerms) bool { return w.StateVersions >= StateFull }},
	StateReadOutputs: {scope: scopeWorkspace, noun: "workspace", verb: "read state outputs", runToken: true,
		workspace: func(w WorkspacePerms) bool { return w.StateVersions >= StateOutputs }},
	StateWrite: {scope: scopeWorkspace, noun: "workspace", verb: "create state versions", runToken: true, noOrgToken: true,
		workspace: func(w WorkspacePerms) bool { return w.StateVersions >= StateWritable }},
}
