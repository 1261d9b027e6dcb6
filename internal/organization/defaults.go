package organization

import (
	"encoding/json"
	"fmt"
	"sync"
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
	if d, ok := decodedDefaults.get(attrs); ok {
		return d.mode, d.pool, nil
	}
	s := defaultSettings()
	if err := json.Unmarshal([]byte(attrs), &s); err != nil {
		return "", "", fmt.Errorf("decoding organization settings: %w", err)
	}
	decodedDefaults.put(attrs, defaults{s.DefaultExecutionMode, s.DefaultAgentPoolID})
	return s.DefaultExecutionMode, s.DefaultAgentPoolID, nil
}

// decodedDefaults remembers DefaultsOf's answers by the settings document
// itself: every workspace read decodes its organization's document, and
// the answer depends on nothing but its text, so a remembered one is
// never stale (a changed setting is another document).
var decodedDefaults defaultsMemo

type defaults struct{ mode, pool string }

type defaultsMemo struct {
	mu sync.Mutex
	m  map[string]defaults
}

// maxDecodedDefaults bounds defaultsMemo (a document per organization and
// version of its settings): past it, it starts again empty.
const maxDecodedDefaults = 256

func (c *defaultsMemo) get(attrs string) (defaults, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.m[attrs]
	return d, ok
}

func (c *defaultsMemo) put(attrs string, d defaults) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxDecodedDefaults {
		c.m = map[string]defaults{}
	}
	c.m[attrs] = d
}
