package stack

import "fmt"

// ConfigStatus is the status of a stack configuration (go-tfe's
// StackConfigurationStatus).
type ConfigStatus string

// Configuration statuses. A configuration is created pending, becomes
// preparing when its archive arrives, and ends completed (its files parsed
// cleanly) or failed (with diagnostics). "queued" exists in the API and is
// not used: Terrace prepares an upload as soon as it arrives.
const (
	ConfigPending   ConfigStatus = "pending"
	ConfigQueued    ConfigStatus = "queued"
	ConfigPreparing ConfigStatus = "preparing"
	ConfigCompleted ConfigStatus = "completed"
	ConfigFailed    ConfigStatus = "failed"
)

// configTransitions is the configuration lifecycle: every status change
// goes through transitionConfig, which consults this table only.
var configTransitions = map[ConfigStatus][]ConfigStatus{
	ConfigPending:   {ConfigPreparing, ConfigFailed},
	ConfigPreparing: {ConfigCompleted, ConfigFailed},
}

// Final reports whether no transition leaves the status.
func (s ConfigStatus) Final() bool { return len(configTransitions[s]) == 0 }

func (s ConfigStatus) can(to ConfigStatus) bool {
	for _, t := range configTransitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// transitionConfig moves c to status to and stamps the time, or refuses.
func transitionConfig(c *Configuration, to ConfigStatus) error {
	if !c.Status.can(to) {
		return fmt.Errorf("stack configuration %s cannot go from %s to %s", c.ID, c.Status, to)
	}
	now := nowUTC()
	switch to {
	case ConfigPreparing:
		c.Timestamps.PreparingAt = &now
	case ConfigCompleted:
		c.Timestamps.CompletedAt = &now
	case ConfigFailed:
		c.Timestamps.ErroredAt = &now
	}
	c.Status, c.UpdatedAt = to, now
	return nil
}

// GroupStatus is the status of a deployment group (go-tfe's
// DeploymentGroupStatus). Groups stay pending until deployment runs exist.
type GroupStatus string

// Deployment group statuses.
const (
	GroupPending   GroupStatus = "pending"
	GroupDeploying GroupStatus = "deploying"
	GroupSucceeded GroupStatus = "succeeded"
	GroupFailed    GroupStatus = "failed"
	GroupAbandoned GroupStatus = "abandoned"
)
