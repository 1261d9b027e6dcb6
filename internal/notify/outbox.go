package notify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
)

// status is a delivery's place in its lifecycle; deliveryMoves is the whole
// state machine (docs/design/notifications.md draws it).
type status string

const (
	pending   status = "pending"   // waiting until next_attempt_at
	sending   status = "sending"   // claimed; next_attempt_at is the end of the claim
	delivered status = "delivered" // a 2xx came back (final)
	failed    status = "failed"    // MaxAttempts used up, or the configuration was disabled (final)
)

var deliveryMoves = map[status][]status{
	pending: {sending},
	sending: {delivered, pending, failed},
}

// move changes a delivery's status if the table allows it and the row is
// still where the caller saw it (from, and the claim). It reports whether
// the row moved.
func move(ctx context.Context, q store.Q, id string, from, to status, set string, args ...any) (bool, error) {
	ok := false
	for _, s := range deliveryMoves[from] {
		ok = ok || s == to
	}
	if !ok {
		return false, fmt.Errorf("a notification delivery cannot go from %s to %s", from, to)
	}
	query := `UPDATE notification_deliveries SET status = ?, updated_at = ?`
	if set != "" {
		query += ", " + set
	}
	query += ` WHERE id = ? AND status = ?`
	all := append([]any{string(to), core.Micros(core.Now())}, args...)
	all = append(all, id, string(from))
	res, err := q.Exec(ctx, query, all...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// triggerOf says which trigger (and message) a run transition fires, if
// any. A run rests in needs_attention only if it is still there once the
// transaction committed (auto-apply passes through planned).
func triggerOf(t run.Transition) (Trigger, string, bool) {
	switch {
	case t.Run.PlanOnly:
		return "", "", false // speculative plans send none
	case t.From == "" && t.To == run.Pending:
		return RunCreated, "Run Created", true
	case t.To == run.Planning:
		return RunPlanning, "Run Planning", true
	case t.To.Confirmable() || t.To == run.PostPlanAwaitingDecision:
		if t.Run.Status != t.To {
			return "", "", false
		}
		return RunNeedsAttention, "Run Needs Attention", true
	case t.To == run.Applying:
		return RunApplying, "Run Applying", true
	case t.To == run.Applied:
		return RunCompleted, "Run Applied", true
	case t.To == run.PlannedAndFinished:
		return RunCompleted, "Run Planned and Finished", true
	case t.To == run.Errored:
		return RunErrored, "Run Errored", true
	case t.To == run.Canceled || t.To == run.ForceCanceled:
		return RunErrored, "Run Canceled", true
	}
	return "", "", false
}

// RunTransition puts a notification in the outbox for every enabled
// configuration of the run's workspace (and its project) that subscribes
// to what happened. It is a run.Service observer.
func (s *Service) RunTransition(ctx context.Context, t run.Transition) {
	trig, msg, ok := triggerOf(t)
	if !ok {
		return
	}
	if err := s.enqueue(ctx, t, trig, msg); err != nil {
		s.o.Logger.Error("queueing notifications", "run", t.Run.ID, "trigger", trig, "error", err)
	}
}

func (s *Service) enqueue(ctx context.Context, t run.Transition, trig Trigger, msg string) error {
	r, ws := t.Run, t.Workspace
	e := Event{Trigger: trig, Message: msg, RunID: r.ID, RunMessage: r.Message, RunCreatedAt: r.CreatedAt, RunCreatedBy: r.CreatedBy,
		RunStatus: string(t.To), RunUpdatedAt: r.UpdatedAt, WorkspaceID: ws.ID, WorkspaceName: ws.Name, Organization: r.Organization,
		RunURL: fmt.Sprintf("%s/app/%s/workspaces/%s/runs/%s", s.o.BaseURL, r.Organization, ws.Name, r.ID)}
	return s.enqueueEvent(ctx, ws.ID, ws.ProjectID, e)
}

// enqueueEvent puts e in the outbox for every enabled configuration of the
// workspace (and its project) that subscribes to e's trigger, in one
// transaction.
func (s *Service) enqueueEvent(ctx context.Context, workspaceID, projectID string, e Event) error {
	configs, err := store.All(ctx, s.o.DB, s.scan, `SELECT `+cols+` FROM notification_configurations WHERE enabled = ? AND ((subscribable_type = ? AND subscribable_id = ?) OR (subscribable_type = ? AND subscribable_id = ?))`,
		true, OnWorkspace, workspaceID, OnProject, projectID)
	if err != nil || len(configs) == 0 {
		return err
	}
	trig := e.Trigger
	now := core.Micros(core.Now())
	n := 0
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		for _, c := range configs {
			if !c.Subscribes(trig) || (c.Destination == Email && s.o.SMTP == nil) {
				continue
			}
			body, err := Body(c, e)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO notification_deliveries (id, configuration_id, trigger_name, body, status, attempts, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)`,
				core.NewID(prefixDelivery), c.ID, string(trig), string(body), string(pending), now, now, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err == nil && n > 0 {
		s.nudge()
	}
	return err
}

// Wake is the delivery loop's wake-up (the server announces it to other
// replicas and wakes it when they announce theirs).
func (s *Service) Wake() *loops.Wake { return s.wake }

func (s *Service) nudge() { s.wake.Signal() }

// backoff is the wait after the n-th failed attempt: Backoff doubled each
// time, capped at MaxBackoff.
func (s *Service) backoff(n int) time.Duration {
	d := s.o.Backoff
	for i := 1; i < n && d < s.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.o.MaxBackoff)
}

// claim is how long a claimed delivery stays away from other claimants:
// the request's timeout plus a margin to record the result.
func (s *Service) claim() time.Duration { return s.o.Timeout + 30*time.Second }

type due struct {
	id, configID string
	status       status
}

// Run delivers notifications until ctx ends, then waits for the requests
// in flight (which end with ctx). claimant names this process in claims;
// claims of other processes whose names start with lostPrefix (earlier
// processes of the same server) are taken back at once, and any claim is
// taken back when it expires.
func (s *Service) Run(ctx context.Context, claimant, lostPrefix string) {
	if lostPrefix != "" {
		if _, err := s.o.DB.Exec(ctx, `UPDATE notification_deliveries SET status = ?, claimed_by = '', next_attempt_at = ? WHERE status = ? AND claimed_by LIKE ? AND claimed_by <> ?`,
			string(pending), core.Micros(core.Now()), string(sending), lostPrefix+"%", claimant); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("taking back the notifications of an earlier process", "error", err)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	var pruned time.Time
	var mu sync.Mutex
	busy := map[string]bool{} // configurations with a request in flight
	done := make(chan struct{}, 1)
	for {
		if time.Since(pruned) > time.Hour {
			pruned = time.Now()
			if _, err := s.o.DB.Exec(ctx, `DELETE FROM notification_deliveries WHERE status IN (?, ?) AND updated_at < ?`,
				string(delivered), string(failed), core.Micros(core.Now().Add(-Retention))); err != nil && ctx.Err() == nil {
				s.o.Logger.Error("pruning old notification deliveries", "error", err)
			}
		}
		mu.Lock()
		free := s.o.Workers - len(busy)
		mu.Unlock()
		wait := 2 * time.Second
		if free > 0 {
			rows, err := store.All(ctx, s.o.DB, func(sc interface{ Scan(...any) error }) (due, error) {
				var d due
				err := sc.Scan(&d.id, &d.configID, &d.status)
				return d, err
			}, `SELECT id, configuration_id, status FROM notification_deliveries WHERE status IN (?, ?) AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT 100`,
				string(pending), string(sending), core.Micros(core.Now()))
			if err != nil && ctx.Err() == nil {
				s.o.Logger.Error("reading the notification outbox", "error", err)
			}
			for _, d := range rows {
				mu.Lock()
				skip := busy[d.configID] || len(busy) >= s.o.Workers
				mu.Unlock()
				if skip {
					continue
				}
				from := d.status
				if from == sending {
					// An expired claim: it goes back to pending first, so
					// that every move is one the table allows.
					if ok, err := move(ctx, s.o.DB, d.id, sending, pending, "claimed_by = ''"); err != nil || !ok {
						continue
					}
				}
				ok, err := move(ctx, s.o.DB, d.id, pending, sending, "claimed_by = ?, attempts = attempts + 1, next_attempt_at = ?",
					claimant, core.Micros(core.Now().Add(s.claim())))
				if err != nil || !ok {
					continue // another process took it
				}
				mu.Lock()
				busy[d.configID] = true
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.deliver(ctx, d.id)
					mu.Lock()
					delete(busy, d.configID)
					mu.Unlock()
					select {
					case done <- struct{}{}:
					default:
					}
				}()
			}
			if next, err := s.nextDue(ctx); err == nil && next > 0 {
				wait = min(wait, max(time.Until(core.FromMicros(next)), 0))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake.C():
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
}

func (s *Service) nextDue(ctx context.Context) (int64, error) {
	var next *int64
	err := s.o.DB.QueryRow(ctx, `SELECT MIN(next_attempt_at) FROM notification_deliveries WHERE status = ?`, string(pending)).Scan(&next)
	if err != nil || next == nil {
		return 0, err
	}
	return *next, nil
}

// deliver sends one claimed delivery and records the outcome. When ctx
// ends mid-request nothing is recorded: the claim is taken back after a
// restart (or when it expires) and the notification is sent again.
func (s *Service) deliver(ctx context.Context, id string) {
	var cfgID, body string
	var attempts int
	err := s.o.DB.QueryRow(ctx, `SELECT configuration_id, body, attempts FROM notification_deliveries WHERE id = ?`, id).Scan(&cfgID, &body, &attempts)
	if err != nil {
		if !store.IsNoRows(err) && ctx.Err() == nil {
			s.o.Logger.Error("reading a notification delivery", "delivery", id, "error", err)
		}
		return
	}
	c, err := s.scan(s.o.DB.QueryRow(ctx, `SELECT `+cols+` FROM notification_configurations WHERE id = ?`, cfgID))
	if err != nil {
		return // deleted: its deliveries went with it
	}
	if !c.Enabled {
		ok, err := move(ctx, s.o.DB, id, sending, failed, "last_error = ?", "the configuration was disabled before delivery")
		if err != nil && ctx.Err() == nil {
			s.o.Logger.Error("dropping a notification", "delivery", id, "error", err)
		}
		if ok {
			s.attemptDone(c.Destination, AttemptDropped)
		}
		return
	}
	resp := s.send(ctx, c, []byte(body))
	if ctx.Err() != nil {
		return
	}
	var outcome AttemptOutcome
	var moved bool
	switch {
	case resp.Successful:
		outcome = AttemptDelivered
		moved, err = move(ctx, s.o.DB, id, sending, delivered, "last_error = ''")
	case attempts >= s.o.MaxAttempts:
		outcome = AttemptFailed
		moved, err = move(ctx, s.o.DB, id, sending, failed, "last_error = ?", "gave up after "+strconv.Itoa(attempts)+" attempts: "+describe(resp))
	default:
		outcome = AttemptRetry
		moved, err = move(ctx, s.o.DB, id, sending, pending, "claimed_by = '', last_error = ?, next_attempt_at = ?",
			describe(resp), core.Micros(core.Now().Add(s.backoff(attempts))))
	}
	if moved {
		s.attemptDone(c.Destination, outcome)
	}
	if err == nil {
		err = s.record(ctx, c.ID, resp)
	}
	if err != nil && ctx.Err() == nil {
		s.o.Logger.Error("recording a notification delivery", "delivery", id, "configuration", c.ID, "error", err)
	}
}

// AttemptOutcome is what became of one delivery attempt, as OnAttempt
// hears it.
type AttemptOutcome string

const (
	AttemptDelivered AttemptOutcome = "delivered" // a 2xx came back
	AttemptRetry     AttemptOutcome = "retry"     // refused or unreachable; tried again later
	AttemptFailed    AttemptOutcome = "failed"    // refused on the last attempt: given up
	AttemptDropped   AttemptOutcome = "dropped"   // the configuration was disabled before delivery
)

// OnAttempt registers fn to hear the outcome of every delivery attempt
// this process records (metrics). Call it before Run; fn must be quick.
func (s *Service) OnAttempt(fn func(Destination, AttemptOutcome)) {
	s.onAttempt = append(s.onAttempt, fn)
}

func (s *Service) attemptDone(d Destination, o AttemptOutcome) {
	for _, fn := range s.onAttempt {
		fn(d, o)
	}
}

// Retention is how long delivered and failed outbox rows are kept.
const Retention = 7 * 24 * time.Hour

// maxResponseBody bounds what is kept of a destination's answer.
const maxResponseBody = 4 << 10

// send makes one request to the destination, bounded by Timeout: an
// HTTP POST, or for email a message through the SMTP server.
func (s *Service) send(ctx context.Context, c *Configuration, body []byte) Response {
	if c.Destination == Email {
		if s.o.SMTP == nil {
			return Response{URL: "smtp:", SentAt: core.Now().Truncate(time.Second), Headers: map[string][]string{},
				Body: "no SMTP server is configured"}
		}
		return s.sendMail(ctx, c, body)
	}
	r := Response{URL: c.URL, SentAt: core.Now().Truncate(time.Second), Headers: map[string][]string{}}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		r.Body = "invalid URL"
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Terrace/1.0 (notifications)")
	if c.Destination == Generic && c.token != "" {
		req.Header.Set("X-TFE-Notification-Signature", Sign(c.token, body))
	}
	res, err := s.o.HTTP.Do(req)
	if err != nil {
		// The error names the URL and the cause, never the token.
		r.Body = strings.TrimPrefix(err.Error(), "Post ")
		return r
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxResponseBody))
	r.Body = string(b)
	r.Code = strconv.Itoa(res.StatusCode)
	for k, v := range res.Header {
		r.Headers[strings.ToLower(k)] = v
	}
	r.Successful = res.StatusCode >= 200 && res.StatusCode < 300
	return r
}

// Pending counts the deliveries not yet final, for operators and tests.
func (s *Service) Pending(ctx context.Context) (int, error) {
	var n int
	err := s.o.DB.QueryRow(ctx, `SELECT COUNT(*) FROM notification_deliveries WHERE status IN (?, ?)`, string(pending), string(sending)).Scan(&n)
	return n, err
}
