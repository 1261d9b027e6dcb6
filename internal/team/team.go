// Package team keeps teams, their members, organization memberships and
// team tokens. Every organization has an "owners" team; its members own the
// organization. A user belongs to an organization through a membership,
// which inviting an email address, creating the organization or joining
// one of its teams creates.
package team

import (
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// OwnersTeam is the name of the team whose members own an organization.
const OwnersTeam = "owners"

// prefixMembership is the ID prefix of organization memberships (HCP
// Terraform's "ou-").
const prefixMembership = "ou"

// Team is a group of users in one organization.
type Team struct {
	ID           string
	Organization string
	Name         string
	Settings     Settings
	CreatedAt    time.Time
	// UserIDs are the members, filled in by the service.
	UserIDs []string
}

// Settings are a team's options, stored as one JSON document.
type Settings struct {
	Visibility                 string `json:"visibility"`
	SSOTeamID                  string `json:"sso-team-id,omitempty"`
	AllowMemberTokenManagement *bool  `json:"allow-member-token-management,omitempty"`
	Access                     Access `json:"organization-access"`
}

// copy returns s with nothing shared with it: the value behind its
// pointer copied too (TestSettingsCopyIsDeep names the fields it must
// copy).
func (s Settings) copy() Settings {
	if s.AllowMemberTokenManagement != nil {
		v := *s.AllowMemberTokenManagement
		s.AllowMemberTokenManagement = &v
	}
	return s
}

// decodedSettings remembers the settings decoded from each team settings
// document (scanTeam): every authorized request reads the caller's teams
// and decoded their documents again; what a document decodes to depends
// on nothing but its text, so a remembered one is never stale (a changed
// setting is another document). Callers get copies (Settings.copy).
var decodedSettings = core.Bounded[string, Settings]{Max: 512, Copy: Settings.copy}

// Access is what a team's members may do across the organization (go-tfe's
// OrganizationAccess). The authorization model (internal/authz) decides
// with it (Team.Authz); changing it is TeamManageAccess.
type Access struct {
	ManagePolicies           bool `json:"manage-policies"`
	ManagePolicyOverrides    bool `json:"manage-policy-overrides"`
	DelegatePolicyOverrides  bool `json:"delegate-policy-overrides"`
	ManageWorkspaces         bool `json:"manage-workspaces"`
	ManageVCSSettings        bool `json:"manage-vcs-settings"`
	ManageProviders          bool `json:"manage-providers"`
	ManageModules            bool `json:"manage-modules"`
	ManageRunTasks           bool `json:"manage-run-tasks"`
	ManageProjects           bool `json:"manage-projects"`
	ReadWorkspaces           bool `json:"read-workspaces"`
	ReadProjects             bool `json:"read-projects"`
	ManageMembership         bool `json:"manage-membership"`
	ManageTeams              bool `json:"manage-teams"`
	ManageOrganizationAccess bool `json:"manage-organization-access"`
	AccessSecretTeams        bool `json:"access-secret-teams"`
	ManageAgentPools         bool `json:"manage-agent-pools"`
}

// AccessOptions change a team's organization access; nil is unchanged.
type AccessOptions struct {
	ManagePolicies           *bool `json:"manage-policies"`
	ManagePolicyOverrides    *bool `json:"manage-policy-overrides"`
	DelegatePolicyOverrides  *bool `json:"delegate-policy-overrides"`
	ManageWorkspaces         *bool `json:"manage-workspaces"`
	ManageVCSSettings        *bool `json:"manage-vcs-settings"`
	ManageProviders          *bool `json:"manage-providers"`
	ManageModules            *bool `json:"manage-modules"`
	ManageRunTasks           *bool `json:"manage-run-tasks"`
	ManageProjects           *bool `json:"manage-projects"`
	ReadWorkspaces           *bool `json:"read-workspaces"`
	ReadProjects             *bool `json:"read-projects"`
	ManageMembership         *bool `json:"manage-membership"`
	ManageTeams              *bool `json:"manage-teams"`
	ManageOrganizationAccess *bool `json:"manage-organization-access"`
	AccessSecretTeams        *bool `json:"access-secret-teams"`
	ManageAgentPools         *bool `json:"manage-agent-pools"`
}

func (o *AccessOptions) apply(a *Access) error {
	if o == nil {
		return nil
	}
	set := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	set(&a.ManagePolicies, o.ManagePolicies)
	set(&a.ManagePolicyOverrides, o.ManagePolicyOverrides)
	set(&a.DelegatePolicyOverrides, o.DelegatePolicyOverrides)
	set(&a.ManageWorkspaces, o.ManageWorkspaces)
	set(&a.ManageVCSSettings, o.ManageVCSSettings)
	set(&a.ManageProviders, o.ManageProviders)
	set(&a.ManageModules, o.ManageModules)
	set(&a.ManageRunTasks, o.ManageRunTasks)
	set(&a.ManageProjects, o.ManageProjects)
	set(&a.ReadWorkspaces, o.ReadWorkspaces)
	set(&a.ReadProjects, o.ReadProjects)
	set(&a.ManageMembership, o.ManageMembership)
	set(&a.ManageTeams, o.ManageTeams)
	set(&a.ManageOrganizationAccess, o.ManageOrganizationAccess)
	set(&a.AccessSecretTeams, o.AccessSecretTeams)
	set(&a.ManageAgentPools, o.ManageAgentPools)
	if a.ManageTeams && !a.ManageMembership {
		return core.Invalid("organization-access manage-teams requires manage-membership")
	}
	if a.ManageOrganizationAccess && !a.ManageTeams {
		return core.Invalid("organization-access manage-organization-access requires manage-teams")
	}
	return nil
}

func allAccess() Access {
	return Access{
		ManagePolicies: true, ManagePolicyOverrides: true, DelegatePolicyOverrides: true, ManageWorkspaces: true,
		ManageVCSSettings: true, ManageProviders: true, ManageModules: true, ManageRunTasks: true, ManageProjects: true,
		ReadWorkspaces: true, ReadProjects: true, ManageMembership: true, ManageTeams: true,
		ManageOrganizationAccess: true, AccessSecretTeams: true, ManageAgentPools: true,
	}
}

// IsOwners reports whether t is its organization's owners team.
func (t *Team) IsOwners() bool { return t.Name == OwnersTeam }

// OrganizationAccess is the team's effective access: everything for owners.
func (t *Team) OrganizationAccess() Access {
	if t.IsOwners() {
		return allAccess()
	}
	return t.Settings.Access
}

// MembersManageTokens reports whether the team's members may manage its
// tokens (true unless turned off).
func (t *Team) MembersManageTokens() bool {
	return t.Settings.AllowMemberTokenManagement == nil || *t.Settings.AllowMemberTokenManagement
}

// HasMember reports whether the user is in the team.
func (t *Team) HasMember(userID string) bool {
	for _, id := range t.UserIDs {
		if id == userID {
			return true
		}
	}
	return false
}

func validateName(name string) error {
	if strings.TrimSpace(name) == "" {
		return core.Invalid("name is required")
	}
	if len(name) > 255 || strings.ContainsAny(name, "\x00\r\n\t/") {
		return core.Invalid("name %q is invalid: use at most 255 characters, without slashes or control characters", name)
	}
	return nil
}

func validVisibility(v string) bool { return v == "secret" || v == "organization" }

// Membership is a user's membership of an organization.
type Membership struct {
	ID           string
	Organization string
	UserID       string
	Status       string // invited | active
	CreatedAt    time.Time
	// TeamIDs are the organization's teams the user is in, filled in by
	// the service.
	TeamIDs []string
}

// Membership statuses.
const (
	StatusInvited = "invited"
	StatusActive  = "active"
)
