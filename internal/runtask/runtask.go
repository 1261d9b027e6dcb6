// Package runtask keeps run tasks: external services that HCP Terraform
// (and Terrace) call between the phases of a run. An organization defines
// tasks (name, URL, HMAC key, and optionally a global configuration that
// attaches the task to every workspace); a workspace attaches tasks with an
// enforcement level and the stages they run at (pre_plan, post_plan,
// pre_apply, post_apply). docs/design/runtasks.md describes the whole
// feature.
//
// A task's HMAC key is write-only: it keys X-TFC-Task-Signature and is
// never returned by the API nor written to a log.
package runtask

import (
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// ID prefixes.
const (
	PrefixTask          = "task"
	PrefixWorkspaceTask = "wstask"
)

// Stage is where in a run a task runs.
type Stage string

// Stages, in the order a run passes them.
const (
	PrePlan   Stage = "pre_plan"
	PostPlan  Stage = "post_plan"
	PreApply  Stage = "pre_apply"
	PostApply Stage = "post_apply"
)

// Stages lists every stage in run order.
var Stages = []Stage{PrePlan, PostPlan, PreApply, PostApply}

// Enforcement says what a failed task does to the run.
type Enforcement string

// Enforcement levels.
const (
	// Advisory failures show a warning; the run goes on.
	Advisory Enforcement = "advisory"
	// Mandatory failures stop the run.
	Mandatory Enforcement = "mandatory"
)

// Category is the only task category HCP Terraform has.
const Category = "task"

// Task is an organization's run task.
type Task struct {
	ID           string
	Organization string
	Name         string
	URL          string
	Description  string
	Category     string
	Enabled      bool
	Global       Global
	// AgentPoolID, when set, is the agent pool whose agents send the
	// task's requests (request forwarding: internal/forward), for a
	// service the server cannot reach.
	AgentPoolID string
	CreatedAt   time.Time
	UpdatedAt   time.Time

	hmacKey string // write-only
}

// HasHMACKey reports whether requests to the task are signed.
func (t *Task) HasHMACKey() bool { return t.hmacKey != "" }

// Global is a task's global configuration: when enabled, the task runs in
// every workspace of the organization at Stages with EnforcementLevel.
type Global struct {
	Enabled          bool
	Stages           []Stage
	EnforcementLevel Enforcement
}

// WorkspaceTask is a task attached to a workspace.
type WorkspaceTask struct {
	ID               string
	TaskID           string
	WorkspaceID      string
	EnforcementLevel Enforcement
	Stages           []Stage
	CreatedAt        time.Time
}

// Stage is the first of the task's stages: the deprecated single "stage"
// attribute.
func (w *WorkspaceTask) Stage() Stage {
	if len(w.Stages) == 0 {
		return PostPlan
	}
	return w.Stages[0]
}

// TaskChanges are the attributes of a task create or update; nil means
// absent.
type TaskChanges struct {
	Name        *string
	URL         *string
	Description *string
	Category    *string
	HMACKey     *string
	Enabled     *bool
	Global      *GlobalChanges
	// AgentPoolID names an agent pool for request forwarding ("": none,
	// the server sends the requests itself).
	AgentPoolID *string
}

// GlobalChanges are the attributes of a global configuration.
type GlobalChanges struct {
	Enabled          *bool
	Stages           *[]Stage
	EnforcementLevel *Enforcement
}

// WorkspaceTaskChanges are the attributes of a workspace task create or
// update. Stage is the deprecated single stage; Stages wins when both are
// given.
type WorkspaceTaskChanges struct {
	TaskID           string
	EnforcementLevel *Enforcement
	Stage            *Stage
	Stages           *[]Stage
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// maxDescription is HCP Terraform's limit on descriptions.
const maxDescription = 300

func validateTask(t *Task) error {
	if t.Name == "" {
		return core.Invalid("name is required")
	}
	if !nameRE.MatchString(t.Name) || len(t.Name) > 255 {
		return core.Invalid("name %q may only contain letters, digits, dashes and underscores (at most 255)", t.Name)
	}
	if err := validateURL(t.URL); err != nil {
		return err
	}
	if len(t.Description) > maxDescription {
		return core.Invalid("description must be at most %d characters", maxDescription)
	}
	if t.Category != Category {
		return core.Invalid("category must be %q, not %q", Category, t.Category)
	}
	if err := validateStages(t.Global.Stages); err != nil {
		return err
	}
	if err := validateEnforcement(t.Global.EnforcementLevel); err != nil {
		return err
	}
	return nil
}

func validateURL(raw string) error {
	if raw == "" {
		return core.Invalid("url is required")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return core.Invalid("url must be an absolute http or https URL, not %q", raw)
	}
	return nil
}

func validateStages(stages []Stage) error {
	seen := map[Stage]bool{}
	for _, s := range stages {
		if !slices.Contains(Stages, s) {
			return core.Invalid("stage %q is not one of pre_plan, post_plan, pre_apply, post_apply", s)
		}
		if seen[s] {
			return core.Invalid("stage %q is given twice", s)
		}
		seen[s] = true
	}
	return nil
}

func validateEnforcement(e Enforcement) error {
	if e != Advisory && e != Mandatory {
		return core.Invalid("enforcement-level must be advisory or mandatory, not %q", e)
	}
	return nil
}
