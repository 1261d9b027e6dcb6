package agent_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/jobapi"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestJobCallsStayInTheirRun: a job's calls write only its own run's
// logs and, while it plans, no state: the open log of another run (whose
// job the same agent holds) is not found through this job, a state
// snapshot during a plan is a conflict. These checks read the job and
// its run's log IDs in one query.
func TestJobCallsStayInTheirRun(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		pool := acmePool(ctx, t, e)
		tok, err := e.Client.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("calls")})
		if err != nil {
			t.Fatal(err)
		}
		var runs []*tfe.Run
		for _, name := range []string{"one", "two"} {
			ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name),
				ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
			if err != nil {
				t.Fatal(err)
			}
			cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "x" {}`)
			r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
		c := &jobapi.Client{BaseURL: e.URL, HTTP: e.HTTP, Token: tok.Token, ClaimWait: 5 * time.Second, HeartbeatWait: time.Second}
		reg, err := c.Register(ctx, "calls")
		if err != nil {
			t.Fatal(err)
		}
		c.RunnerID = reg.ID
		job, err := c.Claim(ctx, reg.ID)
		if err != nil || job == nil {
			t.Fatalf("claim: %+v, %v", job, err)
		}
		// The agent holds the other run's job too: its log is open, and
		// still not this job's to write.
		if second, err := c.Claim(ctx, reg.ID); err != nil || second == nil || second.RunID == job.RunID {
			t.Fatalf("second claim: %+v, %v", second, err)
		}
		mine, other := runs[0], runs[1]
		if job.RunID == other.ID {
			mine, other = other, mine
		}
		if err := c.AppendLog(ctx, job.ID, mine.Plan.ID, []byte("mine\n")); err != nil {
			t.Fatalf("appending to the job's own plan log: %v", err)
		}
		if err := c.AppendLog(ctx, job.ID, other.Plan.ID, []byte("not mine\n")); status(err) != http.StatusNotFound {
			t.Fatalf("appending to another run's log: %v, want not found", err)
		}
		if err := c.SaveState(ctx, job.ID, []byte(`{"version":4,"serial":1,"lineage":"x","outputs":{},"resources":[]}`)); status(err) != http.StatusConflict {
			t.Fatalf("a state snapshot while planning: %v, want a conflict", err)
		}
		// The other run's log holds nothing of it.
		var chunks int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM log_chunks WHERE log_id = ? AND seq > 0`, other.Plan.ID).Scan(&chunks); err != nil || chunks != 0 {
			t.Fatalf("the other run's log has %d chunks (%v)", chunks, err)
		}
	})
}

func status(err error) int {
	var e *jobapi.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}
