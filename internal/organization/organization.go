// Package organization keeps organizations: the top of Terrace's tenancy.
// Everything else belongs to exactly one organization, and a caller who is
// not a member sees a 404 for all of it.
package organization

import (
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/retention"
)

// Organization is a tenant.
type Organization struct {
	ID        string
	Name      string
	Email     string
	Settings  Settings
	CreatedAt time.Time
	UpdatedAt time.Time
	// Disabled: a site admin has closed the organization to its members,
	// teams and tokens (the admin API's is-disabled).
	Disabled bool
	// GlobalModuleSharing: a site admin shares the organization's private
	// modules with every organization of the site (sharing.go);
	// GlobalProviderSharing its private providers.
	GlobalModuleSharing, GlobalProviderSharing bool
	// WorkspaceLimit is the most workspaces the organization may have, as a
	// site admin set it; -1 for none.
	WorkspaceLimit int
	// PlanTimeout and ApplyTimeout are the organization's own time limits
	// of a plan and an apply, as a site admin set them (Go durations,
	// "24h"); "" for the site's (internal/sitesettings).
	PlanTimeout, ApplyTimeout string
	// AccessBetaTools lets the organization's workspaces use terraform
	// versions registered as beta.
	AccessBetaTools bool
	// WorkerSudo lets the organization's runs gain privileges (sudo and
	// other setuid programs): without it a runner starts terraform with
	// no_new_privs.
	WorkerSudo bool
}

// Settings are the organization's options, stored as one JSON document.
type Settings struct {
	CollaboratorAuthPolicy     string `json:"collaborator-auth-policy"`
	CostEstimationEnabled      bool   `json:"cost-estimation-enabled"`
	DefaultExecutionMode       string `json:"default-execution-mode"`
	SessionRemember            int    `json:"session-remember"`
	SessionTimeout             int    `json:"session-timeout"`
	AssessmentsEnforced        bool   `json:"assessments-enforced"`
	StacksEnabled              bool   `json:"stacks-enabled"`
	AllowForceDeleteWorkspaces bool   `json:"allow-force-delete-workspaces"`
	SendPassingStatuses        bool   `json:"send-passing-statuses-for-untriggered-speculative-plans"`
	AggregatedCommitStatus     bool   `json:"aggregated-commit-status-enabled"`
	SpeculativePlanManagement  bool   `json:"speculative-plan-management-enabled"`
	OwnersTeamSAMLRoleID       string `json:"owners-team-saml-role-id"`
	UserTokensEnabled          *bool  `json:"user-tokens-enabled,omitempty"`
	DefaultAgentPoolID         string `json:"default-agent-pool-id,omitempty"`
	// DataRetention is the data retention policy of the organization's
	// workspaces that have none of their own.
	DataRetention retention.Policy `json:"data-retention-policy,omitzero"`
}

func defaultSettings() Settings {
	t := true
	return Settings{
		CollaboratorAuthPolicy:    "password",
		DefaultExecutionMode:      "remote",
		SessionRemember:           20160,
		SessionTimeout:            20160,
		SpeculativePlanManagement: true,
		UserTokensEnabled:         &t,
	}
}

var nameRE = core.NewPattern(`^[A-Za-z0-9][A-Za-z0-9_-]*$`, 1, 40)

// ReservedNames are no organization's: the pages of an organization are
// at /app/NAME/, and these first segments of /app/ are the site's own
// pages (the static files, the sign-in, the organizations list, personal
// settings, ...). An organization named after one would have pages that
// never show. TestReservedNamesCoverTheSitesPages holds the list to the
// routes.
var ReservedNames = []string{"invitations", "oauth", "organizations", "settings", "signin", "signout", "sso", "static", "vcs"}

// ValidateName checks an organization name: letters, digits, '-' and '_',
// and none of ReservedNames.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return core.Invalid("organization name %q is invalid: use 1 to 40 letters, digits, '-' and '_', starting with a letter or digit", name)
	}
	for _, r := range ReservedNames {
		if strings.EqualFold(name, r) {
			return core.Invalid("organization name %q is reserved: the site's own pages are at /app/%s", name, r)
		}
	}
	return nil
}

// ValidExecutionMode reports whether m is an execution mode.
func ValidExecutionMode(m string) bool { return m == "remote" || m == "local" || m == "agent" }

func (s Settings) userTokens() bool { return s.UserTokensEnabled == nil || *s.UserTokensEnabled }
