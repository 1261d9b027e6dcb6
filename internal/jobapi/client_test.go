package jobapi

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
)

// TestClaimCarriesInputs: the inputs that come with a claim's answer are
// the job's inputs, used once without asking the server again; a job
// claimed without them (the server could not gather them) asks for them.
func TestClaimCarriesInputs(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	mux := http.NewServeMux()
	claims := []Job{
		{ID: "job-1", RunID: "run-1", Phase: run.PhasePlan, LeaseMS: 30000, Inputs: &runner.Inputs{Archive: []byte("from the claim"), Hostname: "terrace.test"}},
		{ID: "job-2", RunID: "run-2", Phase: run.PhasePlan, LeaseMS: 30000},
	}
	var next atomic.Int32
	mux.HandleFunc("POST /api/agent/claim", func(w http.ResponseWriter, r *http.Request) {
		respond(w, http.StatusOK, claims[next.Add(1)-1])
	})
	mux.HandleFunc("GET /api/agent/jobs/{id}/inputs", func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		respond(w, http.StatusOK, runner.Inputs{Archive: []byte("asked for " + r.PathValue("id"))})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, HTTP: srv.Client(), RunnerID: "runner-1", CAFile: "/ca.pem"}
	ctx := t.Context()

	job, err := c.Claim(ctx, "runner-1")
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Inputs(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if string(in.Archive) != "from the claim" || in.Hostname != "terrace.test" || in.CAFile != "/ca.pem" || asked.Load() != 0 {
		t.Fatalf("inputs of a job claimed with them: archive %q, host %q, CA %q, %d inputs calls; want the claim's, the client's CA file and no call",
			in.Archive, in.Hostname, in.CAFile, asked.Load())
	}
	// They are used once: a second ask goes to the server.
	if in, err = c.Inputs(ctx, job); err != nil || string(in.Archive) != "asked for job-1" || asked.Load() != 1 {
		t.Fatalf("second ask: %q, %v, %d calls", in.Archive, err, asked.Load())
	}

	job, err = c.Claim(ctx, "runner-1")
	if err != nil {
		t.Fatal(err)
	}
	if in, err = c.Inputs(ctx, job); err != nil || string(in.Archive) != "asked for job-2" || in.CAFile != "/ca.pem" || asked.Load() != 2 {
		t.Fatalf("inputs of a job claimed without them: %q, CA %q, %v, %d calls; want the server's answer", in.Archive, in.CAFile, err, asked.Load())
	}
	if len(c.claimed) != 0 {
		t.Fatalf("the client still holds inputs of %d jobs", len(c.claimed))
	}
}
