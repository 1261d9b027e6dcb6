package trigger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
)

// Derived dependencies. A run of workspace B that reads workspace A's
// state with its run token (terraform_remote_state with the remote or
// cloud backend, tfe_outputs) records the edge A → B with a digest of each
// of A's outputs as B saw them. When a run of A applies and one of those
// outputs changed, B gets a run; an apply that changes none starts
// nothing. An edge that B's latest finished run did not read (no read
// since that run was created) is dropped,
// as is one whose producer is deleted (foreign key). An edge that would
// close a cycle is kept, marked, listed on both workspaces, and never
// fired.

// Edge is a dependency between two workspaces, declared or derived.
type Edge struct {
	Kind         string // "declared" or "derived"
	ProducerID   string
	ProducerName string
	ConsumerID   string
	ConsumerName string
	// Outputs are the producer's outputs a derived edge carries.
	Outputs []string
	// Cycle is set on a derived edge that would close a cycle.
	Cycle     bool
	RunID     string // the consumer's run that last read the producer
	UpdatedAt time.Time
}

func digest(v []byte) string {
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:])
}

// RecordRead notes that runID, a run of consumerID, read producerID's
// state. It is called on every state read by a run token of another
// workspace, so it is idempotent.
func (s *Service) RecordRead(ctx context.Context, producerID, consumerID, runID string) error {
	if producerID == consumerID {
		return nil
	}
	outs, err := s.o.Outputs(ctx, producerID)
	if err != nil {
		return err
	}
	producer, err := s.o.Workspaces.System(ctx, producerID)
	if err != nil {
		return err
	}
	read := s.outputsReadBy(ctx, runID, producer)
	seen := map[string]string{}
	for name, v := range outs {
		if read.all || read.names[name] {
			seen[name] = digest(v)
		}
	}
	speculative := false
	if s.o.Speculative != nil {
		if speculative, err = s.o.Speculative(ctx, runID); err != nil {
			return err
		}
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		cycle, err := s.pathFrom(ctx, tx, consumerID, producerID)
		if err != nil {
			return err
		}
		now := core.Micros(core.Now())
		if speculative {
			// A plan-only run (a speculative plan, a health assessment)
			// keeps the edge but not what it saw: the digests stay those
			// of the consumer's last real run, so a queued fan-out of the
			// producer still finds its changed outputs.
			res, err := tx.Exec(ctx, `UPDATE derived_edges SET updated_at = ? WHERE producer_id = ? AND consumer_id = ?`, now, producerID, consumerID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				return nil
			}
		}
		res, err := tx.Exec(ctx, `UPDATE derived_edges SET run_id = ?, outputs = ?, cycle = ?, updated_at = ? WHERE producer_id = ? AND consumer_id = ?`,
			runID, jsonText(seen), cycle, now, producerID, consumerID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO derived_edges (producer_id, consumer_id, organization_name, run_id, outputs, cycle, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			producerID, consumerID, producer.Organization, runID, jsonText(seen), cycle, now)
		if store.IsUniqueViolation(tx, err) {
			return nil // recorded by a concurrent read of the same run
		}
		if err == nil && cycle {
			s.o.Logger.Warn("a derived dependency would close a cycle: it is recorded and never fired",
				"producer", producerID, "consumer", consumerID, "run", runID)
		}
		return err
	})
}

// outputsReadBy is which of producer's outputs the configuration of
// runID reads (every output when that cannot be told).
func (s *Service) outputsReadBy(ctx context.Context, runID string, producer *Workspace) readSet {
	if s.o.RunConfig == nil {
		return readSet{all: true}
	}
	archive, err := s.o.RunConfig(ctx, runID)
	if err != nil {
		s.o.Logger.Warn("reading a consumer's configuration: its derived edge carries every output", "run", runID, "error", err)
		return readSet{all: true}
	}
	return outputsRead(archive, producer.Organization, producer.Name)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

type derivedRow struct {
	producer, consumer, runID, outputs string
	cycle                              bool
	updated                            int64
}

func scanDerived(sc interface{ Scan(...any) error }) (derivedRow, error) {
	var d derivedRow
	err := sc.Scan(&d.producer, &d.consumer, &d.runID, &d.outputs, &d.cycle, &d.updated)
	return d, err
}

const derivedCols = `producer_id, consumer_id, run_id, outputs, cycle, updated_at`

// Dependencies lists a workspace's edges, declared and derived, in both
// directions.
func (s *Service) Dependencies(ctx context.Context, workspaceID string) ([]*Edge, error) {
	if _, err := s.o.Workspaces.Get(ctx, workspaceID); err != nil {
		return nil, err
	}
	var out []*Edge
	names := map[string]string{}
	name := func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		if w, err := s.o.Workspaces.System(ctx, id); err == nil {
			names[id] = w.Name
		}
		return names[id]
	}
	for _, dir := range []string{"inbound", "outbound"} {
		ts, err := s.List(ctx, workspaceID, dir)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			out = append(out, &Edge{Kind: "declared", ProducerID: t.SourceableID, ProducerName: t.SourceableName,
				ConsumerID: t.WorkspaceID, ConsumerName: t.WorkspaceName, Outputs: []string{}, UpdatedAt: t.CreatedAt})
		}
	}
	rows, err := store.All(ctx, s.o.DB, scanDerived, `SELECT `+derivedCols+` FROM derived_edges WHERE producer_id = ? OR consumer_id = ? ORDER BY updated_at`, workspaceID, workspaceID)
	if err != nil {
		return nil, err
	}
	for _, d := range rows {
		var outs map[string]string
		_ = json.Unmarshal([]byte(d.outputs), &outs)
		names := make([]string, 0, len(outs))
		for n := range outs {
			names = append(names, n)
		}
		sort.Strings(names)
		out = append(out, &Edge{Kind: "derived", ProducerID: d.producer, ProducerName: name(d.producer), ConsumerID: d.consumer,
			ConsumerName: name(d.consumer), Outputs: names, Cycle: d.cycle, RunID: d.runID, UpdatedAt: core.FromMicros(d.updated)})
	}
	return out, nil
}

// RunTransition is the run.Service observer: when a run applies, it
// queues runs in the workspaces that depend on its workspace (declared
// triggers always, derived edges when an output they carry changed), and
// when a consumer's run finishes it drops the derived edges that run did
// not read.
func (s *Service) RunTransition(ctx context.Context, t run.Transition) {
	if t.Run.PlanOnly {
		return
	}
	if t.To == run.Applied || t.To == run.PlannedAndFinished {
		// Edges not read since this run was created are no longer read (a
		// speculative plan's read in between keeps them, conservatively).
		if _, err := s.o.DB.Exec(ctx, `DELETE FROM derived_edges WHERE consumer_id = ? AND updated_at < ?`, t.Run.WorkspaceID, core.Micros(t.Run.CreatedAt)); err != nil {
			s.o.Logger.Error("dropping derived dependencies no longer read", "workspace", t.Run.WorkspaceID, "error", err)
		}
	}
	if t.To != run.Applied {
		return
	}
	// The fan-out itself happens in the fan-out loop (fanout.go), from a
	// row that survives a crash.
	if err := s.enqueueFanOut(ctx, t.Run.ID, t.Run.WorkspaceID); err != nil {
		s.o.Logger.Error("queueing the fan-out of an apply", "workspace", t.Run.WorkspaceID, "run", t.Run.ID, "error", err)
	}
}

type target struct {
	id     string
	reason string // "declared" or the derived outputs that changed
}

// fanOut queues the dependent runs of srcRunID, an applied run of
// srcWS. Done again after a crash, it finishes its own unfinished claims
// and skips the targets it already queued.
func (s *Service) fanOut(ctx context.Context, srcRunID string, srcWS *Workspace) error {
	src := srcWS.ID
	var targets []target
	declared, err := store.All(ctx, s.o.DB, scanEdge, `SELECT `+cols+` FROM run_triggers WHERE sourceable_id = ? ORDER BY created_at, id`, src)
	if err != nil {
		return err
	}
	for _, e := range declared {
		targets = append(targets, target{id: e.target, reason: "declared"})
	}
	derived, err := store.All(ctx, s.o.DB, scanDerived, `SELECT `+derivedCols+` FROM derived_edges WHERE producer_id = ? AND cycle = ? ORDER BY consumer_id`, src, false)
	if err != nil {
		return err
	}
	if len(derived) > 0 {
		outs, err := s.o.Outputs(ctx, src)
		if err != nil {
			return err
		}
		for _, d := range derived {
			var seen map[string]string
			if err := json.Unmarshal([]byte(d.outputs), &seen); err != nil {
				return err
			}
			var changed []string
			for name, sum := range seen {
				if v, ok := outs[name]; !ok || digest(v) != sum {
					changed = append(changed, name)
				}
			}
			if len(changed) > 0 {
				on, err := s.derivedOn(ctx, d.consumer)
				if err != nil {
					return err
				}
				if !on {
					continue
				}
				sort.Strings(changed)
				targets = append(targets, target{id: d.consumer, reason: fmt.Sprint(changed)})
			}
		}
	}
	if len(targets) == 0 {
		return nil
	}
	// Origins older than a day have long finished their chains.
	if _, err := s.o.DB.Exec(ctx, `DELETE FROM trigger_origins WHERE created_at < ?`, core.Micros(core.Now().Add(-24*time.Hour))); err != nil {
		return err
	}
	if _, err := s.o.DB.Exec(ctx, `DELETE FROM triggered_runs WHERE created_at < ?`, core.Micros(core.Now().Add(-30*24*time.Hour))); err != nil {
		return err
	}
	origin := srcRunID
	var o string
	if err := s.o.DB.QueryRow(ctx, `SELECT origin_run_id FROM triggered_runs WHERE run_id = ?`, srcRunID).Scan(&o); err == nil {
		origin = o
	} else if !store.IsNoRows(err) {
		return err
	}
	// The origin's own workspace is never queued again by its chain.
	if err := s.claim(ctx, origin, src, srcRunID); err != nil && !isTaken(err) {
		return err
	}
	var failed error
	for _, tg := range targets {
		if err := s.claim(ctx, origin, tg.id, srcRunID); err != nil {
			if isTaken(err) {
				continue // this origin already queued a run there
			}
			s.o.Logger.Warn("not queueing a dependent run", "origin", origin, "target", tg.id, "error", err)
			continue
		}
		if err := s.queue(ctx, srcRunID, srcWS.Name, origin, tg); err != nil {
			kind := core.KindOf(err)
			if kind == core.KindInvalid || kind == core.KindConflict || kind == core.KindNotFound {
				// Final: the target cannot take a run (local execution,
				// no configuration, …). Reported, not retried.
				s.o.Logger.Error("a dependent run cannot be queued", "source_run", srcRunID, "target", tg.id, "error", err)
				if _, err := s.o.DB.Exec(ctx, `UPDATE trigger_origins SET run_id = ? WHERE origin_run_id = ? AND workspace_id = ?`, "none", origin, tg.id); err != nil {
					return err
				}
				continue
			}
			failed = fmt.Errorf("queueing a run in %s: %w", tg.id, err)
		}
	}
	return failed
}

type takenError struct{}

func (takenError) Error() string { return "already queued for this origin" }

func isTaken(err error) bool { _, ok := err.(takenError); return ok }

// claim reserves one run in a workspace for an origin apply, within the
// fan-out bound. A claim made by the same source run that has no run yet
// (a fan-out interrupted between its claim and its run) is this fan-out's
// own and is not taken.
func (s *Service) claim(ctx context.Context, origin, workspaceID, sourceRunID string) error {
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		var src, runID string
		err := tx.QueryRow(ctx, `SELECT source_run_id, run_id FROM trigger_origins WHERE origin_run_id = ? AND workspace_id = ?`+store.ForUpdate(tx), origin, workspaceID).Scan(&src, &runID)
		if err == nil {
			if src == sourceRunID && runID == "" {
				return nil
			}
			return takenError{}
		}
		if !store.IsNoRows(err) {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM trigger_origins WHERE origin_run_id = ?`, origin).Scan(&n); err != nil {
			return err
		}
		if n > s.o.MaxFanOut {
			return fmt.Errorf("origin run %s already queued %d runs, the most one apply may start", origin, s.o.MaxFanOut)
		}
		_, err = tx.Exec(ctx, `INSERT INTO trigger_origins (origin_run_id, workspace_id, source_run_id, created_at) VALUES (?, ?, ?, ?)`, origin, workspaceID, sourceRunID, core.Micros(core.Now()))
		if store.IsUniqueViolation(tx, err) {
			return takenError{}
		}
		return err
	})
}

// queue creates the dependent run, retrying a failed creation with
// doubling waits.
func (s *Service) queue(ctx context.Context, srcRunID, srcName, origin string, tg target) error {
	target, err := s.o.Workspaces.System(ctx, tg.id)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Triggered by run trigger: workspace %q applied %s", srcName, srcRunID)
	if tg.reason != "declared" {
		msg = fmt.Sprintf("Triggered by a dependency: workspace %q applied %s, changing outputs %s that this workspace reads", srcName, srcRunID, tg.reason)
	}
	auto := target.AutoApplyRunTrigger || target.AutoApply
	if tg.reason == "declared" {
		auto = target.AutoApplyRunTrigger
	}
	wait := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var r *run.Run
		r, err = s.o.CreateRun(system(ctx), run.CreateOptions{WorkspaceID: target.ID, Message: &msg, AutoApply: &auto,
			Source: RunSource, TriggerReason: RunReason})
		if err == nil {
			return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO triggered_runs (run_id, origin_run_id, source_run_id, created_at) VALUES (?, ?, ?, ?)`,
					r.ID, origin, srcRunID, core.Micros(core.Now())); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `UPDATE trigger_origins SET run_id = ? WHERE origin_run_id = ? AND workspace_id = ?`, r.ID, origin, tg.id)
				return err
			})
		}
		kind := core.KindOf(err)
		if attempt >= s.o.Retries || kind == core.KindInvalid || kind == core.KindConflict || kind == core.KindNotFound {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// derivedOn reports whether a workspace lets derived edges start its runs
// (the default).
func (s *Service) derivedOn(ctx context.Context, workspaceID string) (bool, error) {
	var on bool
	err := s.o.DB.QueryRow(ctx, `SELECT derived_triggers FROM dependency_settings WHERE workspace_id = ?`, workspaceID).Scan(&on)
	if store.IsNoRows(err) {
		return true, nil
	}
	return on, err
}

// DerivedTriggers reports whether derived edges may start runs in a
// workspace the caller may see.
func (s *Service) DerivedTriggers(ctx context.Context, workspaceID string) (bool, error) {
	if _, err := s.o.Workspaces.Get(ctx, workspaceID); err != nil {
		return false, err
	}
	return s.derivedOn(ctx, workspaceID)
}

// SetDerivedTriggers switches derived triggers of a workspace on or off.
func (s *Service) SetDerivedTriggers(ctx context.Context, workspaceID string, on bool) error {
	w, err := s.o.Workspaces.Get(ctx, workspaceID)
	if err != nil {
		return err
	}
	if err := authorize(ctx, w.Organization, w.ID); err != nil {
		return err
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM dependency_settings WHERE workspace_id = ?`, w.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO dependency_settings (workspace_id, derived_triggers) VALUES (?, ?)`, w.ID, on)
		return err
	})
}
