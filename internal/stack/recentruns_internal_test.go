package stack

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestRecentRuns: the stack page's one statement gives each deployment
// what ListDeploymentRuns gives it page by page: at most the newest per
// runs, newest first, without speculative plans; a deployment without
// runs has none.
func TestRecentRuns(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
		s := &Service{db: db, wake: loops.NewWake(), busySince: map[string]time.Time{}}
		now := core.Micros(nowUTC())
		seedDeployment(t, db, now)
		storetest.Seed(t, db,
			[]any{`INSERT INTO stack_configurations (id, stack_id, sequence_number, status, source, speculative, created_at, updated_at) VALUES ('stc-3', 'st-1', 3, 'completed', 'manual', ?, ?, ?)`, true, now, now},
			[]any{`INSERT INTO stack_deployments (id, stack_id, name, last_configuration_id, created_at, updated_at) VALUES ('sdep-2', 'st-1', 'dev', 'stc-2', ?, ?)`, now, now},
			[]any{`INSERT INTO stack_deployments (id, stack_id, name, last_configuration_id, created_at, updated_at) VALUES ('sdep-3', 'st-1', 'idle', 'stc-2', ?, ?)`, now, now},
		)
		base := nowUTC()
		mk := func(id, cfg, dep string, i int) {
			t.Helper()
			at := base.Add(time.Duration(i) * time.Second)
			if err := insertRun(ctx, db, &DeploymentRun{ID: id, StackID: "st-1", ConfigurationID: cfg, Deployment: dep, Status: RunSucceeded,
				Mode: ModeNormal, Timestamps: map[string]time.Time{}, CreatedAt: at, UpdatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 12 {
			mk(fmt.Sprintf("sdr-p%02d", i), "stc-2", "prod", i)
		}
		mk("sdr-d0", "stc-1", "dev", 0)
		mk("sdr-d1", "stc-2", "dev", 1)
		mk("sdr-spec", "stc-3", "prod", 20) // the newest: a speculative plan
		got, err := s.RecentRuns(ctx, "st-1", 10)
		if err != nil {
			t.Fatal(err)
		}
		ids := func(rs []*DeploymentRun) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		want := map[string][]string{
			"prod": {"sdr-p11", "sdr-p10", "sdr-p09", "sdr-p08", "sdr-p07", "sdr-p06", "sdr-p05", "sdr-p04", "sdr-p03", "sdr-p02"},
			"dev":  {"sdr-d1", "sdr-d0"},
		}
		if len(got) != len(want) {
			t.Errorf("deployments with runs: %d, want %d", len(got), len(want))
		}
		for dep, w := range want {
			if !slices.Equal(ids(got[dep]), w) {
				t.Errorf("%s: %v, want %v", dep, ids(got[dep]), w)
			}
			paged, _, err := s.ListDeploymentRuns(ctx, "st-1", dep, false, 0, 10)
			if err != nil || !slices.Equal(ids(paged), w) {
				t.Errorf("%s as ListDeploymentRuns pages it: %v (%v), want %v", dep, ids(paged), err, w)
			}
		}
	})
}
