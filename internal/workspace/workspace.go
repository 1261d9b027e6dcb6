// Package workspace keeps workspaces: the unit that owns state, runs,
// variables and a lock. It also keeps workspace tags, tag bindings and
// remote-state sharing.
package workspace

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/retention"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// Lock holder kinds, named as the JSON:API types of the locked-by relation.
const (
	LockUser = "users"
	LockTeam = "teams"
	LockRun  = "runs"
)

// Workspace is a workspace as stored.
type Workspace struct {
	ID           string
	Organization string
	ProjectID    string
	Name         string
	// Lock: LockKind is "" when unlocked.
	LockKind   string
	LockID     string
	LockReason string
	// SSHKeyID is the SSH key runs use to fetch modules ("" for none).
	SSHKeyID  string
	Settings  Settings
	TagNames  []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Locked reports whether the workspace is locked.
func (w *Workspace) Locked() bool { return w.LockKind != "" }

// Settings are a workspace's options, kept as one JSON document.
type Settings struct {
	Description                 string     `json:"description"`
	ExecutionMode               string     `json:"execution-mode,omitempty"` // own value when overwritten
	ExecutionModeOverwrite      bool       `json:"execution-mode-overwrite"`
	AgentPoolID                 string     `json:"agent-pool-id,omitempty"`
	AgentPoolOverwrite          bool       `json:"agent-pool-overwrite"`
	AllowDestroyPlan            bool       `json:"allow-destroy-plan"`
	AssessmentsEnabled          bool       `json:"assessments-enabled"`
	AutoApply                   bool       `json:"auto-apply"`
	AutoApplyRunTrigger         bool       `json:"auto-apply-run-trigger"`
	AutoDestroyAt               *time.Time `json:"auto-destroy-at,omitempty"`
	AutoDestroyActivityDuration string     `json:"auto-destroy-activity-duration,omitempty"`
	InheritsProjectAutoDestroy  bool       `json:"inherits-project-auto-destroy"`
	FileTriggersEnabled         bool       `json:"file-triggers-enabled"`
	GlobalRemoteState           bool       `json:"global-remote-state"`
	ProjectRemoteState          bool       `json:"project-remote-state"`
	QueueAllRuns                bool       `json:"queue-all-runs"`
	SpeculativeEnabled          bool       `json:"speculative-enabled"`
	StructuredRunOutputEnabled  bool       `json:"structured-run-output-enabled"`
	Source                      string     `json:"source"`
	SourceName                  string     `json:"source-name,omitempty"`
	SourceURL                   string     `json:"source-url,omitempty"`
	TerraformVersion            string     `json:"terraform-version"`
	TriggerPrefixes             []string   `json:"trigger-prefixes"`
	TriggerPatterns             []string   `json:"trigger-patterns"`
	WorkingDirectory            string     `json:"working-directory"`
	MigrationEnvironment        string     `json:"migration-environment,omitempty"`
	// DataRetention is the workspace's own data retention policy (none:
	// its organization's applies).
	DataRetention retention.Policy `json:"data-retention-policy,omitzero"`
	// VCSRepo is the repository the workspace is connected to (nil: none);
	// the VCS domain (internal/vcs) checks and keeps the connection.
	VCSRepo *VCSRepo `json:"vcs-repo,omitempty"`
	// ManagedBy is the stack whose deployment the workspace is (its ID;
	// "" for a workspace of its own): people read it, and only the
	// stack's deployment runs change it (the authorization model).
	ManagedBy string `json:"managed-by,omitempty"`
}

// VCSRepo is a workspace's connection to a repository (go-tfe's
// VCSRepo), the VCS domain's type; VCSRepoOptions what a request sends.
type (
	VCSRepo        = vcsrepo.Repo
	VCSRepoOptions = vcsrepo.Options
)

// copy returns s with nothing shared with it: the values behind its
// pointer and slices copied too (TestSettingsCopyIsDeep names the fields
// it must copy).
func (s Settings) copy() Settings {
	if s.AutoDestroyAt != nil {
		t := *s.AutoDestroyAt
		s.AutoDestroyAt = &t
	}
	s.TriggerPrefixes = slices.Clone(s.TriggerPrefixes)
	s.TriggerPatterns = slices.Clone(s.TriggerPatterns)
	if s.VCSRepo != nil {
		r := *s.VCSRepo
		s.VCSRepo = &r
	}
	return s
}

// decodedSettings remembers the settings decoded from each workspace
// settings document (scanWith): every read of a workspace decodes its
// document, and what it decodes to depends on nothing but its text, so a
// remembered one is never stale (a changed setting is another document).
// Callers get copies (Settings.copy).
var decodedSettings = core.Bounded[string, Settings]{Max: 512, Copy: Settings.copy}

func defaultSettings() Settings {
	return Settings{
		AllowDestroyPlan:           true,
		FileTriggersEnabled:        true,
		SpeculativeEnabled:         true,
		StructuredRunOutputEnabled: true,
		InheritsProjectAutoDestroy: true,
		Source:                     "tfe-api",
		TerraformVersion:           "latest",
		TriggerPrefixes:            []string{},
		TriggerPatterns:            []string{},
	}
}

// TagBinding is a key/value tag on a workspace or (inherited) its project.
type TagBinding struct {
	ID    string
	Key   string
	Value string
}

// Tag is an organization's flat tag.
type Tag struct {
	ID   string
	Name string
}

var nameRE = core.NewPattern(`^[A-Za-z0-9_-]+$`, 1, 90)

// ValidateName checks a workspace name: letters, digits, '-' and '_', at most 90.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return core.Invalid("name %q is invalid: use 1 to 90 letters, digits, '-' and '_'", name)
	}
	return nil
}

var tagRE = core.NewPattern(`^[a-z0-9][a-z0-9:_-]*$`, 1, 255)

// NormalizeTag lowercases a tag name and checks it.
func NormalizeTag(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if !tagRE.MatchString(n) {
		return "", core.Invalid("tag %q is invalid: tags start with a letter or digit and hold letters, digits, ':', '-' and '_'", name)
	}
	return n, nil
}

var versionRE = regexp.MustCompile(`^(latest|v?[0-9]+(\.[0-9]+){0,2}(-[0-9A-Za-z.]+)?|[~><=!][=>]?\s*[0-9][0-9A-Za-z.,<>=~!\s-]*)$`)

// ValidateTerraformVersion accepts "latest", a version or a version constraint.
func ValidateTerraformVersion(v string) error {
	if !versionRE.MatchString(v) {
		return core.Invalid("terraform-version %q is not a valid version or constraint", v)
	}
	return nil
}
