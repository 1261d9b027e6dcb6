package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

// taskCall is one run task request the test service got, with what the
// service could and could not do with its access token.
type taskCall struct {
	Path     string
	Payload  runtask.Payload
	PlanJSON int // status of GET plan_json_api_url (0: no URL)
	PlanBody []byte
	Config   int // status of GET configuration_version_download_url
	// Elsewhere are the statuses of reads the token must not reach.
	Elsewhere map[string]int
	Callback  int // status of the callback (0: none sent)
	After     int // status of reading the plan JSON again once the stage ended
}

// taskService is a real HTTP run task service: it checks the signature,
// answers 200, uses the access token like a scanner would, and reports
// on the callback: /pass passes, /fail fails, /silent never reports,
// /broken answers every run task request 503.
type taskService struct {
	t      *testing.T
	key    string
	env    *testenv.Env
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []*taskCall
	badSig int
	// refused counts the run task requests /broken answered 503.
	refused int
	// probes are URLs of things the token must not read (another run's
	// plan, state, the workspace), set by the test.
	probes map[string]string
	wg     sync.WaitGroup
	got    chan *taskCall
}

func newTaskService(t *testing.T, e *testenv.Env, key string) *taskService {
	s := &taskService{t: t, key: key, env: e, probes: map[string]string{}, got: make(chan *taskCall, 64)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() { s.srv.Close(); s.wg.Wait() })
	return s
}

func (s *taskService) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !notify.Verify(s.key, body, r.Header.Get("X-TFC-Task-Signature")) {
		s.mu.Lock()
		s.badSig++
		s.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p runtask.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if p.AccessToken != runtask.TestToken && r.URL.Path == "/broken" {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		http.Error(w, "scanner overloaded", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	if p.AccessToken == runtask.TestToken {
		return
	}
	c := &taskCall{Path: r.URL.Path, Payload: p, Elsewhere: map[string]int{}}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	probes := map[string]string{}
	for k, v := range s.probes {
		probes[k] = strings.ReplaceAll(v, "{run}", p.RunID)
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { s.got <- c }()
		if p.PlanJSONAPIURL != nil {
			c.PlanJSON, c.PlanBody = s.get(*p.PlanJSONAPIURL, p.AccessToken)
		}
		if p.ConfigurationVersionDownloadURL != nil {
			c.Config, _ = s.get(*p.ConfigurationVersionDownloadURL, p.AccessToken)
		}
		for name, u := range probes {
			c.Elsewhere[name], _ = s.get(u, p.AccessToken)
		}
		status := strings.TrimPrefix(c.Path, "/")
		if status == "silent" {
			return
		}
		time.Sleep(300 * time.Millisecond) // a scan takes a moment
		msg := map[string]string{"pass": "passed", "fail": "failed"}[status]
		cb := fmt.Sprintf(`{"data":{"type":"task-results","attributes":{"status":%q,"message":"scan %s","url":"https://scanner.test/r/1"},
"relationships":{"outcomes":{"data":[{"type":"task-result-outcomes","attributes":{"outcome-id":"PRTNR-1","description":"one finding",
"body":"# details","tags":{"Severity":[{"label":"High","level":"error"}]}}}]}}}}`, msg, msg)
		c.Callback = s.patch(p.TaskResultCallbackURL, p.AccessToken, cb)
		if p.PlanJSONAPIURL != nil {
			c.After, _ = s.get(*p.PlanJSONAPIURL, p.AccessToken)
		} else {
			c.After, _ = s.get(*p.ConfigurationVersionDownloadURL, p.AccessToken)
		}
	}()
}

func (s *taskService) get(u, token string) (int, []byte) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := s.env.HTTP.Do(req)
	if err != nil {
		return -1, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (s *taskService) patch(u, token, body string) int {
	req, _ := http.NewRequest(http.MethodPatch, u, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/vnd.api+json")
	res, err := s.env.HTTP.Do(req)
	if err != nil {
		return -1
	}
	res.Body.Close()
	return res.StatusCode
}

// callsOf returns the calls made for a run, in order.
func (s *taskService) callsOf(runID string) []*taskCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*taskCall
	for _, c := range s.calls {
		if c.Payload.RunID == runID {
			out = append(out, c)
		}
	}
	return out
}

// wait waits until the service has handled n calls of the run (the
// token probes and callback done).
func (s *taskService) wait(runID string, n int) []*taskCall {
	s.t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		done := 0
		s.mu.Lock()
		for _, c := range s.calls {
			if c.Payload.RunID == runID && c.Elsewhere != nil && (c.Callback != 0 || c.Path == "/silent") {
				done++
			}
		}
		s.mu.Unlock()
		if done >= n {
			return s.callsOf(runID)
		}
		select {
		case <-s.got:
		case <-deadline:
			s.t.Fatalf("the task service handled %d of %d requests of run %s", done, n, runID)
		}
	}
}

// stagesOf reads a run's task stages through go-tfe.
func stagesOf(ctx context.Context, t *testing.T, c *tfe.Client, runID string) map[string]*tfe.TaskStage {
	t.Helper()
	l, err := c.TaskStages.List(ctx, runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tfe.TaskStage{}
	for _, st := range l.Items {
		out[string(st.Stage)] = st
	}
	return out
}

// TestRunTasksEndToEnd runs real runs through run tasks served by a real
// HTTP task service, on both stores: the stages come in order with signed
// requests whose token reads the plan JSON and nothing else, and dies
// with the stage; a mandatory failure stops the run before apply, an
// advisory one does not; a service that never reports errors the stage
// after the (test-sized) timeout; an override lets a run go on; and
// terraform apply through the cloud block waits for the tasks.
func TestRunTasksEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	eng := engines(t)[0]
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel() // see parallel in TestMain
			e := testenv.New(t, testenv.Options{Store: st, RunTaskProgressTimeout: 3 * time.Second, RunTaskTimeout: time.Minute,
				RunTaskRetryBackoff: 100 * time.Millisecond})
			testRunTasks(t, e, newEngineCLI(t, e, eng))
		})
	}
}

func testRunTasks(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	const key = "task-hmac-key-0123"
	api := e.Client
	testenv.NewOrg(t, api, "acme")
	svc := newTaskService(t, e, key)
	newTask := func(name, path string) *tfe.RunTask {
		rt, err := api.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: name, URL: svc.srv.URL + path, Category: "task", HMACKey: tfe.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	pass, fail, silent, broken := newTask("scan", "/pass"), newTask("cost", "/fail"), newTask("approval", "/silent"), newTask("lint", "/broken")
	newWorkspace := func(name string) *tfe.Workspace {
		ws, err := api.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name), ExecutionMode: tfe.String("remote")})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	attach := func(ws *tfe.Workspace, task *tfe.RunTask, level tfe.TaskEnforcementLevel, stages ...tfe.Stage) {
		if _, err := api.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: level, Stages: &stages, RunTask: task}); err != nil {
			t.Fatal(err)
		}
	}
	noState := func(ws *tfe.Workspace) {
		t.Helper()
		if _, err := api.StateVersions.ReadCurrent(ctx, ws.ID); err != tfe.ErrResourceNotFound {
			t.Fatalf("workspace %s has a state (%v), want none: nothing may have been applied", ws.Name, err)
		}
	}

	// A workspace with state the tokens must not read, and a run whose
	// plan they must not read.
	other := newWorkspace("other")
	otherRun := waitRun(ctx, t, api, createRun(ctx, t, api, other.ID, uploadConfig(ctx, t, api, other.ID, slowApplyConfig).ID, nil).ID,
		3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if otherRun.Status != tfe.RunApplied {
		t.Fatalf("the run of the other workspace ended %s", otherRun.Status)
	}
	sv, err := api.StateVersions.ReadCurrent(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}

	// 1. A passing task at every stage: called in order, then applied.
	all := newWorkspace("all")
	attach(all, pass, tfe.Mandatory, tfe.PrePlan, tfe.PostPlan, tfe.PreApply, tfe.PostApply)
	svc.mu.Lock()
	svc.probes = map[string]string{
		"another run's plan JSON": e.URL + "/api/v2/plans/" + otherRun.Plan.ID + "/json-output",
		"a state version":         e.URL + "/api/v2/state-versions/" + sv.ID + "/download",
		"a workspace":             e.URL + "/api/v2/workspaces/" + other.ID,
		"its own workspace":       e.URL + "/api/v2/workspaces/" + all.ID,
		"its own run":             e.URL + "/api/v2/runs/{run}",
		"the organization":        e.URL + "/api/v2/organizations/acme",
	}
	svc.mu.Unlock()
	r := createRun(ctx, t, api, all.ID, uploadConfig(ctx, t, api, all.ID, slowApplyConfig).ID, nil)
	calls := svc.wait(r.ID, 4)
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("a run whose tasks all pass ended %s", r.Status)
	}
	var order []string
	for _, call := range calls {
		p := call.Payload
		order = append(order, string(p.Stage))
		if p.WorkspaceID != all.ID || p.OrganizationName != "acme" || p.TaskResultEnforcementLevel != runtask.Mandatory || p.PayloadVersion != 1 {
			t.Fatalf("request payload: %+v", p)
		}
		if (p.Stage == runtask.PrePlan) != (p.PlanJSONAPIURL == nil) {
			t.Fatalf("%s request: plan_json_api_url %v (it is there from post_plan on, never before)", p.Stage, p.PlanJSONAPIURL)
		}
		if p.PlanJSONAPIURL != nil && (call.PlanJSON != http.StatusOK || !bytes.Contains(call.PlanBody, []byte(`"resource_changes"`))) {
			t.Fatalf("%s: reading the plan JSON with the access token: %d %.200s", p.Stage, call.PlanJSON, call.PlanBody)
		}
		if call.Config != http.StatusOK {
			t.Fatalf("%s: downloading the configuration with the access token: %d", p.Stage, call.Config)
		}
		for what, code := range call.Elsewhere {
			if code != http.StatusNotFound && code != http.StatusForbidden {
				t.Fatalf("%s: the access token read %s (HTTP %d)", p.Stage, what, code)
			}
		}
		if call.Callback != http.StatusOK {
			t.Fatalf("%s: the callback answered %d", p.Stage, call.Callback)
		}
		if call.After != http.StatusUnauthorized {
			t.Fatalf("%s: the access token still works once its stage ended (HTTP %d)", p.Stage, call.After)
		}
	}
	if strings.Join(order, ",") != "pre_plan,post_plan,pre_apply,post_apply" {
		t.Fatalf("stages called in the order %v", order)
	}
	stages := stagesOf(ctx, t, api, r.ID)
	for _, s := range []string{"pre_plan", "post_plan", "pre_apply", "post_apply"} {
		if stages[s] == nil || stages[s].Status != tfe.TaskStagePassed {
			t.Fatalf("stage %s: %+v", s, stages[s])
		}
	}
	ts, err := api.TaskStages.Read(ctx, stages["post_plan"].ID, &tfe.TaskStageReadOptions{Include: []tfe.TaskStageIncludeOpt{tfe.TaskStageTaskResults}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts.TaskResults) != 1 || ts.TaskResults[0].Status != tfe.TaskPassed || ts.TaskResults[0].Message != "scan passed" ||
		ts.TaskResults[0].TaskName != "scan" || ts.TaskResults[0].URL != "https://scanner.test/r/1" {
		t.Fatalf("post-plan result: %+v", ts.TaskResults)
	}
	// A wrong token changes nothing.
	res := ts.TaskResults[0]
	if code := svc.patch(e.URL+"/api/v2/task-results/"+res.ID+"/callback", "not-a-token", `{"data":{"type":"task-results","attributes":{"status":"failed"}}}`); code != http.StatusUnauthorized {
		t.Fatalf("a callback with a wrong token answered %d, want 401", code)
	}
	if code := svc.patch(e.URL+"/api/v2/task-results/"+res.ID+"/callback", e.Token, `{"data":{"type":"task-results","attributes":{"status":"failed"}}}`); code != http.StatusUnauthorized {
		t.Fatalf("a callback with a user token answered %d, want 401", code)
	}
	if again, err := api.TaskResults.Read(ctx, res.ID); err != nil || again.Status != tfe.TaskPassed {
		t.Fatalf("after refused callbacks the result is %+v (%v)", again, err)
	}
	svc.mu.Lock()
	svc.probes = map[string]string{}
	bad := svc.badSig
	svc.mu.Unlock()
	if bad != 0 {
		t.Fatalf("%d requests carried a wrong signature", bad)
	}

	// 2. A mandatory pre-apply failure stops the run before apply.
	stop := newWorkspace("stop")
	attach(stop, fail, tfe.Mandatory, tfe.PreApply)
	r = createRun(ctx, t, api, stop.ID, uploadConfig(ctx, t, api, stop.ID, slowApplyConfig).ID, nil)
	svc.wait(r.ID, 1)
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunErrored || r.Apply.Status == tfe.ApplyFinished {
		t.Fatalf("a run whose mandatory pre-apply task failed ended %s (apply %s)", r.Status, r.Apply.Status)
	}
	noState(stop)
	if st := stagesOf(ctx, t, api, r.ID)["pre_apply"]; st.Status != tfe.TaskStageFailed {
		t.Fatalf("pre-apply stage is %s, want failed", st.Status)
	}

	// 3. An advisory failure applies.
	advisory := newWorkspace("advisory")
	attach(advisory, fail, tfe.Advisory, tfe.PostPlan)
	r = createRun(ctx, t, api, advisory.ID, uploadConfig(ctx, t, api, advisory.ID, slowApplyConfig).ID, nil)
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("a run whose advisory task failed ended %s", r.Status)
	}

	// 4. A mandatory post-plan failure waits for a decision; an override
	// lets it apply.
	decide := newWorkspace("decide")
	attach(decide, fail, tfe.Mandatory, tfe.PostPlan)
	r = createRun(ctx, t, api, decide.ID, uploadConfig(ctx, t, api, decide.ID, slowApplyConfig).ID, nil)
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunPostPlanAwaitingDecision, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunPostPlanAwaitingDecision {
		t.Fatalf("a run whose mandatory post-plan task failed is %s, want post_plan_awaiting_decision", r.Status)
	}
	noState(decide)
	st := stagesOf(ctx, t, api, r.ID)["post_plan"]
	if st.Status != tfe.TaskStageAwaitingOverride || st.Actions == nil || st.Actions.IsOverridable == nil || !*st.Actions.IsOverridable {
		t.Fatalf("post-plan stage: %+v", st)
	}
	member, _ := e.UserClient(t, "acme", "dev@acme.test")
	if _, err := member.TaskStages.Override(ctx, st.ID, tfe.TaskStageOverrideOptions{}); err == nil {
		t.Fatal("a member without access to the workspace overrode the stage")
	}
	if _, err := api.TaskStages.Override(ctx, st.ID, tfe.TaskStageOverrideOptions{Comment: tfe.String("accepted risk")}); err != nil {
		t.Fatal(err)
	}
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("an overridden run ended %s", r.Status)
	}

	// 5. A service that never reports: the result errors after the
	// progress timeout and, being mandatory, stops the run.
	quiet := newWorkspace("quiet")
	attach(quiet, silent, tfe.Mandatory, tfe.PrePlan)
	r = createRun(ctx, t, api, quiet.ID, uploadConfig(ctx, t, api, quiet.ID, slowApplyConfig).ID, nil)
	call := svc.wait(r.ID, 1)[0]
	r = waitRun(ctx, t, api, r.ID, time.Minute, tfe.RunErrored, tfe.RunApplied, tfe.RunPlanned)
	if r.Status != tfe.RunErrored || r.Plan.Status == tfe.PlanFinished {
		t.Fatalf("a run whose mandatory task never answered is %s (plan %s)", r.Status, r.Plan.Status)
	}
	ts, err = api.TaskStages.Read(ctx, stagesOf(ctx, t, api, r.ID)["pre_plan"].ID, &tfe.TaskStageReadOptions{Include: []tfe.TaskStageIncludeOpt{tfe.TaskStageTaskResults}})
	if err != nil {
		t.Fatal(err)
	}
	if ts.Status != tfe.TaskStageFailed || len(ts.TaskResults) != 1 || ts.TaskResults[0].Status != tfe.TaskErrored {
		t.Fatalf("a stage whose service never answered: %s with %+v", ts.Status, ts.TaskResults)
	}
	if code, _ := svc.get(*call.Payload.ConfigurationVersionDownloadURL, call.Payload.AccessToken); code != http.StatusUnauthorized {
		t.Fatalf("the token of a timed-out result still works (HTTP %d)", code)
	}
	noState(quiet)

	// 6. A service that refuses the request is retried, then the result
	// errors; being advisory, the run applies anyway.
	flaky := newWorkspace("flaky")
	attach(flaky, broken, tfe.Advisory, tfe.PostPlan)
	r = createRun(ctx, t, api, flaky.ID, uploadConfig(ctx, t, api, flaky.ID, slowApplyConfig).ID, nil)
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("a run whose advisory task service refuses requests ended %s", r.Status)
	}
	ts, err = api.TaskStages.Read(ctx, stagesOf(ctx, t, api, r.ID)["post_plan"].ID, &tfe.TaskStageReadOptions{Include: []tfe.TaskStageIncludeOpt{tfe.TaskStageTaskResults}})
	if err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	refused := svc.refused
	svc.mu.Unlock()
	if ts.Status != tfe.TaskStagePassed || len(ts.TaskResults) != 1 || ts.TaskResults[0].Status != tfe.TaskErrored ||
		!strings.Contains(ts.TaskResults[0].Message, "503") || refused < 2 {
		t.Fatalf("after %d refused requests the stage is %s with %+v; want passed (advisory) with an errored result saying why, after retries",
			refused, ts.Status, ts.TaskResults)
	}
	// /metrics counts the requests by outcome: accepted ones from the
	// earlier steps, and this service's retries and its final refusal.
	fams, err := e.Server.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]float64{}
	for _, f := range fams {
		if f.GetName() == "terrace_run_task_request_attempts_total" {
			for _, m := range f.GetMetric() {
				attempts[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if attempts["accepted"] < 1 || attempts["retry"] < float64(refused-1) || attempts["errored"] < 1 {
		t.Fatalf("run task request metrics %v after %d refused requests; want accepted, retry and errored counted", attempts, refused)
	}

	// 7. terraform apply through the cloud block waits for the tasks and
	// shows them.
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, "acme", "cli") + slowApplyConfig})
	c.run(dir, "init")
	cliWS, err := api.Workspaces.Read(ctx, "acme", "cli")
	if err != nil {
		t.Fatal(err)
	}
	attach(cliWS, pass, tfe.Mandatory, tfe.PostPlan)
	out := c.run(dir, "apply", "-auto-approve")
	if !strings.Contains(out, "Post-plan Tasks") || !strings.Contains(out, "scan") || !strings.Contains(out, "Overall Result") || !strings.Contains(out, "Apply complete!") {
		t.Fatalf("terraform apply output does not show the passed task stage and the apply:\n%s", out)
	}
	t.Logf("terraform apply:\n%s", out)
}

// TestRunTaskSurvivesKill kills the server (SIGKILL) while a run waits
// for its task's callback. After a restart the stage still waits, the
// late callback is accepted with the token the request carried, and the
// run goes on to apply: nothing is stuck.
func TestRunTaskSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	// Long timeouts: the stage must still wait after the restart.
	t.Setenv("TERRACE_RUN_TASK_PROGRESS_TIMEOUT", "10m")
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) {
			database := ""
			if st == "postgres" {
				database = storetest.PostgresDSN(t)
			}
			got := make(chan runtask.Payload, 4)
			svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var p runtask.Payload
				if err := json.Unmarshal(body, &p); err != nil || r.Header.Get("X-TFC-Task-Signature") != "" {
					http.Error(w, "bad request", http.StatusBadRequest)
					return
				}
				if p.AccessToken != runtask.TestToken {
					got <- p
				}
			}))
			defer svc.Close()
			p := startProc(t, t.TempDir(), database, "")
			ctx := mustCtx()
			c := p.Client
			if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
				t.Fatal(err)
			}
			ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), ExecutionMode: tfe.String("remote")})
			if err != nil {
				t.Fatal(err)
			}
			task, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "gate", URL: svc.URL, Category: "task"})
			if err != nil {
				t.Fatal(err)
			}
			stages := []tfe.Stage{tfe.PrePlan}
			if _, err := c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, Stages: &stages, RunTask: task}); err != nil {
				t.Fatal(err)
			}
			r := createRun(ctx, t, c, ws.ID, uploadConfig(ctx, t, c, ws.ID, slowApplyConfig).ID, nil)
			var req runtask.Payload
			select {
			case req = <-got:
			case <-time.After(time.Minute):
				t.Fatal("the task service got no request in a minute")
			}
			r = waitRun(ctx, t, c, r.ID, time.Minute, tfe.RunPrePlanRunning)

			p = p.restart()
			c = p.Client
			r, err = c.Runs.Read(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tfe.RunPrePlanRunning {
				t.Fatalf("after the restart the run is %s, want pre_plan_running", r.Status)
			}
			l, err := c.TaskStages.List(ctx, r.ID, nil)
			if err != nil || len(l.Items) != 1 || l.Items[0].Status != tfe.TaskStageRunning {
				t.Fatalf("after the restart the task stages are %+v (%v), want one running", l, err)
			}
			cb := `{"data":{"type":"task-results","attributes":{"status":"passed","message":"late but fine"}}}`
			hr, _ := http.NewRequest(http.MethodPatch, req.TaskResultCallbackURL, strings.NewReader(cb))
			hr.Header.Set("Authorization", "Bearer "+req.AccessToken)
			hr.Header.Set("Content-Type", "application/vnd.api+json")
			res, err := p.HTTP.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("the late callback answered %d", res.StatusCode)
			}
			r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
			if r.Status != tfe.RunApplied {
				t.Fatalf("after the late callback the run ended %s", r.Status)
			}
		})
	}
}
