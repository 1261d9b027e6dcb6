package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
)

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
	var msgs []outbox.Message
	mailChecked, canMail := false, false
	for _, c := range configs {
		if !c.Subscribes(trig) {
			continue
		}
		if c.Destination == Email {
			if !mailChecked {
				m, err := s.mailServer(ctx)
				if err != nil {
					return err
				}
				mailChecked, canMail = true, m != nil
			}
			if !canMail {
				continue
			}
		}
		body, err := Body(c, e)
		if err != nil {
			return err
		}
		msgs = append(msgs, outbox.Message{Key: core.NewID(prefixDelivery), Lane: c.ID, Payload: string(body)})
	}
	if len(msgs) == 0 {
		return nil
	}
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		_, err := s.queue.Enqueue(ctx, tx, msgs...)
		return err
	})
	if err == nil {
		s.nudge()
	}
	return err
}

// Wake is the delivery loop's wake-up (the server announces it to other
// replicas and wakes it when they announce theirs).
func (s *Service) Wake() *loops.Wake { return s.queue.Wake() }

func (s *Service) nudge() { s.queue.Wake().Signal() }

// Run delivers notifications until ctx ends, then waits for the requests
// in flight (which end with ctx). claimant names this process in claims;
// claims of other processes whose names start with lostPrefix (earlier
// processes of the same server) are taken back at once, and any claim is
// taken back when it expires.
func (s *Service) Run(ctx context.Context, claimant, lostPrefix string) {
	s.queue.Run(ctx, claimant, lostPrefix)
}

// deliver sends one claimed notification (an outbox item: its lane is the
// configuration, its payload the body) and records the response on the
// configuration. When ctx ends mid-request the outbox records nothing:
// the claim is taken back after a restart (or when it expires) and the
// notification is sent again.
func (s *Service) deliver(ctx context.Context, it outbox.Item) (func(outbox.Outcome), error) {
	c, err := s.scan(s.o.DB.QueryRow(ctx, `SELECT `+cols+` FROM notification_configurations WHERE id = ?`, it.Lane))
	if store.IsNoRows(err) {
		return nil, nil // deleted: its notifications go with it
	}
	if err != nil {
		return nil, fmt.Errorf("reading notification configuration %s: %w", it.Lane, err)
	}
	if !c.Enabled {
		return func(outbox.Outcome) { s.attemptDone(c.Destination, AttemptDropped) },
			outbox.Permanent(errors.New("the configuration was disabled before delivery"))
	}
	resp := s.send(ctx, c, []byte(it.Payload))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := s.record(ctx, c.ID, resp); err != nil && ctx.Err() == nil {
		s.o.Logger.Error("recording a notification delivery", "delivery", it.Key, "configuration", c.ID, "error", err)
	}
	after := func(o outbox.Outcome) {
		switch o {
		case outbox.Handled:
			s.attemptDone(c.Destination, AttemptDelivered)
		case outbox.Retry:
			s.attemptDone(c.Destination, AttemptRetry)
		default:
			s.attemptDone(c.Destination, AttemptFailed)
		}
	}
	if !resp.Successful {
		return after, errors.New(describe(resp))
	}
	return after, nil
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

// Retention is how long failed notifications stay in the outbox (a
// delivered one leaves it at once).
const Retention = 7 * 24 * time.Hour

// maxResponseBody bounds what is kept of a destination's answer.
const maxResponseBody = 4 << 10

// send makes one request to the destination, bounded by Timeout: an
// HTTP POST, or for email a message through the SMTP server.
func (s *Service) send(ctx context.Context, c *Configuration, body []byte) Response {
	if c.Destination == Email {
		m, err := s.mailServer(ctx)
		if err != nil || m == nil {
			why := "no SMTP server is enabled"
			if err != nil {
				why = err.Error()
			}
			return Response{URL: "smtp:", SentAt: core.Now().Truncate(time.Second), Headers: map[string][]string{}, Body: why}
		}
		return s.sendMail(ctx, m, c, body)
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
		// The body names the URL and the cause, never the token; the
		// cause alone goes to the outbox's reason and the server's log,
		// since a webhook URL can itself be a secret (sealed at rest).
		r.Body = strings.TrimPrefix(err.Error(), "Post ")
		r.cause = r.Body
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			r.cause = ue.Err.Error()
		}
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
func (s *Service) Pending(ctx context.Context) (int, error) { return s.queue.Pending(ctx) }

// Outbox is the outbox queue of the notifications (the server hooks its metrics on).
func (s *Service) Outbox() *outbox.Queue { return s.queue }
