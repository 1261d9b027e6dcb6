package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// insertEvent appends e, unless e belongs to an organization whose audit
// trail is turned off: the check and the insert are one statement.
func insertEvent(ctx context.Context, q store.Q, e *Event) (bool, error) {
	meta, err := json.Marshal(e.Resource.Meta)
	if err != nil {
		return false, err
	}
	// The organization's ID is the event's own or, when it names only the
	// organization, looked up by name in the same statement ('' for a
	// site event or an organization gone meanwhile).
	res, err := q.Exec(ctx, `WITH o (id) AS (SELECT COALESCE(NULLIF(?, ''), (SELECT id FROM organizations WHERE name = ?), ''))
		INSERT INTO audit_events (id, occurred_at, organization_id, organization_name,
		actor_kind, actor_id, actor_name, token_id, resource_type, resource_id, action, meta, request_id, client_ip, user_agent)
		SELECT ?, ?, o.id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM o
		WHERE NOT EXISTS (SELECT 1 FROM audit_configurations c WHERE c.organization_id = o.id AND c.trails_enabled = ?)`,
		e.OrganizationID, e.OrganizationName,
		e.ID, core.Micros(e.Timestamp), e.OrganizationName,
		string(e.Actor.Kind), e.Actor.ID, e.Actor.Name, e.Actor.TokenID,
		e.Resource.Type, e.Resource.ID, e.Resource.Action, string(meta),
		e.Request.ID, e.Request.ClientIP, e.Request.UserAgent,
		false)
	if err != nil {
		return false, fmt.Errorf("recording audit event: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

const eventCols = `id, occurred_at, organization_id, organization_name, actor_kind, actor_id, actor_name, token_id,
	resource_type, resource_id, action, meta, request_id, client_ip, user_agent`

func scanEvent(sc store.Scanner) (*Event, error) {
	var e Event
	var at int64
	var kind, meta string
	if err := sc.Scan(&e.ID, &at, &e.OrganizationID, &e.OrganizationName, &kind, &e.Actor.ID, &e.Actor.Name, &e.Actor.TokenID,
		&e.Resource.Type, &e.Resource.ID, &e.Resource.Action, &meta, &e.Request.ID, &e.Request.ClientIP, &e.Request.UserAgent); err != nil {
		return nil, err
	}
	e.Timestamp = core.FromMicros(at)
	e.Actor.Kind = auth.Kind(kind)
	if meta != "" && meta != "null" {
		if err := json.Unmarshal([]byte(meta), &e.Resource.Meta); err != nil {
			return nil, fmt.Errorf("audit event %s: meta: %w", e.ID, err)
		}
	}
	return &e, nil
}

// Filter selects events.
type Filter struct {
	// AllOrganizations lists every event, site events included; otherwise
	// only OrganizationID's.
	AllOrganizations bool
	OrganizationID   string
	// After, when set, keeps events at or after it (the caller turns
	// "since" into the first instant it admits).
	After time.Time
	// Page is 1-based; Size is the page size.
	Page, Size int
	// NewestFirst lists the newest events first (the web UI's trail, read
	// from its latest end); otherwise oldest first, as the API lists them.
	NewestFirst bool
}

// listEvents returns a page of events, oldest first (newest first with
// f.NewestFirst), and how many match. Oldest first keeps the API's pages
// stable while events are appended.
func listEvents(ctx context.Context, q store.Q, f Filter) ([]*Event, int, error) {
	where := `WHERE occurred_at >= ?`
	args := []any{int64(0)}
	if !f.After.IsZero() {
		args[0] = core.Micros(f.After)
	}
	if !f.AllOrganizations {
		where += ` AND organization_id = ?`
		args = append(args, f.OrganizationID)
	}
	var total int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM audit_events `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("counting audit events: %w", err)
	}
	order := ` ORDER BY occurred_at, id`
	if f.NewestFirst {
		order = ` ORDER BY occurred_at DESC, id DESC`
	}
	events, err := store.All(ctx, q, scanEvent, `SELECT `+eventCols+` FROM audit_events `+where+
		order+` LIMIT ? OFFSET ?`, append(args, f.Size, (f.Page-1)*f.Size)...)
	if err != nil {
		return nil, 0, fmt.Errorf("listing audit events: %w", err)
	}
	return events, total, nil
}

// pruneEvents deletes events older than before, returning how many.
func pruneEvents(ctx context.Context, q store.Q, before time.Time) (int64, error) {
	res, err := q.Exec(ctx, `DELETE FROM audit_events WHERE occurred_at < ?`, core.Micros(before))
	if err != nil {
		return 0, fmt.Errorf("pruning audit events: %w", err)
	}
	return res.RowsAffected()
}

// Configuration is an organization's audit configuration.
type Configuration struct {
	OrganizationID   string
	OrganizationName string
	TrailsEnabled    bool
	TrailsEnabledAt  *time.Time
	TrailsDisabledAt *time.Time
	UpdatedAt        time.Time
}

// getConfiguration returns the stored configuration, or nil when the
// organization has none (the defaults apply).
func getConfiguration(ctx context.Context, q store.Q, orgID string) (*Configuration, error) {
	var c Configuration
	var on, off sql.NullInt64
	var updated int64
	err := q.QueryRow(ctx, `SELECT trails_enabled, trails_enabled_at, trails_disabled_at, updated_at FROM audit_configurations WHERE organization_id = ?`, orgID).
		Scan(&c.TrailsEnabled, &on, &off, &updated)
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading audit configuration: %w", err)
	}
	c.OrganizationID = orgID
	c.TrailsEnabledAt, c.TrailsDisabledAt = optTime(on), optTime(off)
	c.UpdatedAt = core.FromMicros(updated)
	return &c, nil
}

func putConfiguration(ctx context.Context, q store.Q, c *Configuration) error {
	_, err := q.Exec(ctx, `INSERT INTO audit_configurations (organization_id, trails_enabled, trails_enabled_at, trails_disabled_at, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (organization_id) DO UPDATE SET trails_enabled = excluded.trails_enabled,
			trails_enabled_at = excluded.trails_enabled_at, trails_disabled_at = excluded.trails_disabled_at, updated_at = excluded.updated_at`,
		c.OrganizationID, c.TrailsEnabled, optMicros(c.TrailsEnabledAt), optMicros(c.TrailsDisabledAt), core.Micros(c.UpdatedAt))
	if err != nil {
		return fmt.Errorf("storing audit configuration: %w", err)
	}
	return nil
}

func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := core.FromMicros(v.Int64)
	return &t
}

func optMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return core.Micros(*t)
}
