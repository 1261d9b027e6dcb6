package organization

import (
	"encoding/json"
	"fmt"
)

// SettingsSQL is a scalar subquery reading the settings document of the
// organization named by the SQL expression name (NULL when there is none),
// for a domain that folds an organization's defaults into its own
// statement; DefaultsOf decodes it.
func SettingsSQL(name string) string {
	return `SELECT o.attrs FROM organizations o WHERE o.name = ` + name
}

// DefaultsOf returns the default execution mode and agent pool of the
// settings document SettingsSQL read, as SystemIn's Settings say them.
func DefaultsOf(attrs string) (executionMode, agentPoolID string, err error) {
	s := defaultSettings()
	if err := json.Unmarshal([]byte(attrs), &s); err != nil {
		return "", "", fmt.Errorf("decoding organization settings: %w", err)
	}
	return s.DefaultExecutionMode, s.DefaultAgentPoolID, nil
}
