// Package notify keeps notification configurations (on workspaces, teams
// and projects) and delivers notifications through the durable outbox
// (internal/outbox, topic "notification"): every run transition that a
// configuration subscribes to becomes an outbox item, and the outbox's
// loop hands it to this package's handler, retrying with capped
// exponential backoff until the destination accepts it.
// docs/design/notifications.md describes the delivery.
//
// A configuration's token is write-only: it keys the HMAC-SHA512 signature
// of generic deliveries (X-TFE-Notification-Signature) and is never
// returned by the API nor written to a log.
package notify

import (
	"net/url"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// PrefixConfiguration prefixes notification configuration IDs.
const PrefixConfiguration = "nc"

// prefixDelivery prefixes outbox rows.
const prefixDelivery = "ncd"

// Destination is where a configuration sends: its payload shape.
type Destination string

// Destinations.
const (
	Generic        Destination = "generic"
	Email          Destination = "email"
	Slack          Destination = "slack"
	MicrosoftTeams Destination = "microsoft-teams"
)

// Subscribable kinds, spelled as the JSON:API types of the owners.
const (
	OnWorkspace = "workspaces"
	OnTeam      = "teams"
	OnProject   = "projects"
)

// Trigger names a kind of event a configuration subscribes to.
type Trigger string

// Triggers, as HCP Terraform spells them.
const (
	RunCreated         Trigger = "run:created"
	RunPlanning        Trigger = "run:planning"
	RunNeedsAttention  Trigger = "run:needs_attention"
	RunApplying        Trigger = "run:applying"
	RunCompleted       Trigger = "run:completed"
	RunErrored         Trigger = "run:errored"
	AssessmentDrifted  Trigger = "assessment:drifted"
	AssessmentFailed   Trigger = "assessment:failed"
	AssessmentCheck    Trigger = "assessment:check_failure"
	AutoDestroyRemind  Trigger = "workspace:auto_destroy_reminder"
	AutoDestroyResults Trigger = "workspace:auto_destroy_run_results"
	// AutoDestroyResultsOld is the spelling of HCP Terraform's sample payloads.
	AutoDestroyResultsOld Trigger = "workspace:auto_destroy_results"
	WorkspaceDeleted      Trigger = "workspace:deleted"
	ChangeRequestCreated  Trigger = "change_request:created"
	TeamChangeRequest     Trigger = "team:change_request"
	// verification is the trigger of the test request sent on enable and
	// on actions/verify; it cannot be subscribed to.
	verification Trigger = "verification"
)

var validTriggers = []Trigger{RunCreated, RunPlanning, RunNeedsAttention, RunApplying, RunCompleted, RunErrored,
	AssessmentDrifted, AssessmentFailed, AssessmentCheck, AutoDestroyRemind, AutoDestroyResults, AutoDestroyResultsOld,
	WorkspaceDeleted, ChangeRequestCreated, TeamChangeRequest}

// MaxPerSubscribable is how many configurations a workspace (team,
// project) may have.
const MaxPerSubscribable = 20

// Configuration is a notification configuration.
type Configuration struct {
	ID               string
	Organization     string
	SubscribableType string
	SubscribableID   string
	Name             string
	Destination      Destination
	URL              string
	Enabled          bool
	Triggers         []string
	EmailAddresses   []string
	EmailUserIDs     []string
	// Responses are the last responses of the destination, newest first.
	Responses []Response
	// LastFailure says why the last delivery failed ("" after a success).
	LastFailure string
	CreatedAt   time.Time
	UpdatedAt   time.Time

	token string // write-only
}

// Subscribes reports whether the configuration wants the trigger.
func (c *Configuration) Subscribes(t Trigger) bool {
	return slices.Contains(c.Triggers, string(t))
}

// Response is one response of a destination (delivery-responses).
type Response struct {
	URL        string              `json:"url"`
	Body       string              `json:"body"`
	Code       string              `json:"code"`
	Headers    map[string][]string `json:"headers"`
	SentAt     time.Time           `json:"sent-at"`
	Successful bool                `json:"successful"`
	// cause is why no answer came, without the URL (set only by the
	// request that failed; describe prefers it).
	cause string
}

// maxResponses bounds the responses kept on a configuration.
const maxResponses = 10

// Changes are the attributes of a create or update; nil means absent.
type Changes struct {
	Name         *string
	Destination  *Destination
	URL          *string
	Token        *string
	Enabled      *bool
	Triggers     *[]string
	EmailAddrs   *[]string
	EmailUserIDs *[]string
}

func validate(c *Configuration) error {
	if c.Name == "" {
		return core.Invalid("name is required")
	}
	if len(c.Name) > 255 {
		return core.Invalid("name must be at most 255 characters")
	}
	switch c.Destination {
	case Generic, Slack, MicrosoftTeams:
		if c.URL == "" {
			return core.Invalid("url is required for %s destinations", c.Destination)
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return core.Invalid("url must be an absolute http or https URL")
		}
	case Email:
	case "":
		return core.Invalid("destination-type is required")
	default:
		return core.Invalid("destination-type %q is not one of generic, email, slack, microsoft-teams", c.Destination)
	}
	seen := map[string]bool{}
	for _, t := range c.Triggers {
		if !slices.Contains(validTriggers, Trigger(t)) {
			return core.Invalid("trigger %q is not a notification trigger", t)
		}
		if seen[t] {
			return core.Invalid("trigger %q is given twice", t)
		}
		seen[t] = true
	}
	for _, id := range c.EmailUserIDs {
		if !core.HasPrefix(id, core.PrefixUser) {
			return core.Invalid("users must be user IDs, not %q", id)
		}
	}
	return nil
}
