// Package forward sends HTTP requests through the agents of an agent pool
// (HCP Terraform's "request forwarding"): a run task whose service lives
// in a private network names a pool, and an agent of that pool, which
// reaches the service from inside, sends the request and reports the
// answer. Agents only ever call the server (internal/jobapi), so the
// request waits in the store until one claims it.
//
// The sender (Do) signs the request before it is stored: an agent sees
// the request as the service will, never the key that signed it.
package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// BodyColumn is the column sealed at rest (docs/design/storage.md).
var BodyColumn = seal.Column{Table: "agent_forwards", IDColumn: "id", Column: "body", Purpose: "agent_forwards.body"}

// Prefix is the ID prefix of forwarded requests.
const Prefix = "fwd"

const (
	statusPending = "pending"
	statusClaimed = "claimed"
	statusDone    = "done"
)

// Request is a POST to forward.
type Request struct {
	ID     string            `json:"id"`
	URL    string            `json:"url"`
	Header map[string]string `json:"header"`
	Body   []byte            `json:"body"`
	// Timeout is how long the agent may take to send it and read the
	// answer's status.
	Timeout time.Duration `json:"timeout"`
}

// Result is what an agent reports: the service's HTTP status, or the
// reason it has none (Status 0).
type Result struct {
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Service keeps forwarded requests.
type Service struct {
	db   *store.DB
	keys *seal.Keyring
	// Poll is how often a sender looks for its answer (250ms), and
	// ClaimPoll how often an agent's claim looks for a request another
	// replica stored (1s: a request stored on this replica wakes the
	// claims at once).
	Poll, ClaimPoll time.Duration
	// Live, when set, says whether an agent of a pool is running: Do
	// fails at once when none is, rather than wait for nobody.
	Live func(ctx context.Context, pool string) (bool, error)

	mu    sync.Mutex
	wakes map[string]chan struct{} // pool → closed when a request is stored
}

// New returns the service.
func New(db *store.DB, keys *seal.Keyring) *Service {
	return &Service{db: db, keys: keys, Poll: 250 * time.Millisecond, ClaimPoll: time.Second, wakes: map[string]chan struct{}{}}
}

// ErrNoAgent is Do's error when no agent of the pool claimed the request
// in time.
var ErrNoAgent = errors.New("no agent of the pool took the request")

// Do stores a request for an agent of pool and waits, until ctx ends, for
// an agent to send it and report; the answer is the service's status. A
// request no agent claimed before ctx ended is ErrNoAgent (wrapped), and
// is never sent after.
func (s *Service) Do(ctx context.Context, pool, url string, header map[string]string, body []byte) (Result, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return Result{}, errors.New("a forwarded request needs a deadline")
	}
	if s.Live != nil {
		live, err := s.Live(ctx, pool)
		if err != nil {
			return Result{}, err
		}
		if !live {
			return Result{}, fmt.Errorf("%w: none is running", ErrNoAgent)
		}
	}
	hdr, err := json.Marshal(header)
	if err != nil {
		return Result{}, err
	}
	sealed, err := s.keys.SealString(BodyColumn.Purpose, string(body))
	if err != nil {
		return Result{}, err
	}
	id := core.NewID(Prefix)
	now := core.Now()
	// What a sender that stopped (a crash, a restart) left behind: no
	// agent is given it, nobody reads its answer.
	if _, err := s.db.Exec(ctx, `DELETE FROM agent_forwards WHERE expires_at < ?`, core.Micros(now.Add(-time.Minute))); err != nil {
		return Result{}, fmt.Errorf("clearing old forwarded requests: %w", err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO agent_forwards (id, pool_id, url, header, body, status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		id, pool, url, string(hdr), sealed, statusPending, core.Micros(now), core.Micros(deadline)); err != nil {
		return Result{}, fmt.Errorf("storing the request for agent pool %s: %w", pool, err)
	}
	s.wake(pool)
	// The row goes whatever happens: the answer was read, or nobody will.
	defer func() {
		_, _ = s.db.Exec(context.WithoutCancel(ctx), `DELETE FROM agent_forwards WHERE id = ?`, id)
	}()
	tick := time.NewTicker(s.Poll)
	defer tick.Stop()
	status := statusPending // as last read
	for {
		var errText string
		var code int
		err := s.db.QueryRow(ctx, `SELECT status, response_status, error FROM agent_forwards WHERE id = ?`, id).Scan(&status, &code, &errText)
		if err != nil && ctx.Err() == nil {
			return Result{}, fmt.Errorf("reading the forwarded request: %w", err)
		}
		if err == nil && status == statusDone {
			return Result{Status: code, Error: errText}, nil
		}
		select {
		case <-ctx.Done():
			if status == statusClaimed {
				return Result{}, fmt.Errorf("the agent that took the request did not report its answer in time")
			}
			return Result{}, fmt.Errorf("%w in time (is an agent of the pool running?)", ErrNoAgent)
		case <-tick.C:
		}
	}
}

func (s *Service) wakeChan(pool string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.wakes[pool]
	if c == nil {
		c = make(chan struct{})
		s.wakes[pool] = c
	}
	return c
}

func (s *Service) wake(pool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.wakes[pool]; c != nil {
		close(c)
		delete(s.wakes, pool)
	}
}

// Claim waits until ctx ends for a request of pool, and gives it to
// agent: nil when none came. A request whose sender gave up is never
// given.
func (s *Service) Claim(ctx context.Context, pool, agent string) (*Request, error) {
	for {
		wake := s.wakeChan(pool)
		r, err := s.claimOne(ctx, pool, agent)
		if err != nil && ctx.Err() != nil {
			// The wait ended during a statement: nothing came. (A claim
			// the statement made is taken back by its sender's timeout.)
			return nil, nil
		}
		if err != nil || r != nil {
			return r, err
		}
		t := time.NewTimer(s.ClaimPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (s *Service) claimOne(ctx context.Context, pool, agent string) (*Request, error) {
	for {
		now := core.Micros(core.Now())
		var r Request
		var hdr, sealed string
		var expires int64
		err := s.db.QueryRow(ctx, `SELECT id, url, header, body, expires_at FROM agent_forwards WHERE pool_id = ? AND status = ? AND expires_at > ? ORDER BY created_at, id LIMIT 1`,
			pool, statusPending, now).Scan(&r.ID, &r.URL, &hdr, &sealed, &expires)
		if store.IsNoRows(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		res, err := s.db.Exec(ctx, `UPDATE agent_forwards SET status = ?, agent_id = ? WHERE id = ? AND status = ?`, statusClaimed, agent, r.ID, statusPending)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // another agent took it
		}
		if err := json.Unmarshal([]byte(hdr), &r.Header); err != nil {
			return nil, err
		}
		body, err := s.keys.OpenString(BodyColumn.Purpose, sealed)
		if err != nil {
			return nil, err
		}
		r.Body = []byte(body)
		r.Timeout = core.FromMicros(expires).Sub(core.Now())
		return &r, nil
	}
}

// maxError bounds the reason an agent gives for having no answer (it
// reaches the task result's message).
const maxError = 1024

// Report records the answer of a request the agent claimed. A request
// that is gone (its sender gave up) or is another agent's is not found.
func (s *Service) Report(ctx context.Context, pool, agent, id string, res Result) error {
	if len(res.Error) > maxError {
		res.Error = strings.ToValidUTF8(res.Error[:maxError], "") + "…"
	}
	r, err := s.db.Exec(ctx, `UPDATE agent_forwards SET status = ?, response_status = ?, error = ? WHERE id = ? AND pool_id = ? AND agent_id = ? AND status = ?`,
		statusDone, res.Status, res.Error, id, pool, agent, statusClaimed)
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return core.NotFound("forwarded request %s is not one this agent holds (its sender may have given up)", id)
	}
	return nil
}
