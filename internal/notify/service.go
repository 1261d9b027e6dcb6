package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// Subscribables finds what configurations hang on. Organization returns
// the organization of a workspace, team or project the caller in ctx may
// see, and core.NotFound otherwise.
type Subscribables interface {
	Organization(ctx context.Context, kind, id string) (string, error)
	// Lock takes the row of the workspace, team or project for the rest
	// of q's transaction on PostgreSQL (nothing on SQLite), so that two
	// creates of its configurations count one after the other;
	// core.NotFound if it is gone (deleted since Organization read it).
	Lock(ctx context.Context, q store.Q, kind, id string) error
}

// Options configure a Service.
type Options struct {
	DB            *store.DB
	Subscribables Subscribables
	Logger        *slog.Logger
	// BaseURL is the server's https://host, for run links in payloads.
	BaseURL string
	// Timeout bounds one request to a destination. Defaults to 10s.
	Timeout time.Duration
	// Backoff is the wait after a first failed attempt; it doubles up to
	// MaxBackoff. Defaults to 1s and 10m.
	Backoff, MaxBackoff time.Duration
	// MaxAttempts ends retrying: the delivery is failed for good. Defaults
	// to 20 (about two hours with the default backoff).
	MaxAttempts int
	// Workers bounds concurrent deliveries. Defaults to 8.
	Workers int
	// HTTP sends requests; defaults to a client without a global timeout
	// (each request gets Timeout).
	HTTP *http.Client
	// SMTP returns the mail server email goes through now, nil when none
	// is (enabling an email configuration is then refused): the site's
	// SMTP settings, asked at each use. nil: never any.
	SMTP func(ctx context.Context) (*SMTP, error)
	// UserEmails resolves the users of email configurations.
	UserEmails UserEmails
	// Keys seals tokens at rest (TokenColumn); nil stores them as given.
	Keys *seal.Keyring
}

// The sealed columns of this domain (seal.Keyring.Migrate seals rows
// written before encryption at rest): the token, and the URL with what
// repeats it (Slack and Teams webhook URLs carry their secret in the path):
// the recorded delivery responses and the last failure.
var (
	TokenColumn     = seal.Column{Table: "notification_configurations", IDColumn: "id", Column: "token", Purpose: "notification_configurations.token"}
	URLColumn       = seal.Column{Table: "notification_configurations", IDColumn: "id", Column: "url", Purpose: "notification_configurations.url"}
	ResponsesColumn = seal.Column{Table: "notification_configurations", IDColumn: "id", Column: "delivery_responses", Purpose: "notification_configurations.delivery_responses"}
	FailureColumn   = seal.Column{Table: "notification_configurations", IDColumn: "id", Column: "last_failure", Purpose: "notification_configurations.last_failure"}
	SealedColumns   = []seal.Column{TokenColumn, URLColumn, ResponsesColumn, FailureColumn}
)

// scan reads a configuration and opens its sealed columns.
func (s *Service) scan(sc interface{ Scan(...any) error }) (*Configuration, error) {
	var c *Configuration
	err := scanWith(sc, func(col seal.Column, v string) (string, error) { return s.o.Keys.OpenString(col.Purpose, v) }, &c)
	return c, err
}

// sealed seals the values of the sealed columns in the order url, token,
// delivery_responses, last_failure.
func (s *Service) sealed(c *Configuration, responses, failure string) (url, token, resp, fail string, err error) {
	out := make([]string, 4)
	for i, v := range []struct {
		col seal.Column
		v   string
	}{{URLColumn, c.URL}, {TokenColumn, c.token}, {ResponsesColumn, responses}, {FailureColumn, failure}} {
		if out[i], err = s.o.Keys.SealString(v.col.Purpose, v.v); err != nil {
			return
		}
	}
	return out[0], out[1], out[2], out[3], nil
}

// Service manages configurations and their deliveries.
type Service struct {
	o         Options
	queue     *outbox.Queue // the "notification" topic of the outbox
	onAttempt []func(Destination, AttemptOutcome)
}

// NewService validates o and returns a service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Subscribables == nil {
		return nil, errors.New("notify: DB and Subscribables are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 20
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	s := &Service{o: o}
	var err error
	s.queue, err = outbox.New(outbox.Options{DB: o.DB, Topic: "notification", Handle: s.deliver, Logger: o.Logger,
		MaxAttempts: o.MaxAttempts, Backoff: o.Backoff, MaxBackoff: o.MaxBackoff, Workers: o.Workers,
		// A claim outlasts the request's timeout, with a margin to record.
		ClaimTTL: o.Timeout + 30*time.Second, Retention: Retention})
	return s, err
}

// access is what a configuration on a workspace, team or project needs,
// asked of the authorization model: reading one needs what listing its
// subscribable's configurations needs (the route rules of those lists), as
// a configuration carries its destination URL (a Slack or Teams webhook URL
// is a secret) and the responses it got; managing one needs changing the
// workspace's settings, or managing the team or the project.
var access = map[string]struct{ read, manage authz.Action }{
	OnWorkspace: {authz.WorkspaceRead, authz.WorkspaceUpdate},
	OnTeam:      {authz.TeamRead, authz.TeamManage},
	OnProject:   {authz.ProjectRead, authz.ProjectUpdate},
}

// authorize decides managing the configurations of a subscribable.
func authorize(ctx context.Context, org, kind, id string) error {
	res, err := subscribable(org, kind, id)
	if err != nil {
		return err
	}
	return authz.Allows(ctx, access[kind].manage, res)
}

// authorizeRead decides reading the configurations of a subscribable.
func authorizeRead(ctx context.Context, org, kind, id string) error {
	res, err := subscribable(org, kind, id)
	if err != nil {
		return err
	}
	return authz.Allows(ctx, access[kind].read, res)
}

func subscribable(org, kind, id string) (authz.Resource, error) {
	res := authz.Resource{Organization: org}
	switch kind {
	case OnWorkspace:
		res.WorkspaceID = id
	case OnTeam:
		res.TeamID = id
	case OnProject:
		res.ProjectID = id
	default:
		return res, core.Invalid("notification configurations belong to workspaces, teams or projects, not %q", kind)
	}
	return res, nil
}

const cols = `id, organization_name, subscribable_type, subscribable_id, name, destination_type, url, token, enabled, triggers, email_addresses, email_user_ids, delivery_responses, last_failure, created_at, updated_at`

// scanWith reads a configuration, passing each sealed column's value
// through open.
func scanWith(sc interface{ Scan(...any) error }, open func(seal.Column, string) (string, error), out **Configuration) error {
	var c Configuration
	var triggers, addrs, users, resp string
	var created, updated int64
	if err := sc.Scan(&c.ID, &c.Organization, &c.SubscribableType, &c.SubscribableID, &c.Name, &c.Destination, &c.URL, &c.token,
		&c.Enabled, &triggers, &addrs, &users, &resp, &c.LastFailure, &created, &updated); err != nil {
		return err
	}
	for _, f := range []struct {
		col seal.Column
		v   *string
	}{{URLColumn, &c.URL}, {TokenColumn, &c.token}, {ResponsesColumn, &resp}, {FailureColumn, &c.LastFailure}} {
		var err error
		if *f.v, err = open(f.col, *f.v); err != nil {
			return fmt.Errorf("notification configuration %s: %w", c.ID, err)
		}
	}
	for _, f := range []struct {
		raw string
		dst any
	}{{triggers, &c.Triggers}, {addrs, &c.EmailAddresses}, {users, &c.EmailUserIDs}, {resp, &c.Responses}} {
		if err := json.Unmarshal([]byte(f.raw), f.dst); err != nil {
			return fmt.Errorf("decoding notification configuration %s: %w", c.ID, err)
		}
	}
	c.CreatedAt, c.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	*out = &c
	return nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// List returns the configurations of a workspace, team or project.
func (s *Service) List(ctx context.Context, kind, id string) ([]*Configuration, error) {
	if _, err := s.o.Subscribables.Organization(ctx, kind, id); err != nil {
		return nil, err
	}
	return store.All(ctx, s.o.DB, s.scan, `SELECT `+cols+` FROM notification_configurations WHERE subscribable_type = ? AND subscribable_id = ? ORDER BY created_at, id`, kind, id)
}

// Create adds a configuration. An enabled configuration is verified first
// (a test request that must get a 2xx); when that fails nothing is saved.
func (s *Service) Create(ctx context.Context, kind, id string, o Changes) (*Configuration, error) {
	org, err := s.o.Subscribables.Organization(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, org, kind, id); err != nil {
		return nil, err
	}
	now := core.Now()
	c := &Configuration{ID: core.NewID(PrefixConfiguration), Organization: org, SubscribableType: kind, SubscribableID: id,
		Triggers: []string{}, EmailAddresses: []string{}, EmailUserIDs: []string{}, Responses: []Response{}, CreatedAt: now, UpdatedAt: now}
	if err := apply(c, o); err != nil {
		return nil, err
	}
	if err := s.checkEnable(ctx, c); err != nil {
		return nil, err
	}
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error { return s.insertCounted(ctx, tx, c) })
	if err != nil {
		return nil, err
	}
	return c, nil
}

// insertCounted inserts c unless its subscribable has MaxPerSubscribable
// configurations already. The subscribable's row is locked before the
// count: on PostgreSQL two creates at once both counted one under the
// limit and both inserted (before 2026-11-30); the second now waits for
// the first's insert and counts it. No row of notify's own stands for the
// subscribable (there may be no configuration yet), so the lock is the
// workspace's, team's or project's row, taken through Subscribables.Lock
// (the workspace's is the one the run queue takes, LockQueue). Rows are
// locked subscribable first, then configurations; nothing takes them the
// other way round (an update, a delivery's record and a delete lock one
// configuration's row and no subscribable's; the run queue, holding the
// workspace's row, touches no configuration: notifications are queued in
// a transaction of their own).
func (s *Service) insertCounted(ctx context.Context, tx *store.Tx, c *Configuration) error {
	if err := s.o.Subscribables.Lock(ctx, tx, c.SubscribableType, c.SubscribableID); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM notification_configurations WHERE subscribable_type = ? AND subscribable_id = ?`, c.SubscribableType, c.SubscribableID).Scan(&n); err != nil {
		return err
	}
	if n >= MaxPerSubscribable {
		kind := c.SubscribableType
		return core.Invalid("a %s can have at most %d notification configurations", kind[:len(kind)-1], MaxPerSubscribable)
	}
	url, token, resp, failure, err := s.sealed(c, jsonText(c.Responses), c.LastFailure)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO notification_configurations (`+cols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Organization, c.SubscribableType, c.SubscribableID, c.Name, string(c.Destination), url, token, c.Enabled,
		jsonText(c.Triggers), jsonText(c.EmailAddresses), jsonText(c.EmailUserIDs), resp, failure,
		core.Micros(c.CreatedAt), core.Micros(c.UpdatedAt))
	return redact(err, c.token)
}

// apply sets the given options on c and validates the result.
func apply(c *Configuration, o Changes) error {
	if o.Name != nil {
		c.Name = *o.Name
	}
	if o.Destination != nil {
		c.Destination = *o.Destination
	}
	if o.URL != nil {
		c.URL = *o.URL
	}
	if o.Token != nil {
		c.token = *o.Token
	}
	if o.Enabled != nil {
		c.Enabled = *o.Enabled
	}
	if o.Triggers != nil {
		c.Triggers = nonNil(*o.Triggers)
	}
	if o.EmailAddrs != nil {
		c.EmailAddresses = nonNil(*o.EmailAddrs)
	}
	if o.EmailUserIDs != nil {
		c.EmailUserIDs = nonNil(*o.EmailUserIDs)
	}
	if c.Destination != Email && (len(c.EmailUserIDs) > 0 || len(c.EmailAddresses) > 0) {
		return core.Invalid("users and email-addresses are only for email destinations")
	}
	return validate(c)
}

// errNoSMTP refuses email when the server has no SMTP server configured.
var errNoSMTP = core.Invalid("email notifications need an SMTP server, and this server has none enabled (terrace server --smtp-addr, or a site admin's SMTP settings): use a generic, slack or microsoft-teams destination, or save the configuration disabled")

// mailServer is the SMTP server email goes through now (nil: none).
func (s *Service) mailServer(ctx context.Context) (*SMTP, error) {
	if s.o.SMTP == nil {
		return nil, nil
	}
	m, err := s.o.SMTP(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the SMTP settings: %w", err)
	}
	return m, nil
}

// requireMail is errNoSMTP when no SMTP server is enabled.
func (s *Service) requireMail(ctx context.Context) error {
	m, err := s.mailServer(ctx)
	if err == nil && m == nil {
		return errNoSMTP
	}
	return err
}

// checkEnable verifies an enabled configuration: email needs an SMTP
// server (its recipients verify it, as in HCP Terraform: nothing is sent),
// the others a 2xx to a test request. The response is kept on c either way.
func (s *Service) checkEnable(ctx context.Context, c *Configuration) error {
	if !c.Enabled {
		return nil
	}
	if c.Destination == Email {
		return s.requireMail(ctx)
	}
	resp := s.send(ctx, c, mustBody(c, verificationEvent()))
	c.Responses = keep(c.Responses, resp)
	if !resp.Successful {
		return core.BadRequest("verification of the notification configuration failed: %s answered %s", c.URL, describe(resp))
	}
	return nil
}

func describe(r Response) string {
	if r.Code == "" {
		if r.cause != "" {
			return "nothing (" + r.cause + ")"
		}
		return "nothing (" + r.Body + ")"
	}
	return "HTTP " + r.Code
}

func mustBody(c *Configuration, e Event) []byte {
	b, err := Body(c, e)
	if err != nil {
		panic(fmt.Sprintf("encoding a notification payload: %v", err)) // plain structs: cannot fail
	}
	return b
}

func keep(rs []Response, r Response) []Response {
	out := append([]Response{r}, rs...)
	if len(out) > maxResponses {
		out = out[:maxResponses]
	}
	return out
}

func (s *Service) load(ctx context.Context, q store.Q, id string, forUpdate bool) (*Configuration, error) {
	if !core.HasPrefix(id, PrefixConfiguration) {
		return nil, core.NotFound("notification configuration %q not found", id)
	}
	query := `SELECT ` + cols + ` FROM notification_configurations WHERE id = ?`
	if forUpdate {
		query += store.ForUpdate(q)
	}
	c, err := s.scan(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("notification configuration %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.o.Subscribables.Organization(ctx, c.SubscribableType, c.SubscribableID); err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return nil, core.NotFound("notification configuration %q not found", id)
		}
		return nil, err
	}
	return c, nil
}

// Get returns a configuration the caller may see: one of a workspace,
// team or project whose configurations the caller may list. Any other is
// not found, as the list of its subscribable is.
func (s *Service) Get(ctx context.Context, id string) (*Configuration, error) {
	c, err := s.load(ctx, s.o.DB, id, false)
	if err != nil {
		return nil, err
	}
	if err := authorizeRead(ctx, c.Organization, c.SubscribableType, c.SubscribableID); err != nil {
		return nil, core.NotFoundAs(err, "notification configuration %q not found", id)
	}
	return c, nil
}

// Update changes a configuration; turning it on (or changing where an
// enabled one sends) verifies it first.
func (s *Service) Update(ctx context.Context, id string, o Changes) (*Configuration, error) {
	c, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, c.Organization, c.SubscribableType, c.SubscribableID); err != nil {
		return nil, err
	}
	if o.Destination != nil && *o.Destination != c.Destination {
		return nil, core.Invalid("destination-type cannot be changed")
	}
	// The verification (a request to the destination) is made before the
	// transaction, on the configuration as read unlocked; the changes are
	// applied again, in the transaction, to the row read locked.
	checked := *c
	checked.Responses = nil
	if err := apply(&checked, o); err != nil {
		return nil, err
	}
	verify := needsCheck(c, &checked)
	if verify {
		if err := s.checkEnable(ctx, &checked); err != nil {
			return nil, err
		}
	}
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		// Locked, and the changes applied to what it holds now: before
		// (2026-11-30) the row read before the transaction was written
		// back whole, and a change committed meanwhile (or a delivery's
		// response, which record writes on this row locked) was lost.
		// The configuration's row is the only one locked here.
		var err error
		if c, err = s.load(ctx, tx, id, true); err != nil {
			return err
		}
		was := *c
		if err := apply(c, o); err != nil {
			return err
		}
		if needsCheck(&was, c) && (!verify || c.URL != checked.URL || c.token != checked.token) {
			// Changed meanwhile: what was verified is not what is saved.
			return core.Conflict("notification configuration %s changed while it was being verified; try again", id)
		}
		for i := len(checked.Responses) - 1; i >= 0; i-- {
			c.Responses = keep(c.Responses, checked.Responses[i])
		}
		c.UpdatedAt = core.Now()
		url, token, resp, _, err := s.sealed(c, jsonText(c.Responses), "")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE notification_configurations SET name = ?, url = ?, token = ?, enabled = ?, triggers = ?, email_addresses = ?, email_user_ids = ?, delivery_responses = ?, updated_at = ? WHERE id = ?`,
			c.Name, url, token, c.Enabled, jsonText(c.Triggers), jsonText(c.EmailAddresses), jsonText(c.EmailUserIDs), resp, core.Micros(c.UpdatedAt), c.ID)
		return redact(err, c.token)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// needsCheck reports whether a configuration changed from was to now is
// one to verify: enabled now when it was not, or enabled with another URL
// or token.
func needsCheck(was, now *Configuration) bool {
	return now.Enabled && (!was.Enabled || now.URL != was.URL || now.token != was.token)
}

// Delete removes a configuration and its undelivered notifications.
func (s *Service) Delete(ctx context.Context, id string) error {
	c, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := authorize(ctx, c.Organization, c.SubscribableType, c.SubscribableID); err != nil {
		return err
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM notification_configurations WHERE id = ?`, c.ID); err != nil {
			return err
		}
		return s.queue.ForgetLane(ctx, tx, c.ID) // its notifications go with it
	})
}

// Verify sends the test request and records the response on the
// configuration; a failed verification is visible there, not an error.
func (s *Service) Verify(ctx context.Context, id string) (*Configuration, error) {
	c, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, c.Organization, c.SubscribableType, c.SubscribableID); err != nil {
		return nil, err
	}
	if c.Destination == Email {
		if err := s.requireMail(ctx); err != nil {
			return nil, err
		}
	}
	resp := s.send(ctx, c, mustBody(c, verificationEvent()))
	if err := s.record(ctx, c.ID, resp); err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// record keeps a response on the configuration.
func (s *Service) record(ctx context.Context, id string, r Response) error {
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		var raw string
		err := tx.QueryRow(ctx, `SELECT delivery_responses FROM notification_configurations WHERE id = ?`+store.ForUpdate(tx), id).Scan(&raw)
		if store.IsNoRows(err) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if raw, err = s.o.Keys.OpenString(ResponsesColumn.Purpose, raw); err != nil {
			return fmt.Errorf("notification configuration %s: %w", id, err)
		}
		var rs []Response
		if err := json.Unmarshal([]byte(raw), &rs); err != nil {
			return err
		}
		failure := ""
		if !r.Successful {
			failure = fmt.Sprintf("%s: %s answered %s", r.SentAt.Format(time.RFC3339), r.URL, describe(r))
		}
		resp, err := s.o.Keys.SealString(ResponsesColumn.Purpose, jsonText(keep(rs, r)))
		if err != nil {
			return err
		}
		if failure, err = s.o.Keys.SealString(FailureColumn.Purpose, failure); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE notification_configurations SET delivery_responses = ?, last_failure = ? WHERE id = ?`, resp, failure, id)
		return err
	})
}

// DeleteSubscribable removes the configurations of a deleted workspace,
// team or project (a delete hook of those domains).
func DeleteSubscribable(ctx context.Context, q store.Q, id string) error {
	_, err := q.Exec(ctx, `DELETE FROM notification_configurations WHERE subscribable_id = ?`, id)
	return err
}

// redact keeps a driver error from carrying a token into a log.
func redact(err error, token string) error {
	if err == nil || token == "" {
		return err
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	return errors.New("database error (details withheld: the statement carried a token)")
}
