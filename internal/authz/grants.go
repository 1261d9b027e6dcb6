package authz

import (
	"github.com/terracehq/terrace/internal/core"
)

// WorkspaceGrant is a team's access to one workspace as the TFE API shows
// it (team-workspaces): for fixed levels, the level's implied permissions.
type WorkspaceGrant struct {
	Runs             string `json:"runs"`
	Variables        string `json:"variables"`
	StateVersions    string `json:"state-versions"`
	SentinelMocks    string `json:"sentinel-mocks"`
	WorkspaceLocking bool   `json:"workspace-locking"`
	RunTasks         bool   `json:"run-tasks"`
	PolicyOverrides  bool   `json:"policy-overrides"`
}

func grantOf(p WorkspacePerms) WorkspaceGrant {
	return WorkspaceGrant{
		Runs: runsNames[p.Runs], Variables: varsNames[p.Variables], StateVersions: stateNames[p.StateVersions],
		SentinelMocks: varsNames[min(p.SentinelMocks, VarsRead)], WorkspaceLocking: p.Locking, RunTasks: p.RunTasks,
		PolicyOverrides: p.PolicyOverrides,
	}
}

// perms resolves the grant of access level access.
func (g WorkspaceGrant) perms(access string) WorkspacePerms {
	if p, ok := WorkspaceLevel(access); ok {
		return p
	}
	runs, _ := parseLevel(runsNames, g.Runs)
	vars, _ := parseLevel(varsNames, g.Variables)
	state, _ := parseLevel(stateNames, g.StateVersions)
	mocks, _ := parseLevel(varsNames, g.SentinelMocks)
	return WorkspacePerms{Read: true, Runs: max(runs, RunsRead), Variables: vars, StateVersions: state, SentinelMocks: mocks,
		Locking: g.WorkspaceLocking, RunTasks: g.RunTasks, PolicyOverrides: g.PolicyOverrides}
}

// WorkspaceGrantOptions are the custom permissions of a team-workspaces
// request; nil is absent.
type WorkspaceGrantOptions struct {
	Runs             *string `json:"runs"`
	Variables        *string `json:"variables"`
	StateVersions    *string `json:"state-versions"`
	SentinelMocks    *string `json:"sentinel-mocks"`
	WorkspaceLocking *bool   `json:"workspace-locking"`
	RunTasks         *bool   `json:"run-tasks"`
	PolicyOverrides  *bool   `json:"policy-overrides"`
}

func (o WorkspaceGrantOptions) any() string {
	switch {
	case o.Runs != nil:
		return "Runs"
	case o.Variables != nil:
		return "Variables"
	case o.StateVersions != nil:
		return "State versions"
	case o.SentinelMocks != nil:
		return "Sentinel mocks"
	case o.WorkspaceLocking != nil:
		return "Workspace locking"
	case o.RunTasks != nil:
		return "Run tasks"
	case o.PolicyOverrides != nil:
		return "Policy overrides"
	}
	return ""
}

// resolve returns the grant of access with o applied over prev (the
// current grant on update, the custom defaults on add).
func (o WorkspaceGrantOptions) resolve(access string, prev WorkspaceGrant) (WorkspaceGrant, error) {
	if p, ok := WorkspaceLevel(access); ok {
		if name := o.any(); name != "" {
			return WorkspaceGrant{}, core.Invalid("%s is read-only when access level is '%s'; use the 'custom' access level to set this attribute.", name, access)
		}
		return grantOf(p), nil
	}
	if access != "custom" {
		return WorkspaceGrant{}, core.Invalid("access %q is not one of read, plan, write, admin, custom", access)
	}
	g := prev
	set := func(dst *string, v *string, names []string, what string) error {
		if v == nil {
			return nil
		}
		if _, ok := parseLevel(names, *v); !ok || (what == "runs" && *v == "none") {
			return core.Invalid("%s %q is not a valid permission", what, *v)
		}
		*dst = *v
		return nil
	}
	if err := set(&g.Runs, o.Runs, runsNames, "runs"); err != nil {
		return g, err
	}
	if err := set(&g.Variables, o.Variables, varsNames, "variables"); err != nil {
		return g, err
	}
	if err := set(&g.StateVersions, o.StateVersions, stateNames, "state-versions"); err != nil {
		return g, err
	}
	if err := set(&g.SentinelMocks, o.SentinelMocks, varsNames[:2], "sentinel-mocks"); err != nil {
		return g, err
	}
	setB := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setB(&g.WorkspaceLocking, o.WorkspaceLocking)
	setB(&g.RunTasks, o.RunTasks)
	setB(&g.PolicyOverrides, o.PolicyOverrides)
	return g, nil
}

// customDefault is a new custom grant before options apply: read runs,
// nothing else.
var customDefault = WorkspaceGrant{Runs: "read", Variables: "none", StateVersions: "none", SentinelMocks: "none"}

// ProjectGrant is a team's access to a project (team-projects), with the
// project's and its workspaces' permissions.
type ProjectGrant struct {
	Project   ProjectSide   `json:"project-access"`
	Workspace WorkspaceSide `json:"workspace-access"`
}

// ProjectSide is the project-access object.
type ProjectSide struct {
	Settings     string `json:"settings"`
	Teams        string `json:"teams"`
	VariableSets string `json:"variable-sets"`
}

// WorkspaceSide is the workspace-access object.
type WorkspaceSide struct {
	Runs            string `json:"runs"`
	SentinelMocks   string `json:"sentinel-mocks"`
	StateVersions   string `json:"state-versions"`
	Variables       string `json:"variables"`
	Create          bool   `json:"create"`
	Locking         bool   `json:"locking"`
	Move            bool   `json:"move"`
	Delete          bool   `json:"delete"`
	RunTasks        bool   `json:"run-tasks"`
	PolicyOverrides bool   `json:"policy-overrides"`
}

var projectLevels = map[string]ProjectGrant{
	"read": {ProjectSide{"read", "none", "none"}, WorkspaceSide{Runs: "read", SentinelMocks: "none", StateVersions: "read", Variables: "read"}},
	"write": {ProjectSide{"read", "none", "none"}, WorkspaceSide{Runs: "apply", SentinelMocks: "read", StateVersions: "write",
		Variables: "write", Locking: true}},
	"maintain": {ProjectSide{"read", "none", "write"}, WorkspaceSide{Runs: "apply", SentinelMocks: "read", StateVersions: "write",
		Variables: "write", Create: true, Locking: true, Move: true, Delete: true, RunTasks: true}},
	"admin": {ProjectSide{"delete", "manage", "write"}, WorkspaceSide{Runs: "apply", SentinelMocks: "read", StateVersions: "write",
		Variables: "write", Create: true, Locking: true, Move: true, Delete: true, RunTasks: true, PolicyOverrides: true}},
}

var projectCustomDefault = ProjectGrant{ProjectSide{"read", "none", "none"},
	WorkspaceSide{Runs: "read", SentinelMocks: "none", StateVersions: "none", Variables: "none"}}

// perms resolves a project grant of access level access.
func (g ProjectGrant) perms(access string) (ProjectPerms, WorkspacePerms) {
	if fixed, ok := projectLevels[access]; ok {
		g = fixed
	}
	p := ProjectPerms{Read: true}
	switch g.Project.Settings {
	case "delete":
		p.Delete, p.Update = true, true
	case "update":
		p.Update = true
	}
	switch g.Project.Teams {
	case "manage":
		p.ManageTeams, p.ReadTeams = true, true
	case "read":
		p.ReadTeams = true
	}
	p.VariableSets, _ = parseLevel(varsNames, g.Project.VariableSets)
	p.CreateWorkspaces = g.Workspace.Create
	p.WriteWorkspaces = g.Workspace.Runs == "apply" && g.Workspace.StateVersions == "write"
	w := g.Workspace
	runs, _ := parseLevel(runsNames, w.Runs)
	vars, _ := parseLevel(varsNames, w.Variables)
	state, _ := parseLevel(stateNames, w.StateVersions)
	mocks, _ := parseLevel(varsNames, w.SentinelMocks)
	ws := WorkspacePerms{Read: true, Runs: max(runs, RunsRead), Variables: vars, StateVersions: state, SentinelMocks: mocks,
		Locking: w.Locking, RunTasks: w.RunTasks, PolicyOverrides: w.PolicyOverrides, Delete: w.Delete, Move: w.Move,
		Admin: access == "maintain" || access == "admin"}
	return p, ws
}

// ProjectGrantOptions are the custom permissions of a team-projects
// request.
type ProjectGrantOptions struct {
	Project *struct {
		Settings     *string `json:"settings"`
		Teams        *string `json:"teams"`
		VariableSets *string `json:"variable-sets"`
	} `json:"project-access"`
	Workspace *struct {
		Runs            *string `json:"runs"`
		SentinelMocks   *string `json:"sentinel-mocks"`
		StateVersions   *string `json:"state-versions"`
		Variables       *string `json:"variables"`
		Create          *bool   `json:"create"`
		Locking         *bool   `json:"locking"`
		Move            *bool   `json:"move"`
		Delete          *bool   `json:"delete"`
		RunTasks        *bool   `json:"run-tasks"`
		PolicyOverrides *bool   `json:"policy-overrides"`
	} `json:"workspace-access"`
}

func validProjectAccess(a string) bool {
	_, ok := projectLevels[a]
	return ok || a == "custom"
}

func (o ProjectGrantOptions) resolve(access string, prev ProjectGrant) (ProjectGrant, error) {
	if !validProjectAccess(access) {
		return ProjectGrant{}, core.Invalid("access %q is not one of read, write, maintain, admin, custom", access)
	}
	if fixed, ok := projectLevels[access]; ok {
		return fixed, nil
	}
	g := prev
	set := func(dst *string, v *string, allowed ...string) error {
		if v == nil {
			return nil
		}
		for _, a := range allowed {
			if *v == a {
				*dst = *v
				return nil
			}
		}
		return core.Invalid("permission %q is not one of %v", *v, allowed)
	}
	setB := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	if p := o.Project; p != nil {
		if err := set(&g.Project.Settings, p.Settings, "read", "update", "delete"); err != nil {
			return g, err
		}
		if err := set(&g.Project.Teams, p.Teams, "none", "read", "manage"); err != nil {
			return g, err
		}
		if err := set(&g.Project.VariableSets, p.VariableSets, "none", "read", "write"); err != nil {
			return g, err
		}
	}
	if w := o.Workspace; w != nil {
		if err := set(&g.Workspace.Runs, w.Runs, "read", "plan", "apply"); err != nil {
			return g, err
		}
		if err := set(&g.Workspace.SentinelMocks, w.SentinelMocks, "none", "read"); err != nil {
			return g, err
		}
		if err := set(&g.Workspace.StateVersions, w.StateVersions, stateNames...); err != nil {
			return g, err
		}
		if err := set(&g.Workspace.Variables, w.Variables, varsNames...); err != nil {
			return g, err
		}
		setB(&g.Workspace.Create, w.Create)
		setB(&g.Workspace.Locking, w.Locking)
		setB(&g.Workspace.Move, w.Move)
		setB(&g.Workspace.Delete, w.Delete)
		setB(&g.Workspace.RunTasks, w.RunTasks)
		setB(&g.Workspace.PolicyOverrides, w.PolicyOverrides)
	}
	return g, nil
}
