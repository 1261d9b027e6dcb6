package organization

import (
	"encoding/json"
	"fmt"

	"github.com/terracehq/terrace/internal/core"
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
	if d, ok := decodedDefaults.Get(attrs); ok {
		return d.mode, d.pool, nil
	}
	s := defaultSettings()
	if err := json.Unmarshal([]byte(attrs), &s); err != nil {
		return "", "", fmt.Errorf("decoding organization settings: %w", err)
	}
	decodedDefaults.Put(attrs, defaults{s.DefaultExecutionMode, s.DefaultAgentPoolID})
	return s.DefaultExecutionMode, s.DefaultAgentPoolID, nil
}

// decodedDefaults remembers DefaultsOf's answers by the settings document
// itself (a document per organization and version of its settings): every
// workspace read decodes its organization's document, and the answer
// depends on nothing but its text, so a remembered one is never stale (a
// changed setting is another document).
var decodedDefaults = core.Bounded[string, defaults]{Max: 256}

type defaults struct{ mode, pool string }
