// Package authz is Terrace's one authorization model: HCP Terraform's
// permissions (organization access of teams, team access to workspaces and
// projects, token kinds) computed in one place. Every decision — the route
// guard in front of the API, the services, and the permissions objects
// that responses carry — asks Decide or Workspace here, so what the
// terraform CLI is told (can-queue-run, can-queue-apply, …) is what the
// server enforces.
//
// A decision is allow, forbidden (403: the caller may see the resource but
// not do this) or not found (404: the caller may not even see it; always
// the answer across organizations, so that existence never leaks).
//
// The package also keeps the grants themselves: team-workspaces and
// team-projects, with the TFE API shapes.
package authz

// Level orders the values of one permission (none < read < plan < …).
type Level int

// Runs levels.
const (
	RunsNone Level = iota
	RunsRead
	RunsPlan
	RunsApply
)

// Variables and sentinel mocks levels.
const (
	VarsNone Level = iota
	VarsRead
	VarsWrite
)

// State versions levels.
const (
	StateNone Level = iota
	StateOutputs
	StateFull
	StateWritable
)

var runsNames = []string{"none", "read", "plan", "apply"}
var varsNames = []string{"none", "read", "write"}
var stateNames = []string{"none", "read-outputs", "read", "write"}

func parseLevel(names []string, v string) (Level, bool) {
	for i, n := range names {
		if n == v {
			return Level(i), true
		}
	}
	return 0, false
}

// WorkspacePerms is what a caller may do in one workspace. The zero value
// is no access at all (the workspace is not even visible).
type WorkspacePerms struct {
	Read          bool  `json:"read"`
	Runs          Level `json:"runs"`
	Variables     Level `json:"variables"`
	StateVersions Level `json:"state-versions"`
	SentinelMocks Level `json:"sentinel-mocks"`
	Locking       bool  `json:"workspace-locking"`
	RunTasks      bool  `json:"run-tasks"`
	// PolicyOverrides may override soft-mandatory policies.
	PolicyOverrides bool `json:"policy-overrides"`
	// Admin changes settings, team access, and deletes the workspace.
	Admin bool `json:"admin"`
	// Delete and Move: project grants may give these without Admin.
	Delete bool `json:"delete"`
	Move   bool `json:"move"`
	// ForceDelete deletes the workspace while it manages resources: an
	// Admin who is an owner (or holds the organization's token), or any
	// Admin when the organization's allow-force-delete-workspaces setting
	// is on, as HCP Terraform decides it. Service.Workspace and the
	// WorkspaceForceDelete decision fill it; grants never hold it.
	ForceDelete bool `json:"force-delete"`
}

// union returns the permissions of holding both a and b (HCP Terraform
// adds up the grants of every team a user is in).
func (a WorkspacePerms) union(b WorkspacePerms) WorkspacePerms {
	return WorkspacePerms{
		Read:            a.Read || b.Read,
		Runs:            max(a.Runs, b.Runs),
		Variables:       max(a.Variables, b.Variables),
		StateVersions:   max(a.StateVersions, b.StateVersions),
		SentinelMocks:   max(a.SentinelMocks, b.SentinelMocks),
		Locking:         a.Locking || b.Locking,
		RunTasks:        a.RunTasks || b.RunTasks,
		PolicyOverrides: a.PolicyOverrides || b.PolicyOverrides,
		Admin:           a.Admin || b.Admin,
		Delete:          a.Delete || b.Delete,
		Move:            a.Move || b.Move,
		ForceDelete:     a.ForceDelete || b.ForceDelete,
	}
}

// readOnly is what of w only reads.
func (w WorkspacePerms) readOnly() WorkspacePerms {
	return WorkspacePerms{Read: w.Read, Runs: min(w.Runs, RunsRead), Variables: min(w.Variables, VarsRead),
		StateVersions: min(w.StateVersions, StateFull), SentinelMocks: min(w.SentinelMocks, VarsRead)}
}

// Fixed workspace access levels (team-workspaces "access").
var (
	wsRead  = WorkspacePerms{Read: true, Runs: RunsRead, Variables: VarsRead, StateVersions: StateFull}
	wsPlan  = WorkspacePerms{Read: true, Runs: RunsPlan, Variables: VarsRead, StateVersions: StateFull}
	wsWrite = WorkspacePerms{Read: true, Runs: RunsApply, Variables: VarsWrite, StateVersions: StateWritable,
		SentinelMocks: VarsRead, Locking: true}
	wsAdmin = WorkspacePerms{Read: true, Runs: RunsApply, Variables: VarsWrite, StateVersions: StateWritable,
		SentinelMocks: VarsRead, Locking: true, RunTasks: true, PolicyOverrides: true, Admin: true, Delete: true, Move: true}
)

// WorkspaceLevel returns the permissions of a fixed workspace access level.
func WorkspaceLevel(access string) (WorkspacePerms, bool) {
	switch access {
	case "read":
		return wsRead, true
	case "plan":
		return wsPlan, true
	case "write":
		return wsWrite, true
	case "admin":
		return wsAdmin, true
	}
	return WorkspacePerms{}, false
}

// ProjectPerms is what a caller may do with a project itself.
type ProjectPerms struct {
	Read bool `json:"read"`
	// Settings: read, update or delete the project.
	Update bool `json:"update"`
	Delete bool `json:"delete"`
	// Teams: read or manage the project's team access.
	ReadTeams   bool `json:"read-teams"`
	ManageTeams bool `json:"manage-teams"`
	// VariableSets: read or write the project's variable sets.
	VariableSets Level `json:"variable-sets"`
	// CreateWorkspaces in the project.
	CreateWorkspaces bool `json:"create-workspaces"`
	// WriteWorkspaces: write (apply) access to the project's workspaces
	// (approving stack deployment runs).
	WriteWorkspaces bool `json:"write-workspaces"`
}

func (a ProjectPerms) union(b ProjectPerms) ProjectPerms {
	return ProjectPerms{
		Read: a.Read || b.Read, Update: a.Update || b.Update, Delete: a.Delete || b.Delete,
		ReadTeams: a.ReadTeams || b.ReadTeams, ManageTeams: a.ManageTeams || b.ManageTeams,
		VariableSets: max(a.VariableSets, b.VariableSets), CreateWorkspaces: a.CreateWorkspaces || b.CreateWorkspaces,
		WriteWorkspaces: a.WriteWorkspaces || b.WriteWorkspaces,
	}
}

var projectAll = ProjectPerms{Read: true, Update: true, Delete: true, ReadTeams: true, ManageTeams: true,
	VariableSets: VarsWrite, CreateWorkspaces: true, WriteWorkspaces: true}

// OrgAccess is a team's organization access (the organization-access
// flags of go-tfe's Team), as the model reads them.
type OrgAccess struct {
	ManagePolicies        bool
	ManagePolicyOverrides bool
	ManageWorkspaces      bool
	ManageVCSSettings     bool
	ManageProviders       bool
	ManageModules         bool
	ManageRunTasks        bool
	ManageProjects        bool
	ReadWorkspaces        bool
	ReadProjects          bool
	ManageMembership      bool
	ManageTeams           bool
	ManageOrgAccess       bool
	AccessSecretTeams     bool
	ManageAgentPools      bool
}

func (a OrgAccess) union(b OrgAccess) OrgAccess {
	return OrgAccess{
		ManagePolicies: a.ManagePolicies || b.ManagePolicies, ManagePolicyOverrides: a.ManagePolicyOverrides || b.ManagePolicyOverrides,
		ManageWorkspaces: a.ManageWorkspaces || b.ManageWorkspaces, ManageVCSSettings: a.ManageVCSSettings || b.ManageVCSSettings,
		ManageProviders: a.ManageProviders || b.ManageProviders, ManageModules: a.ManageModules || b.ManageModules,
		ManageRunTasks: a.ManageRunTasks || b.ManageRunTasks, ManageProjects: a.ManageProjects || b.ManageProjects,
		ReadWorkspaces: a.ReadWorkspaces || b.ReadWorkspaces, ReadProjects: a.ReadProjects || b.ReadProjects,
		ManageMembership: a.ManageMembership || b.ManageMembership, ManageTeams: a.ManageTeams || b.ManageTeams,
		ManageOrgAccess: a.ManageOrgAccess || b.ManageOrgAccess, AccessSecretTeams: a.AccessSecretTeams || b.AccessSecretTeams,
		ManageAgentPools: a.ManageAgentPools || b.ManageAgentPools,
	}
}

var orgAll = OrgAccess{ManagePolicies: true, ManagePolicyOverrides: true, ManageWorkspaces: true, ManageVCSSettings: true,
	ManageProviders: true, ManageModules: true, ManageRunTasks: true, ManageProjects: true, ReadWorkspaces: true,
	ReadProjects: true, ManageMembership: true, ManageTeams: true, ManageOrgAccess: true, AccessSecretTeams: true,
	ManageAgentPools: true}
