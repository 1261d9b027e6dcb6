package sitesettings

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// SecretColumn is the sealed column of this domain: the SMTP password.
var SecretColumn = seal.Column{Table: "site_settings", IDColumn: "id", Column: "secret", Purpose: "site_settings.secret"}

// Channel is the wake-up (store.DB.Notify) a replica sends the others when
// it changes the general settings: they read them again at once.
const Channel = "site_settings"

// WatchEvery is how often a replica on PostgreSQL reads the general
// settings without being told to: only a backstop, for a change whose
// wake-up was lost (Watch reads at once after its listening connection
// comes back, too).
const WatchEvery = time.Minute

// watchSQLite is how often a replica on SQLite reads them: SQLite sends
// no wake-up to another process, and reading a local file costs little.
// One process owns a SQLite database in production; tests run two on one
// file.
const watchSQLite = time.Second

// Options build a Service.
type Options struct {
	DB *store.DB
	// Keys seals the SMTP password (nil stores it as given: unit tests).
	Keys *seal.Keyring
	// Defaults are the server's flags.
	Defaults Defaults
	// SendTest sends a test email to to through m (the SMTP settings a
	// PATCH asks for, before they are kept).
	SendTest func(ctx context.Context, m Mail, to string) error
	Logger   *slog.Logger
}

// Service keeps the site settings.
type Service struct {
	o Options

	mu sync.Mutex
	// onGeneral hear of the general settings whenever they change (on
	// this replica at once, on the others when Watch reads them).
	onGeneral []func(General)
	last      *General
}

// NewService returns the settings service; DB and SendTest are required.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.SendTest == nil {
		return nil, errors.New("sitesettings: DB and SendTest are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{o: o}, nil
}

// row reads a group's row: its stored attributes, its sealed secret
// opened (nil: none set) and when it last changed.
// In a transaction (tx) the row is locked until it ends.
func (s *Service) row(ctx context.Context, q store.Q, id string, attrs any) (secret *string, updated int64, err error) {
	var raw string
	var sealed sql.NullString
	lock := ""
	if tx, ok := q.(*store.Tx); ok {
		lock = store.ForUpdate(tx)
	}
	err = q.QueryRow(ctx, `SELECT attrs, secret, updated_at FROM site_settings WHERE id = ?`+lock, id).Scan(&raw, &sealed, &updated)
	if store.IsNoRows(err) {
		return nil, 0, nil // the migration makes the rows; an empty one is "nothing set"
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the %s settings: %w", id, err)
	}
	if err := json.Unmarshal([]byte(raw), attrs); err != nil {
		return nil, 0, fmt.Errorf("decoding the %s settings: %w", id, err)
	}
	if sealed.Valid {
		plain, err := s.o.Keys.OpenString(SecretColumn.Purpose, sealed.String)
		if err != nil {
			return nil, 0, fmt.Errorf("opening the %s settings' secret: %w", id, err)
		}
		secret = &plain
	}
	return secret, updated, nil
}

// write stores a group's attributes (and secret, when not nil) in q.
func (s *Service) write(ctx context.Context, q store.Q, id string, attrs any, secret *string) error {
	b, err := json.Marshal(attrs)
	if err != nil {
		return err
	}
	now := core.Micros(core.Now())
	if secret == nil {
		_, err = q.Exec(ctx, `INSERT INTO site_settings (id, attrs, updated_at) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET attrs = excluded.attrs, updated_at = excluded.updated_at`,
			id, string(b), now)
		return err
	}
	sealed, err := s.o.Keys.SealString(SecretColumn.Purpose, *secret)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO site_settings (id, attrs, secret, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET attrs = excluded.attrs, secret = excluded.secret, updated_at = excluded.updated_at`,
		id, string(b), sealed, now)
	return err
}

// General returns the general settings in force (the store's, read now),
// for the decisions that follow them; whoever asks.
func (s *Service) General(ctx context.Context) (General, error) {
	var a generalAttrs
	if _, _, err := s.row(ctx, s.o.DB, groupGeneral, &a); err != nil {
		return General{}, err
	}
	return a.general(s.o.Defaults), nil
}

// LimitUserOrganizationCreation reports whether only site admins create
// organizations (the authorization model's OrgCreate asks it).
func (s *Service) LimitUserOrganizationCreation(ctx context.Context) (bool, error) {
	g, err := s.General(ctx)
	return g.LimitUserOrganizationCreation, err
}

// DefaultRemoteStateAccess is global-remote-state of a workspace created
// without one.
func (s *Service) DefaultRemoteStateAccess(ctx context.Context) (bool, error) {
	g, err := s.General(ctx)
	return g.DefaultRemoteStateAccess, err
}

// Timeouts are a plan's and an apply's time limits.
func (s *Service) Timeouts(ctx context.Context) (plan, apply time.Duration, err error) {
	g, err := s.General(ctx)
	return g.PlanLimit, g.ApplyLimit, err
}

// UpdateGeneral applies a site admin's PATCH of the general settings (its
// attributes as sent) and returns the settings in force.
func (s *Service) UpdateGeneral(ctx context.Context, attrs map[string]json.RawMessage) (General, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return General{}, err
	}
	var g General
	err := s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		var stored generalAttrs
		if _, _, err := s.row(ctx, tx, groupGeneral, &stored); err != nil {
			return err
		}
		next, err := patchGeneral(stored, attrs)
		if err != nil {
			return err
		}
		g = next.general(s.o.Defaults)
		return s.write(ctx, tx, groupGeneral, next, nil)
	})
	if err != nil {
		return General{}, err
	}
	s.changed(g)
	// The other replicas keep the rate limit in memory: they read the
	// settings again now (the change is made, whether or not the caller
	// still waits; a lost wake-up reaches them within WatchEvery).
	if err := s.o.DB.NotifyOthers(context.WithoutCancel(ctx), Channel); err != nil {
		s.o.Logger.WarnContext(ctx, "telling the other replicas of the new site settings", "error", err)
	}
	return g, nil
}

// Mail returns the SMTP server email goes through now (password
// included: for sending, never for showing).
func (s *Service) Mail(ctx context.Context) (Mail, error) {
	var a mailAttrs
	password, _, err := s.row(ctx, s.o.DB, groupSMTP, &a)
	if err != nil {
		return Mail{}, err
	}
	return a.mail(s.o.Defaults.Mail, password), nil
}

// UpdateMail applies a site admin's PATCH of the SMTP settings (its
// attributes as sent) and returns the settings in force. With
// test-email-address and the settings enabled, a test email goes through
// the new settings first, and the change is kept only if the server
// accepted it; disabled settings send nothing, so there is nothing to
// test.
func (s *Service) UpdateMail(ctx context.Context, attrs map[string]json.RawMessage) (Mail, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return Mail{}, err
	}
	var problems []error
	for _, name := range sortedKeys(attrs) {
		if !slices.Contains(mailAttributes, name) {
			problems = append(problems, core.Invalid("%s is not an SMTP setting (%v)", name, mailAttributes))
		}
	}
	var p mailPatch
	raw, _ := json.Marshal(attrs)
	if err := json.Unmarshal(raw, &p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			problems = append(problems, core.Invalid("%s must be of type %s, not %s", te.Field, te.Type, te.Value))
		} else {
			problems = append(problems, core.BadRequest("attributes: %v", err))
		}
	}
	if len(problems) > 0 {
		return Mail{}, errors.Join(problems...)
	}
	// Checked (and tested) outside the transaction: the test email may
	// take seconds. The change is kept only if nothing changed meanwhile.
	var stored mailAttrs
	password, seen, err := s.row(ctx, s.o.DB, groupSMTP, &stored)
	if err != nil {
		return Mail{}, err
	}
	next, nextPassword, m, err := p.apply(stored, password, s.o.Defaults.Mail)
	if err != nil {
		return Mail{}, err
	}
	if p.TestEmailAddress != nil && m.Enabled {
		if err := s.o.SendTest(ctx, m, *p.TestEmailAddress); err != nil {
			return Mail{}, core.Invalid("the test email to %s could not be delivered through %s, so the SMTP settings were not changed: %v", *p.TestEmailAddress, m.Addr(), err)
		}
	}
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		var again mailAttrs
		if _, updated, err := s.row(ctx, tx, groupSMTP, &again); err != nil {
			return err
		} else if updated != seen {
			return core.Conflict("the SMTP settings changed while this change was checked: send it again")
		}
		secret := nextPassword
		if p.Password == nil {
			secret = nil // unchanged: the row keeps what it has
		}
		return s.write(ctx, tx, groupSMTP, next, secret)
	})
	if err != nil {
		return Mail{}, err
	}
	return m, nil
}

// OnGeneral registers fn to hear of the general settings whenever they
// change: on this replica as soon as a change commits, on the others when
// Watch reads it.
func (s *Service) OnGeneral(fn func(General)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onGeneral = append(s.onGeneral, fn)
}

// changed tells the OnGeneral functions of g, if it differs from what
// they last heard.
func (s *Service) changed(g General) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && *s.last == g {
		return
	}
	s.last = &g
	for _, fn := range s.onGeneral {
		fn(g)
	}
}

// Watch reads the general settings now, whenever another replica says it
// changed them (Channel) and every WatchEvery (every, when not zero; on
// SQLite every second) until ctx ends, and tells the OnGeneral functions
// of each change. It runs on every replica.
func (s *Service) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = WatchEvery
		if s.o.DB.Driver().Name() != "postgres" {
			every = watchSQLite
		}
	}
	wake := loops.NewWake()
	listened := make(chan struct{})
	go func() {
		defer close(listened)
		loops.Listen(ctx, s.o.DB, Channel, 5*time.Second, s.o.Logger, wake.Local)
	}()
	defer func() { <-listened }()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		g, err := s.General(ctx)
		if err == nil {
			s.changed(g)
		} else if ctx.Err() == nil {
			s.o.Logger.Warn("reading the site settings", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake.C():
		}
	}
}
