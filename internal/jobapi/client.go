package jobapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
)

// Client is a runner's side of the job protocol: runner.API over HTTP.
type Client struct {
	// BaseURL is the server's address (https://host:port).
	BaseURL string
	// HTTP sends the calls: a TLS client for an agent, InProcess for the
	// server's own runner.
	HTTP *http.Client
	// Token is the agent token (empty in-process).
	Token string
	// RunnerID is the lease holder ID: the agent ID for an agent.
	RunnerID string
	// Queue is the job queue to claim from ("" for runs).
	Queue string
	// ClaimWait and HeartbeatWait are the long-polls' lengths.
	ClaimWait, HeartbeatWait time.Duration
	// CAFile, when set, is given to terraform (SSL_CERT_FILE) to reach
	// the server: the runner's own copy of the server's CA.
	CAFile string
	// ModuleTests says the runner runs module test runs its claims bring
	// (an agent: FeatureModuleTests).
	ModuleTests bool

	mu sync.Mutex
	// claimed holds the inputs that came with a claim's answer until the
	// job asks for them (Inputs).
	claimed map[string]*runner.Inputs
}

var _ runner.API = (*Client)(nil)

// Error is a refusal from the server.
type Error struct {
	Status int
	Detail string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Detail) }

// send makes a call; an answer of 300 or more is the server's refusal
// (*Error), its body closed; else the caller closes the body.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set(RunnerHeader, c.RunnerID)
	features := FeatureRunFiles + "," + FeatureVaultLogin
	if c.ModuleTests {
		features += "," + FeatureModuleTests
	}
	req.Header.Set(FeaturesHeader, features)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var doc struct {
			Errors []struct {
				Title, Detail string
			} `json:"errors"`
		}
		detail := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &doc) == nil && len(doc.Errors) > 0 {
			detail = doc.Errors[0].Detail
			if detail == "" {
				detail = doc.Errors[0].Title
			}
		}
		return resp, &Error{Status: resp.StatusCode, Detail: detail}
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) (int, error) {
	resp, err := c.send(ctx, method, path, body, contentType)
	if err != nil {
		if resp != nil {
			return resp.StatusCode, err
		}
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding the answer to %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	return c.do(ctx, method, path, body, "application/json", out)
}

// stream makes a call whose answer is a stream (an archive), which the
// caller closes.
func (c *Client) stream(ctx context.Context, method, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, method, path, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Register registers an agent of the token's pool; the returned ID
// becomes the client's RunnerID.
func (c *Client) Register(ctx context.Context, name string) (*RegisterResponse, error) {
	var out RegisterResponse
	if _, err := c.call(ctx, http.MethodPost, "/api/agent/register", RegisterRequest{Name: name}, &out); err != nil {
		return nil, err
	}
	c.RunnerID = out.ID
	return &out, nil
}

// SetStatus reports the agent's status (exited, errored).
func (c *Client) SetStatus(ctx context.Context, status string) error {
	_, err := c.call(ctx, http.MethodPost, "/api/agent/status", StatusRequest{Status: status}, nil)
	return err
}

// Claim long-polls for a job; nil when none came within ClaimWait.
func (c *Client) Claim(ctx context.Context, runnerID string) (*run.Job, error) {
	out, err := c.claim(ctx)
	if err != nil || out == nil {
		return nil, err
	}
	return c.runJob(out), nil
}

// claim long-polls for a job as the wire carries it; nil when none came.
func (c *Client) claim(ctx context.Context) (*Job, error) {
	var out Job
	code, err := c.call(ctx, http.MethodPost, "/api/agent/claim", ClaimRequest{WaitMS: c.ClaimWait.Milliseconds(), Queue: c.Queue}, &out)
	if err != nil || code == http.StatusNoContent {
		return nil, err
	}
	return &out, nil
}

// runJob is a claimed run job as the runner takes it; the inputs that
// came with it are kept for its Inputs call.
func (c *Client) runJob(out *Job) *run.Job {
	if out.Inputs != nil {
		c.mu.Lock()
		if c.claimed == nil {
			c.claimed = map[string]*runner.Inputs{}
		}
		c.claimed[out.ID] = out.Inputs
		c.mu.Unlock()
	}
	return &run.Job{ID: out.ID, RunID: out.RunID, Phase: out.Phase, Run: out.Run, Lease: time.Duration(out.LeaseMS) * time.Millisecond}
}

// Heartbeat extends the lease, waiting up to HeartbeatWait for a signal.
func (c *Client) Heartbeat(ctx context.Context, jobID, runnerID string) (run.Signal, error) {
	var out HeartbeatResponse
	_, err := c.call(ctx, http.MethodPost, "/api/agent/jobs/"+jobID+"/heartbeat", HeartbeatRequest{WaitMS: c.HeartbeatWait.Milliseconds()}, &out)
	return out.Signal, err
}

// Inputs returns what the job needs: those that came with its claim
// (once), or else the server's answer to GET …/inputs.
func (c *Client) Inputs(ctx context.Context, job *run.Job) (*runner.Inputs, error) {
	c.mu.Lock()
	in := c.claimed[job.ID]
	delete(c.claimed, job.ID)
	c.mu.Unlock()
	if in == nil {
		in = &runner.Inputs{}
		if _, err := c.call(ctx, http.MethodGet, "/api/agent/jobs/"+job.ID+"/inputs", nil, in); err != nil {
			return nil, err
		}
	}
	in.CAFile = c.CAFile
	return in, nil
}

// AppendLog sends a chunk of a phase's log.
func (c *Client) AppendLog(ctx context.Context, jobID, logID string, data []byte) error {
	_, err := c.do(ctx, http.MethodPost, "/api/agent/jobs/"+jobID+"/logs/"+logID, bytes.NewReader(data), "application/octet-stream", nil)
	return err
}

// SaveState uploads a state snapshot terraform wrote during an apply.
func (c *Client) SaveState(ctx context.Context, jobID string, state []byte) error {
	_, err := c.do(ctx, http.MethodPut, "/api/agent/jobs/"+jobID+"/state", bytes.NewReader(state), "application/json", nil)
	return err
}

// FinishPlan reports a plan; true when the runner applies it at once.
func (c *Client) FinishPlan(ctx context.Context, jobID, runnerID string, res run.PlanResult) (bool, error) {
	var out PlanResponse
	_, err := c.call(ctx, http.MethodPost, "/api/agent/jobs/"+jobID+"/plan", res, &out)
	return out.Continue, err
}

// SavePlanJSON uploads the JSON of a plan reported without it.
func (c *Client) SavePlanJSON(ctx context.Context, jobID, runnerID string, d run.PlanDescription) error {
	_, err := c.call(ctx, http.MethodPut, "/api/agent/jobs/"+jobID+"/plan-json", d, nil)
	return err
}

// FinishApply reports an apply (with the final state).
func (c *Client) FinishApply(ctx context.Context, jobID, runnerID string, res run.ApplyResult) error {
	_, err := c.call(ctx, http.MethodPost, "/api/agent/jobs/"+jobID+"/apply", res, nil)
	return err
}

// InProcess is an http.Client whose calls go straight to h, as the
// server's own runner: no network, no token, the same handler an agent
// reaches over HTTPS.
func InProcess(h http.Handler) *http.Client {
	return &http.Client{Transport: inProcess{h}}
}

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := auth.WithPrincipal(req.Context(), &auth.Principal{Kind: auth.KindRunner})
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, req.WithContext(ctx))
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		StatusCode: rec.status, Status: http.StatusText(rec.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder is the response of an in-process call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
