package audit

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// DefaultRetention is how long events are kept unless configured.
const DefaultRetention = 90 * 24 * time.Hour

// Organizations resolves organization names; the organization domain
// provides it.
type Organizations interface {
	// IDByName returns the ID of the named organization, core.ErrNotFound
	// when there is none. It checks no caller.
	IDByName(ctx context.Context, name string) (string, error)
}

// Locator tells which organization a resource belongs to, for routes that
// name a resource but no organization (workspaces/{id}, runs/{id}, …).
// collection is the route's collection ("workspaces"); it answers
// core.ErrNotFound for a resource it does not know (or the caller may not
// see) and ("", nil) for collections outside any organization.
type Locator func(ctx context.Context, collection, id string) (org string, err error)

// Options configure a Service.
type Options struct {
	DB            *store.DB
	Organizations Organizations
	// Locate finds the organization of resources named by ID.
	Locate Locator
	// Retention is how long events are kept (DefaultRetention when 0).
	Retention time.Duration
	// PruneEvery is how often old events are deleted (an hour when 0).
	PruneEvery time.Duration
	Logger     *slog.Logger
}

// Service records and lists audit events.
type Service struct {
	db        *store.DB
	orgs      Organizations
	locate    Locator
	retention time.Duration
	every     time.Duration
	logger    *slog.Logger
	// pruned, when set (tests), receives the count of each pruning pass.
	pruned chan<- int64
}

// NewService returns an audit service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Organizations == nil || o.Locate == nil {
		return nil, errors.New("audit: DB, Organizations and Locate are required")
	}
	if o.Retention < 0 || o.PruneEvery < 0 {
		return nil, errors.New("audit: retention and pruning interval must not be negative")
	}
	return &Service{
		db: o.DB, orgs: o.Organizations, locate: o.Locate,
		retention: cmp.Or(o.Retention, DefaultRetention),
		every:     cmp.Or(o.PruneEvery, time.Hour),
		logger:    cmp.Or(o.Logger, slog.Default()),
	}, nil
}

// Retention is how long events are kept.
func (s *Service) Retention() time.Duration { return s.retention }

// Record appends an event (filling in its ID and time when empty). It
// reports false when the event's organization has its audit trail off.
func (s *Service) Record(ctx context.Context, e *Event) (bool, error) {
	if e.ID == "" {
		e.ID = newUUID()
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = core.Now()
	}
	return insertEvent(ctx, s.db, e)
}

// List returns the caller's organization's events: the caller must hold
// that organization's organization or audit-trails token, as in HCP
// Terraform (authz.OrgReadAuditTrail).
func (s *Service) List(ctx context.Context, f Filter) ([]*Event, int, error) {
	p := auth.FromContext(ctx)
	if p == nil {
		return nil, 0, core.Unauthorized("no token given")
	}
	if err := authz.Allows(ctx, authz.OrgReadAuditTrail, authz.Resource{Organization: p.Organization}); err != nil {
		return nil, 0, err
	}
	id, err := s.orgs.IDByName(ctx, p.Organization)
	if err != nil {
		return nil, 0, err
	}
	f.AllOrganizations, f.OrganizationID = false, id
	return listEvents(ctx, s.db, f)
}

// ListAll returns every event, site events included: site admins only
// (authz.RequireSiteAdmin; everyone else is told it is not found).
func (s *Service) ListAll(ctx context.Context, f Filter) ([]*Event, int, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, 0, err
	}
	f.AllOrganizations = true
	return listEvents(ctx, s.db, f)
}

// Configuration returns an organization's audit configuration: owners only.
func (s *Service) Configuration(ctx context.Context, org string) (*Configuration, error) {
	id, err := s.ownedOrganization(ctx, org)
	if err != nil {
		return nil, err
	}
	c, err := getConfiguration(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if c == nil {
		// Audit trails are on from the start; the organization's creation
		// is the site's event, not the organization's.
		c = &Configuration{OrganizationID: id, TrailsEnabled: true}
	}
	c.OrganizationName = org
	return c, nil
}

// SetTrailsEnabled turns recording of an organization's events on or off:
// owners only. The change itself is recorded either way (by the
// Recorder: turning recording off is the last event recorded, turning it
// on the first).
func (s *Service) SetTrailsEnabled(ctx context.Context, org string, enabled bool) (*Configuration, error) {
	var out *Configuration
	id, err := s.ownedOrganization(ctx, org)
	if err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		c, err := getConfiguration(ctx, tx, id)
		if err != nil {
			return err
		}
		now := core.Now()
		if c == nil {
			c = &Configuration{OrganizationID: id, TrailsEnabled: true}
		}
		if c.TrailsEnabled != enabled {
			if enabled {
				c.TrailsEnabledAt = &now
			} else {
				c.TrailsDisabledAt = &now
			}
		}
		c.TrailsEnabled, c.UpdatedAt = enabled, now
		out = c
		return putConfiguration(ctx, tx, c)
	})
	if err != nil {
		return nil, err
	}
	out.OrganizationName = org
	return out, nil
}

func (s *Service) ownedOrganization(ctx context.Context, org string) (string, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return "", err
	}
	id, err := s.orgs.IDByName(ctx, org)
	if err != nil {
		return "", err
	}
	if err := authz.Allows(ctx, authz.OrgManage, authz.Resource{Organization: org}); err != nil {
		return "", err
	}
	return id, nil
}

// Prune deletes the events older than the retention period.
func (s *Service) Prune(ctx context.Context) (int64, error) {
	return pruneEvents(ctx, s.db, core.Now().Add(-s.retention))
}

// Run prunes old events now and then every PruneEvery until ctx ends.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		n, err := s.Prune(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.Error("pruning the audit trail", "error", err)
		} else if n > 0 {
			s.logger.Info("pruned the audit trail", "events", n, "retention", s.retention)
		}
		if s.pruned != nil {
			select {
			case s.pruned <- n:
			case <-ctx.Done():
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
