// Package project keeps projects, the folders that group workspaces. Every
// organization has exactly one default project.
package project

import (
	"context"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// DefaultName is the name of the project every organization starts with.
const DefaultName = "Default Project"

// Project is a folder of workspaces.
type Project struct {
	ID           string
	Organization string
	Name         string
	Description  string
	IsDefault    bool
	Settings     Settings
	TagBindings  []TagBinding
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Settings are a project's options, stored as one JSON document. When a
// setting is not overwritten the organization's value applies.
type Settings struct {
	ExecutionMode               string `json:"default-execution-mode,omitempty"`
	ExecutionModeOverwrite      bool   `json:"execution-mode-overwrite,omitempty"`
	AgentPoolID                 string `json:"default-agent-pool-id,omitempty"`
	AgentPoolOverwrite          bool   `json:"agent-pool-overwrite,omitempty"`
	AutoDestroyActivityDuration string `json:"auto-destroy-activity-duration,omitempty"`
}

// TagBinding is a key/value tag on a project.
type TagBinding struct {
	ID    string
	Key   string
	Value string
}

// TagKeyRule says which tag binding keys are valid: projects, workspaces
// and reserved tag keys all follow it.
const TagKeyRule = "1 to 128 characters: letters, digits, spaces and _ . : / = + - @"

// ValidTagKey reports whether key is a valid tag binding key (TagKeyRule).
// A loop, not a regular expression: `[\p{L}\p{N}…]{1,128}` compiles to
// 128 copies of Unicode's letter and number tables, 3 MB of heap held for
// the process's life. Invalid UTF-8 reads as U+FFFD, neither letter nor
// digit.
func ValidTagKey(key string) bool {
	n := 0
	for _, r := range key {
		if n++; n > 128 || !unicode.IsLetter(r) && !unicode.IsNumber(r) && !strings.ContainsRune(" _.:/=+@-", r) {
			return false
		}
	}
	return n > 0
}

// TagValueRule says which tag binding values are valid (a key-only
// binding's value is ""): projects, workspaces and policy set tag
// selectors all follow it.
const TagValueRule = "at most 256 characters, none of them a control character"

// ValidTagValue reports whether v is a valid tag binding value
// (TagValueRule). Control characters are refused for what they are, and
// because PostgreSQL cannot store a NUL in text: a value the store could
// not keep is a 422 on both stores, not a 500 on one.
func ValidTagValue(v string) bool {
	return utf8.ValidString(v) && utf8.RuneCountInString(v) <= 256 && strings.IndexFunc(v, unicode.IsControl) < 0
}

var nameRE = core.NewPattern(`^[A-Za-z0-9 _-]+$`, 1, 90)

// ValidateName checks a project name.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return core.Invalid("Name may only contain letters, numbers, spaces, hyphens and underscores, and must be 1 to 90 characters long (got %q)", name)
	}
	return nil
}

var durationRE = regexp.MustCompile(`^[0-9]{1,4}[dh]$`)

// ValidateAutoDestroyDuration checks an auto-destroy activity duration.
func ValidateAutoDestroyDuration(d string) error {
	if !durationRE.MatchString(d) {
		return core.Invalid("Auto destroy activity duration has an incorrect format, we expect up to 4 numeric digits and 1 unit ('d' or 'h')")
	}
	return nil
}

// CreateDefault creates an organization's default project inside the
// organization's creation transaction.
func (s *Service) CreateDefault(ctx context.Context, q store.Q, org string) error {
	now := core.Micros(core.Now())
	_, err := q.Exec(ctx, `INSERT INTO projects (id, organization_name, name, is_default, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		core.NewID(core.PrefixProject), org, DefaultName, true, now, now)
	return err
}

// SystemName returns a project's name without checking the caller (for
// the server itself: a run's TFC_PROJECT_NAME): one column of one row,
// where SystemIn reads the whole project and its tag bindings.
func (s *Service) SystemName(ctx context.Context, id string) (string, error) {
	var name string
	err := s.db.QueryRow(ctx, `SELECT name FROM projects WHERE id = ?`, id).Scan(&name)
	if store.IsNoRows(err) {
		return "", core.NotFound("project %q not found", id)
	}
	return name, err
}

// DefaultID returns the ID of an organization's default project.
func (s *Service) DefaultID(ctx context.Context, org string) (string, error) {
	var id string
	err := s.db.QueryRow(ctx, `SELECT id FROM projects WHERE organization_name = ? AND is_default = ?`, org, true).Scan(&id)
	if store.IsNoRows(err) {
		return "", core.NotFound("organization %q has no default project", org)
	}
	return id, err
}
