package run

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/workspace"
)

// oneWorkspaceService is a run service over db with one remote workspace
// (ws-s of acme), blobs in a temporary folder and stages as the run task
// domain.
func oneWorkspaceService(t *testing.T, db *store.DB, stages TaskStages) *Service {
	t.Helper()
	blobs, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return NewService(Options{DB: db, Blobs: blobs, Stages: stages, Configs: fakeConfigs{},
		Workspaces: fakeWorkspaces{&Workspace{ID: "ws-s", Name: "s", Organization: "acme", ExecutionMode: "remote"}}})
}

// asOwner is a context whose caller owns acme (these tests are not about
// who may start runs).
func asOwner() context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
}

// fakeWorkspaces is one remote workspace that is always free to lock.
type fakeWorkspaces struct{ ws *Workspace }

func (f fakeWorkspaces) Get(context.Context, string) (*Workspace, error)    { return f.ws, nil }
func (f fakeWorkspaces) System(context.Context, string) (*Workspace, error) { return f.ws, nil }
func (f fakeWorkspaces) SystemIn(context.Context, store.Q, string) (*Workspace, error) {
	return f.ws, nil
}
func (f fakeWorkspaces) Identity(context.Context, string) (*Workspace, error) { return f.ws, nil }
func (f fakeWorkspaces) Readable(context.Context, string) (*Workspace, error) { return f.ws, nil }
func (f fakeWorkspaces) ReadableSQL(context.Context, string) (string, []any, func(string) bool, error) {
	return "", nil, nil, nil
}
func (f fakeWorkspaces) LockForRun(context.Context, store.Q, string, string) (bool, error) {
	return true, nil
}
func (f fakeWorkspaces) LockQueue(context.Context, store.Q, string) error { return nil }
func (f fakeWorkspaces) UnlockForRunSQL(workspaceID, runID string) (string, []any) {
	return workspace.UnlockForRunSQL(workspaceID, runID)
}

// fakeConfigs has one uploaded configuration version.
type fakeConfigs struct{}

func (fakeConfigs) Get(_ context.Context, id string) (*ConfigVersion, error) {
	return &ConfigVersion{ID: id, WorkspaceID: "ws-s", Status: "uploaded"}, nil
}
func (fakeConfigs) Latest(ctx context.Context, _ string) (*ConfigVersion, error) {
	return fakeConfigs{}.Get(ctx, "cv-s")
}

// recordingStages gives every run the stages of prepare and records which
// stages the run service asked to start; no stage ever waits.
type recordingStages struct {
	prepare []TaskStage
	mu      sync.Mutex
	started []TaskStage
}

func (f *recordingStages) Prepare(context.Context, store.Q, *Run) ([]TaskStage, error) {
	return f.prepare, nil
}
func (f *recordingStages) Start(_ context.Context, _ store.Q, _ *Run, stage TaskStage) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, stage)
	return false, nil
}
func (f *recordingStages) Has(context.Context, string, ...TaskStage) (bool, error) { return false, nil }

// TestRunAsksOnlyForItsTaskStages: a run records the task stages it got
// when it was created, and on its way to applied the run service asks the
// run task domain to start only those (each ask is a query on the run's
// critical path); a run stored without that record (created before it
// existed) is asked about at every stage, as before; on both stores.
func TestRunAsksOnlyForItsTaskStages(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := asOwner()
		stages := &recordingStages{}
		s := oneWorkspaceService(t, db, stages)
		yes := true
		apply := func(forget bool) {
			t.Helper()
			r, err := s.Create(ctx, CreateOptions{WorkspaceID: "ws-s", AutoApply: &yes})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := s.get(ctx, r.ID); err != nil || !got.TaskStagesKnown || fmt.Sprint(got.TaskStages) != fmt.Sprint(stages.prepare) {
				t.Fatalf("the stored run's task stages: %+v, %v; want %v, known", got, err, stages.prepare)
			}
			if forget {
				// As stored before runs recorded their stages.
				if _, err := db.Exec(ctx, `UPDATE runs SET doc = REPLACE(doc, '"task_stages_known":true', '"task_stages_known":false') WHERE id = ?`, r.ID); err != nil {
					t.Fatal(err)
				}
			}
			j, err := s.Claim(ctx, "runner-s")
			if err != nil || j == nil || j.RunID != r.ID {
				t.Fatalf("claim: %+v, %v", j, err)
			}
			cont, err := s.FinishPlan(ctx, j.ID, "runner-s", PlanResult{HasChanges: true, Additions: 1})
			if err != nil || !cont {
				t.Fatalf("finishing the plan: %v, %v; want it to go on to apply", cont, err)
			}
			if err := s.FinishApply(ctx, j.ID, "runner-s", ApplyResult{Additions: 1}, nil); err != nil {
				t.Fatal(err)
			}
			if got, err := s.get(ctx, r.ID); err != nil || got.Status != Applied {
				t.Fatalf("the run: %+v, %v; want applied", got, err)
			}
		}
		for _, c := range []struct {
			prepare []TaskStage
			forget  bool
			want    []TaskStage
		}{
			{nil, false, nil},
			{[]TaskStage{StagePostApply}, false, []TaskStage{StagePostApply}},
			{nil, true, []TaskStage{StagePostPlan, StagePreApply, StagePostApply}},
		} {
			stages.prepare, stages.started = c.prepare, nil
			apply(c.forget)
			if !slices.Equal(stages.started, c.want) {
				t.Errorf("a run prepared with stages %v (record forgotten: %v) asked to start %v, want %v", c.prepare, c.forget, stages.started, c.want)
			}
		}
		// Each created run was stored with its "created" event and
		// counted (one statement on PostgreSQL).
		if n, err := s.RunsCount(ctx, "ws-s"); err != nil || n != 3 {
			t.Errorf("the workspace counts %d runs (%v), want 3", n, err)
		}
		var created int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM run_events WHERE action = 'created' AND description = 'Run created'`).Scan(&created); err != nil || created != 3 {
			t.Errorf("%d created events (%v), want 3", created, err)
		}
	})
}

// TestReportsFoldAndDropTheLogs: each report folds its phase's log (the
// chunks streamed, then the end it carries) into a blob and removes the
// chunks in the transaction that records the outcome; on both stores.
func TestReportsFoldAndDropTheLogs(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := asOwner()
		s := oneWorkspaceService(t, db, &recordingStages{})
		yes := true
		r, err := s.Create(ctx, CreateOptions{WorkspaceID: "ws-s", AutoApply: &yes})
		if err != nil {
			t.Fatal(err)
		}
		j, err := s.Claim(ctx, "runner-s")
		if err != nil || j == nil {
			t.Fatalf("claim: %+v, %v", j, err)
		}
		chunks := func(logID string) int {
			t.Helper()
			var n int
			if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM log_chunks WHERE log_id = ?`, logID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if err := s.AppendLog(ctx, r.Plan.ID, []byte("planning\n")); err != nil {
			t.Fatal(err)
		}
		if chunks(r.Plan.ID) == 0 {
			t.Fatal("the plan's log has no chunks while it runs")
		}
		if cont, err := s.FinishPlan(ctx, j.ID, "runner-s", PlanResult{HasChanges: true, Additions: 1, Log: []byte("plan end\n")}); err != nil || !cont {
			t.Fatalf("finishing the plan: %v, %v", cont, err)
		}
		if n := chunks(r.Plan.ID); n != 0 {
			t.Fatalf("the plan's log keeps %d chunks after its report", n)
		}
		if err := s.AppendLog(ctx, r.Apply.ID, []byte("applying\n")); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishApply(ctx, j.ID, "runner-s", ApplyResult{Additions: 1, Log: []byte("apply end\n")}, nil); err != nil {
			t.Fatal(err)
		}
		if n := chunks(r.Apply.ID); n != 0 {
			t.Fatalf("the apply's log keeps %d chunks after its report", n)
		}
		for id, want := range map[string]string{r.Plan.ID: "planning\nplan end\n", r.Apply.ID: "applying\napply end\n"} {
			got, err := s.ReadLog(ctx, id, 0, 0)
			if err != nil || !strings.Contains(string(got), want) || !strings.HasSuffix(string(got), etx) {
				t.Errorf("log %s: %q (%v), want it to hold %q and end", id, got, err, want)
			}
		}
		var jobs int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM jobs WHERE run_id = ?`, r.ID).Scan(&jobs); err != nil || jobs != 0 {
			t.Errorf("%d jobs left for the applied run (%v)", jobs, err)
		}
	})
}

// TestPlanReportAnswersBeforeItsObservers: a plan report whose runner
// goes straight on to apply answers without waiting for the observers of
// its transitions; they still hear every transition of the run in order,
// the apply's after the plan's.
func TestPlanReportAnswersBeforeItsObservers(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := asOwner()
		s := oneWorkspaceService(t, db, &recordingStages{})
		var mu sync.Mutex
		var heard []Status
		hold := make(chan struct{})
		s.Observe(func(_ context.Context, tr Transition) {
			if tr.To == Applying {
				<-hold
			}
			mu.Lock()
			heard = append(heard, tr.To)
			mu.Unlock()
		})
		yes := true
		_, err := s.Create(ctx, CreateOptions{WorkspaceID: "ws-s", AutoApply: &yes})
		if err != nil {
			t.Fatal(err)
		}
		j, err := s.Claim(ctx, "runner-s")
		if err != nil || j == nil {
			t.Fatalf("claim: %+v, %v", j, err)
		}
		answered := make(chan error, 1)
		go func() {
			cont, err := s.FinishPlan(ctx, j.ID, "runner-s", PlanResult{HasChanges: true, Additions: 1})
			if err == nil && !cont {
				err = fmt.Errorf("the plan does not go on to apply")
			}
			answered <- err
		}()
		select {
		case err := <-answered:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			close(hold)
			t.Fatal("the plan's report waited for the observers of its transitions")
		}
		applied := make(chan error, 1)
		go func() { applied <- s.FinishApply(ctx, j.ID, "runner-s", ApplyResult{Additions: 1}, nil) }()
		// Once the apply's outcome is committed its report tells the
		// observers, and that must wait for the plan's report's observers,
		// which the hold keeps busy: the report cannot have returned.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			r, err := getRun(ctx, db, s.Keys, "id", j.RunID, false)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status == Applied {
				break
			}
			if time.Now().After(deadline) {
				close(hold)
				t.Fatalf("the run is %s 10s after its apply was reported", r.Status)
			}
		}
		select {
		case err := <-applied:
			close(hold)
			t.Fatalf("the apply's report returned (err %v) before the observers of the plan's transitions were done", err)
		default:
		}
		mu.Lock()
		early := slices.Contains(heard, Applied)
		mu.Unlock()
		if early {
			close(hold)
			t.Fatal("the observers heard of the apply before the plan's transitions")
		}
		close(hold)
		if err := <-applied; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []Status{Planning, Planned, ApplyQueued, Applying, Applied}
		var got []Status
		for _, st := range heard {
			if slices.Contains(want, st) {
				got = append(got, st)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("observers heard %v (all: %v), want %v in order", got, heard, want)
		}
	})
}
