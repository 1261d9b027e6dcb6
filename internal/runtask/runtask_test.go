package runtask_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// A task is saved only after its service answered a signed test request
// with 200; the HMAC key is never read back; a task in use is not
// deleted; only callers with manage-run-tasks change tasks, and only
// workspace admins (run-tasks) attach them.
func TestTaskLifecycle(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		const key = "s3cret-hmac-key"
		got := make(chan runtask.Payload, 4)
		good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if !notify.Verify(key, body, r.Header.Get("X-TFC-Task-Signature")) {
				http.Error(w, "bad signature", http.StatusBadRequest)
				return
			}
			var p runtask.Payload
			if err := json.Unmarshal(body, &p); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			got <- p
		}))
		defer good.Close()
		broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
		}))
		defer broken.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String() + "/task"
		ln.Close()

		for what, url := range map[string]string{"a 500": broken.URL, "a closed port": closed, "a wrong key": good.URL} {
			k := "another-key"
			_, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "scan", URL: url, Category: "task", HMACKey: &k})
			testenv.WantStatus(t, "creating a task whose service gives "+what, err, "verification of the run task failed")
		}
		if l, err := c.RunTasks.List(ctx, "acme", nil); err != nil || len(l.Items) != 0 {
			t.Fatalf("after failed verifications the organization has %v tasks (%v), want none", l, err)
		}

		task, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "scan", URL: good.URL, Category: "task", HMACKey: tfe.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		p := <-got
		if p.AccessToken != runtask.TestToken || p.OrganizationName != "acme" || p.PayloadVersion != 1 {
			t.Fatalf("verification payload: %+v", p)
		}
		if task.HMACKey != nil {
			t.Fatalf("the create response carries the HMAC key")
		}
		raw, err := e.HTTP.Do(authed(must(http.NewRequest("GET", e.URL+"/api/v2/tasks/"+task.ID, nil)), e.Token))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(raw.Body)
		raw.Body.Close()
		if strings.Contains(string(body), key) || !strings.Contains(string(body), `"hmac-key":null`) {
			t.Fatalf("reading the task shows its key or no null hmac-key: %s", body)
		}
		_, err = c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "scan", URL: good.URL, Category: "task", HMACKey: tfe.String(key)})
		testenv.WantStatus(t, "a second task with the same name", err, "already taken")
		<-got

		// Permissions: a plain member neither creates tasks nor attaches
		// them; a team with manage-run-tasks creates them.
		member, _ := e.UserClient(t, "acme", "member@acme.test")
		_, err = member.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "m", URL: good.URL, Category: "task"})
		testenv.WantStatus(t, "a member creating a task", err, "forbidden")
		_, err = member.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Advisory, RunTask: task})
		testenv.WantErr(t, "a member attaching a task to a workspace it cannot see", err, tfe.ErrResourceNotFound)
		team, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("sec"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageRunTasks: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		sec, _ := e.UserClient(t, "acme", "sec@acme.test", team)
		t2, err := sec.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "cost", URL: good.URL, Category: "task", HMACKey: tfe.String(key)})
		if err != nil {
			t.Fatalf("a manage-run-tasks team member creating a task: %v", err)
		}
		<-got

		// Attach; a task in use stays; detach, then delete.
		_, err = c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: "blocking", RunTask: task})
		testenv.WantStatus(t, "an unknown enforcement level", err, "enforcement-level")
		bad := []tfe.Stage{"mid_plan"}
		_, err = c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, Stages: &bad, RunTask: task})
		testenv.WantStatus(t, "an unknown stage", err, "mid_plan")
		wt, err := c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, RunTask: task})
		if err != nil {
			t.Fatal(err)
		}
		//lint:ignore SA1019 the deprecated stage attribute is still sent by HCP Terraform and read by older clients; it must agree with stages.
		stage := wt.Stage
		if stage != tfe.PostPlan || len(wt.Stages) != 1 || wt.Stages[0] != tfe.PostPlan {
			t.Fatalf("default stages: %q %v, want post_plan", stage, wt.Stages)
		}
		_, err = c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Advisory, RunTask: task})
		testenv.WantStatus(t, "attaching a task twice", err, "already attached")
		err = c.RunTasks.Delete(ctx, task.ID)
		testenv.WantStatus(t, "deleting a task in use", err, "attached")
		if err := c.WorkspaceRunTasks.Delete(ctx, ws.ID, wt.ID); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{task.ID, t2.ID} {
			if err := c.RunTasks.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		_, err = c.RunTasks.Read(ctx, task.ID)
		testenv.WantErr(t, "reading a deleted task", err, tfe.ErrResourceNotFound)
	})
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}

func authed(r *http.Request, token string) *http.Request {
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// The callback takes running (many times), then passed or failed once;
// anything else is a 422 that changes nothing. Runs wait in
// pre_plan_running until the pre-plan stage ends.
func TestCallback(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan runtask.Payload, 4)
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var p runtask.Payload
			if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if p.AccessToken != runtask.TestToken {
				got <- p
			}
		}))
		defer svc.Close()
		task, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "gate", URL: svc.URL, Category: "task"})
		if err != nil {
			t.Fatal(err)
		}
		stages := []tfe.Stage{tfe.PrePlan}
		if _, err := c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, Stages: &stages, RunTask: task}); err != nil {
			t.Fatal(err)
		}
		cv, err := c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(emptyConfig(t))); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); cv.Status != tfe.ConfigurationUploaded; time.Sleep(20 * time.Millisecond) {
			if cv, err = c.ConfigurationVersions.Read(ctx, cv.ID); err != nil || time.Now().After(deadline) {
				t.Fatalf("configuration version %s is %s (%v)", cv.ID, cv.Status, err)
			}
		}
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		p := <-got
		if p.Stage != runtask.PrePlan || p.PlanJSONAPIURL != nil || p.RunID != r.ID || p.ConfigurationVersionID != cv.ID {
			t.Fatalf("pre-plan request: %+v", p)
		}
		call := func(body string) int {
			req, _ := http.NewRequest(http.MethodPatch, p.TaskResultCallbackURL, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+p.AccessToken)
			req.Header.Set("Content-Type", "application/vnd.api+json")
			res, err := e.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		status := func() tfe.TaskResultStatus {
			tr, err := c.TaskResults.Read(ctx, p.TaskResultID)
			if err != nil {
				t.Fatal(err)
			}
			return tr.Status
		}
		for _, bad := range []string{
			`{"data":{"type":"task-results","attributes":{"status":"errored"}}}`,
			`{"data":{"type":"task-results","attributes":{"status":"passed"},"relationships":{"outcomes":{"data":[{"type":"task-result-outcomes","attributes":{"outcome-id":"X","tags":{"Severity":[{"label":"High","level":"critical"}]}}}]}}}}`,
			`{"data":{"type":"workspaces","attributes":{"status":"passed"}}}`,
		} {
			if code := call(bad); code != http.StatusUnprocessableEntity {
				t.Fatalf("callback %s answered %d, want 422", bad, code)
			}
		}
		if s := status(); s == tfe.TaskPassed || s == tfe.TaskFailed {
			t.Fatalf("refused callbacks changed the result to %s", s)
		}
		for range 2 {
			if code := call(`{"data":{"type":"task-results","attributes":{"status":"running","message":"scanning"}}}`); code != http.StatusOK {
				t.Fatalf("a running callback answered %d", code)
			}
		}
		if s := status(); s != tfe.TaskRunning {
			t.Fatalf("after running callbacks the result is %s", s)
		}
		if run, err := c.Runs.Read(ctx, r.ID); err != nil || run.Status != tfe.RunPrePlanRunning {
			t.Fatalf("while its pre-plan task runs the run is %v (%v)", run.Status, err)
		}
		if code := call(`{"data":{"type":"task-results","attributes":{"status":"passed","message":"clean"}}}`); code != http.StatusOK {
			t.Fatalf("the passed callback answered %d", code)
		}
		if s := status(); s != tfe.TaskPassed {
			t.Fatalf("after the passed callback the result is %s", s)
		}
		// The stage ended: the token is gone with it.
		if code := call(`{"data":{"type":"task-results","attributes":{"status":"failed"}}}`); code != http.StatusUnauthorized {
			t.Fatalf("a callback after the stage ended answered %d, want 401", code)
		}
		if run, err := c.Runs.Read(ctx, r.ID); err != nil || run.Status == tfe.RunPrePlanRunning || run.Status == tfe.RunPending {
			t.Fatalf("after its pre-plan stage passed the run is %v (%v), want past it", run.Status, err)
		}
	})
}

// emptyConfig is a configuration archive with one empty main.tf.
func emptyConfig(t *testing.T) []byte {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
