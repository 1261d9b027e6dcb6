package runtask

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/store"
)

// The delivery loop: the requests of running stages are the "run-task"
// topic of the outbox (internal/outbox), one item per result keyed by the
// result, enqueued in the transaction that starts the stage and sent until
// the service answers 200 or the attempts run out; at every pass the same
// loop errors results past their deadlines and finishes stages whose end a
// crash interrupted. Everything it needs is in the store, so a restarted
// server carries on where the last one stopped.

// requestTopic is the task requests' topic in the outbox.
const requestTopic = "run-task"

func (s *Service) newRequestQueue() (*outbox.Queue, error) {
	return outbox.New(outbox.Options{DB: s.o.DB, Topic: requestTopic, Handle: s.deliver, Logger: s.o.Logger,
		MaxAttempts: s.o.MaxAttempts, Backoff: s.o.Backoff, MaxBackoff: time.Minute,
		// A claim outlasts the request's timeout, with a margin to record.
		ClaimTTL: s.o.Timeout + 30*time.Second, Workers: 50, Poll: s.o.Poll, Each: s.watch})
}

// Wake is the delivery loop's wake-up (the server announces it to other
// replicas and wakes it when they announce theirs).
func (s *Service) Wake() *loops.Wake { return s.requests.Wake() }

func (s *Service) nudge() { s.requests.Wake().Signal() }

// Run sends task requests and watches deadlines until ctx ends, then waits
// for the requests in flight. claimant names this process in claims;
// claims of earlier processes of the same server (names starting with
// lostPrefix) are taken back at once, any other when it expires.
func (s *Service) Run(ctx context.Context, claimant, lostPrefix string) {
	s.repairSince = time.Time{} // the first pass looks at every stage
	s.requests.Run(ctx, claimant, lostPrefix)
}

// watch is the delivery loop's pass over deadlines and interrupted
// stages (outbox.Options.Each: only the loop's goroutine calls it).
func (s *Service) watch(ctx context.Context) {
	s.expire(ctx)
	started := core.Now()
	s.repair(ctx, s.repairSince)
	s.repairSince = started.Add(-time.Minute)
}

// deliver sends the request of one claimed item (its key is the result)
// and records the outcome on the result. When ctx ends mid-request the
// outbox records nothing: the claim is taken back after a restart and the
// request is sent again.
func (s *Service) deliver(ctx context.Context, it outbox.Item) (func(outbox.Outcome), error) {
	r, err := scanResult(s.o.DB.QueryRow(ctx, `SELECT `+resultCols+` FROM task_results WHERE id = ?`, it.Key))
	if store.IsNoRows(err) {
		return nil, nil // the run went, and its results with it
	}
	if err != nil {
		return nil, fmt.Errorf("reading task result %s: %w", it.Key, err)
	}
	if r.Status != ResultPending {
		return nil, nil // answered, timed out or overridden meanwhile: nothing to send
	}
	body, t, err := s.request(ctx, r)
	sendErr := err
	if err == nil {
		sendErr = s.send(ctx, t.AgentPoolID, r.TaskURL, t.hmacKey, body)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if sendErr == nil {
		if _, err := moveResult(ctx, s.o.DB, r, ResultRunning, "progress_deadline = ?", core.Micros(core.Now().Add(s.o.ProgressTimeout))); err != nil {
			s.o.Logger.Error("recording an accepted task request", "result", r.ID, "error", err)
		}
		return func(outbox.Outcome) { s.attempted(AttemptAccepted) }, nil
	}
	// The token of a refused request is never used: it goes, and the next
	// attempt mints its own.
	_ = s.o.Tokens.DeleteTokens(ctx, s.o.DB, auth.KindTaskResult, r.ID)
	if !it.Last {
		return func(outbox.Outcome) { s.attempted(AttemptRetry) }, sendErr
	}
	msg := fmt.Sprintf("The run task service did not accept the request after %d attempts: %v", it.Attempts, sendErr)
	if _, err := moveResult(ctx, s.o.DB, r, ResultErrored, "message = ?", msg); err != nil {
		// The result stays pending until its deadline errors it.
		s.o.Logger.Error("recording a failed task request", "result", r.ID, "error", err)
		return nil, sendErr
	}
	if err := s.evaluate(ctx, r.StageID); err != nil {
		s.o.Logger.Error("ending a task stage", "stage", r.StageID, "error", err)
	}
	return func(outbox.Outcome) { s.attempted(AttemptErrored) }, sendErr
}

// request builds the body of a result's request, with a fresh access
// token that lives until the result's deadline (and dies earlier, with the
// stage), and returns the task (its HMAC key and agent pool).
func (s *Service) request(ctx context.Context, r *Result) ([]byte, *Task, error) {
	st, err := scanStage(s.o.DB.QueryRow(ctx, `SELECT `+stageCols+` FROM task_stages WHERE id = ?`, r.StageID))
	if err != nil {
		return nil, nil, err
	}
	t, err := loadTask(ctx, s.o.DB, s.o.Keys, r.TaskID)
	if err != nil {
		return nil, nil, fmt.Errorf("the run task was deleted")
	}
	info, err := s.o.Runs.RunInfo(ctx, r.RunID)
	if err != nil {
		return nil, nil, err
	}
	var deadline int64
	if err := s.o.DB.QueryRow(ctx, `SELECT deadline FROM task_results WHERE id = ?`, r.ID).Scan(&deadline); err != nil {
		return nil, nil, err
	}
	exp := core.FromMicros(deadline)
	_, token, err := s.o.Tokens.CreateToken(ctx, s.o.DB, auth.NewToken{Kind: auth.KindTaskResult, Subject: r.ID,
		Description: "run task access token", ExpiredAt: &exp})
	if err != nil {
		return nil, nil, err
	}
	base := s.o.BaseURL
	wsURL := fmt.Sprintf("%s/app/%s/workspaces/%s", base, info.Organization, info.WorkspaceName)
	cvURL := fmt.Sprintf("%s/api/v2/configuration-versions/%s/download", base, info.ConfigVersionID)
	p := Payload{PayloadVersion: 1, Stage: st.Stage, AccessToken: token, Capabilities: Capabilities{Outcomes: true},
		ConfigurationVersionDownloadURL: &cvURL, ConfigurationVersionID: info.ConfigVersionID, IsSpeculative: info.Speculative,
		OrganizationName: info.Organization, RunAppURL: wsURL + "/runs/" + info.ID, RunCreatedAt: info.CreatedAt.UTC().Format(time.RFC3339),
		RunCreatedBy: info.CreatedBy, RunID: info.ID, RunMessage: info.Message,
		TaskResultCallbackURL: fmt.Sprintf("%s/api/v2/task-results/%s/callback", base, r.ID), TaskResultEnforcementLevel: r.Enforcement,
		TaskResultID: r.ID, WorkspaceAppURL: wsURL, WorkspaceID: info.WorkspaceID, WorkspaceName: info.WorkspaceName,
		WorkspaceWorkingDirectory: info.WorkingDirectory}
	if st.Stage != PrePlan {
		u := fmt.Sprintf("%s/api/v2/plans/%s/json-output", base, info.PlanID)
		p.PlanJSONAPIURL = &u
	}
	for _, f := range []struct {
		dst **string
		v   string
	}{{&p.VCSRepoURL, info.VCSRepoURL}, {&p.VCSBranch, info.VCSBranch}, {&p.VCSCommitURL, info.VCSCommitURL}, {&p.VCSPullRequestURL, info.VCSPullRequestURL}} {
		if f.v != "" {
			*f.dst = &f.v
		}
	}
	body, err := json.Marshal(p)
	return body, t, err
}

// expire errors the results past a deadline.
func (s *Service) expire(ctx context.Context) {
	now := core.Micros(core.Now())
	late, err := store.All(ctx, s.o.DB, scanResult, `SELECT `+resultCols+` FROM task_results WHERE status IN (?, ?) AND ((deadline > 0 AND deadline <= ?) OR (status = ? AND progress_deadline > 0 AND progress_deadline <= ?))`,
		string(ResultPending), string(ResultRunning), now, string(ResultRunning), now)
	if err != nil {
		if ctx.Err() == nil {
			s.o.Logger.Error("reading late task results", "error", err)
		}
		return
	}
	for _, r := range late {
		msg := fmt.Sprintf("The run task service sent no result within %s.", s.o.TotalTimeout)
		if r.Status == ResultRunning {
			msg = fmt.Sprintf("The run task service reported no progress for %s, or sent no result within %s.", s.o.ProgressTimeout, s.o.TotalTimeout)
		}
		ok, err := moveResult(ctx, s.o.DB, r, ResultErrored, "message = ?", msg)
		if err != nil || !ok {
			continue
		}
		_ = s.o.Tokens.DeleteTokens(ctx, s.o.DB, auth.KindTaskResult, r.ID)
		if err := s.evaluate(ctx, r.StageID); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("ending a task stage", "stage", r.StageID, "error", err)
		}
	}
}

// repair finishes what a crash may have cut short: running stages whose
// results are all final, and stages ended since (after a restart: ever)
// whose run still waits at them.
func (s *Service) repair(ctx context.Context, since time.Time) {
	stages, err := store.All(ctx, s.o.DB, scanStage, `SELECT `+stageCols+` FROM task_stages WHERE status = ? OR (status IN (?, ?, ?) AND updated_at >= ?)`,
		string(StageRunning), string(StagePassed), string(StageFailed), string(StageAwaitingOverride), core.Micros(since))
	if err != nil {
		return
	}
	for _, st := range stages {
		if st.Status == StageRunning {
			if s.o.Policies != nil {
				if err := s.o.Policies.Evaluate(ctx, st.ID); err != nil && ctx.Err() == nil {
					s.o.Logger.Error("evaluating the policies of a task stage", "stage", st.ID, "error", err)
				}
			}
			var open int
			if err := s.o.DB.QueryRow(ctx, `SELECT COUNT(*) FROM task_results WHERE stage_id = ? AND status IN (?, ?)`, st.ID, string(ResultPending), string(ResultRunning)).Scan(&open); err == nil && open == 0 {
				_ = s.evaluate(ctx, st.ID)
			}
			continue
		}
		waits, err := s.o.Runs.WaitsAtStage(ctx, st.RunID, toRunStage(st.Stage))
		if err != nil || !waits {
			continue
		}
		msg := ""
		if st.Status == StageFailed {
			msg = fmt.Sprintf("Mandatory run tasks at %s did not pass.", st.Stage)
		}
		if err := s.moveRun(ctx, st, msg); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("moving a run past its ended task stage", "run", st.RunID, "error", err)
		}
	}
}

// Outbox is the outbox queue of the task requests (the server hooks its metrics on).
func (s *Service) Outbox() *outbox.Queue { return s.requests }
