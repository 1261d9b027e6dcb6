package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/testprovider"
)

// assessmentJSON is an assessment-results resource as the API sends it.
type assessmentJSON struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Attributes struct {
		Drifted          bool     `json:"drifted"`
		Succeeded        bool     `json:"succeeded"`
		ErrorMsg         *string  `json:"error-msg"`
		Status           string   `json:"status"`
		ResourcesDrifted int      `json:"resources-drifted"`
		Undrifted        int      `json:"resources-undrifted"`
		DriftedResources []string `json:"drifted-resources"`
		CreatedAt        string   `json:"created-at"`
	} `json:"attributes"`
}

// api sends a request as the site admin and decodes the answer into out
// (when not nil), failing the test unless the status is want.
func api(t *testing.T, e *testenv.Env, method, path string, want int, out any) {
	t.Helper()
	code, raw := e.API(t, "", method, path, nil)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// assessments lists a workspace's assessment results, newest first.
func assessments(t *testing.T, e *testenv.Env, wsID string) []assessmentJSON {
	var doc struct {
		Data []assessmentJSON `json:"data"`
	}
	api(t, e, "GET", "/api/v2/workspaces/"+wsID+"/assessment-results", http.StatusOK, &doc)
	return doc.Data
}

// waitAssessment waits for a finished assessment created after since and
// returns it.
func waitAssessment(t *testing.T, e *testenv.Env, wsID string, since time.Time, limit time.Duration) assessmentJSON {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		for _, a := range assessments(t, e, wsID) {
			at, _ := time.Parse(time.RFC3339, a.Attributes.CreatedAt)
			if a.Attributes.Status != "queued" && !at.Before(since.Truncate(time.Second)) {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no finished assessment of %s since %s after %s: %+v", wsID, since, limit, assessments(t, e, wsID))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const driftConfig = `
resource "local_file" "f" {
  filename = %q
  content  = "as terraform wrote it"
}
resource "terraform_data" "a" { input = "a" }
`

// driftWorkspace creates a workspace with assessments enabled whose
// configuration manages a file on disk, with a receiver of its
// assessment notifications, and applies it.
func driftWorkspace(ctx context.Context, t *testing.T, e *testenv.Env, file string) (*tfe.Workspace, *webhook) {
	t.Helper()
	c := e.Client
	org := testenv.NewOrg(t, c, "acme")
	ws, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("files"), AssessmentsEnabled: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if !ws.AssessmentsEnabled {
		t.Fatal("assessments-enabled did not stick on the new workspace")
	}
	const secret = "drift-hmac-key"
	hook := newWebhook(t, secret, 0)
	if _, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
		DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
		Name: tfe.String("drift"), Token: tfe.String(secret), URL: tfe.String(hook.srv.URL),
		Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerAssessmentDrifted, tfe.NotificationTriggerAssessmentFailed,
			tfe.NotificationTriggerAssessmentCheckFailed},
	}); err != nil {
		t.Fatal(err)
	}
	hook.waitFor(10*time.Second, "verification")
	cv := uploadConfig(ctx, t, c, ws.ID, fmt.Sprintf(driftConfig, file))
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)
	if b, err := os.ReadFile(file); err != nil || string(b) != "as terraform wrote it" {
		t.Fatalf("the apply did not write %s: %q %v", file, b, err)
	}
	return ws, hook
}

// checkDrifted checks a drifted assessment: the notification the receiver
// got (HMAC verified, v2 payload), the result through the API, and the
// workspace's current-assessment-result.
func checkDrifted(ctx context.Context, t *testing.T, e *testenv.Env, ws *tfe.Workspace, hook *webhook) {
	t.Helper()
	hook.waitFor(3*time.Minute, "assessment:drifted")
	_, delivered, bad := hook.counts()
	if bad != 0 {
		t.Fatalf("%d deliveries had a wrong signature", bad)
	}
	if delivered["assessment:drifted"] != 1 {
		t.Fatalf("assessment:drifted delivered %d times, want once: %v", delivered["assessment:drifted"], delivered)
	}
	var p struct {
		PayloadVersion string `json:"payload_version"`
		TriggerScope   string `json:"trigger_scope"`
		Trigger        string `json:"trigger"`
		Details        struct {
			New struct {
				ID               string `json:"id"`
				Drifted          bool   `json:"drifted"`
				Succeeded        bool   `json:"succeeded"`
				ResourcesDrifted int    `json:"resources_drifted"`
				Undrifted        int    `json:"resources_undrifted"`
			} `json:"new_assessment_result"`
			Prior *struct {
				Drifted bool `json:"drifted"`
			} `json:"prior_assessment_result"`
			WorkspaceName string `json:"workspace_name"`
			Organization  string `json:"organization_name"`
		} `json:"details"`
	}
	hook.mu.Lock()
	err := json.Unmarshal(hook.bodies["assessment:drifted"], &p)
	hook.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	d := p.Details
	if p.PayloadVersion != "2" || p.TriggerScope != "assessment" || p.Trigger != "assessment:drifted" || !d.New.Drifted || !d.New.Succeeded ||
		d.New.ResourcesDrifted != 1 || d.New.Undrifted != 1 || d.WorkspaceName != "files" || d.Organization != "acme" {
		t.Fatalf("assessment:drifted payload: %+v", p)
	}
	if d.Prior == nil || d.Prior.Drifted {
		t.Fatalf("the drifted assessment's prior result should be the undrifted one: %+v", d.Prior)
	}
	// The workspace names the drifted result as its current one.
	var wdoc struct {
		Data struct {
			Relationships struct {
				Current struct {
					Data *struct {
						ID   string `json:"id"`
						Type string `json:"type"`
					} `json:"data"`
				} `json:"current-assessment-result"`
			} `json:"relationships"`
		} `json:"data"`
	}
	api(t, e, "GET", "/api/v2/workspaces/"+ws.ID, http.StatusOK, &wdoc)
	cur := wdoc.Data.Relationships.Current.Data
	if cur == nil || cur.ID != d.New.ID || cur.Type != "assessment-results" {
		t.Fatalf("current-assessment-result: %+v, want %s", cur, d.New.ID)
	}
	var adoc struct {
		Data assessmentJSON `json:"data"`
	}
	api(t, e, "GET", "/api/v2/assessment-results/"+cur.ID, http.StatusOK, &adoc)
	a := adoc.Data.Attributes
	if !a.Drifted || !a.Succeeded || a.ErrorMsg != nil || a.ResourcesDrifted != 1 || len(a.DriftedResources) != 1 || a.DriftedResources[0] != "local_file.f" {
		t.Fatalf("assessment result %s: %+v", cur.ID, a)
	}
	// Assessments are not runs of the run queue: the workspace lists only
	// the apply.
	runs, err := e.Client.Runs.List(ctx, ws.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs.Items) != 1 {
		t.Fatalf("the workspace lists %d runs, want only its apply (assessments are not listed)", len(runs.Items))
	}
}

// TestAssessmentDrift: a file managed by terraform (the stand-in
// local_file) is changed behind terraform's back; the next scheduled
// assessment finds it drifted, a receiver verifying the HMAC gets
// assessment:drifted once, and the workspace shows the result. Then the
// file is put back and an assessment started on request finds no drift.
func TestAssessmentDrift(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	mirror, err := testprovider.WriteMirror(t.TempDir(), testprovider.Options{Providers: []testprovider.Provider{testprovider.Null, testprovider.Local}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := testenv.New(t, testenv.Options{Store: st, RunCLIConfig: mirror, AssessmentInterval: 500 * time.Millisecond})
			file := filepath.Join(t.TempDir(), "managed.txt")
			ws, hook := driftWorkspace(ctx, t, e, file)
			// The scheduler assesses the workspace as applied: no drift.
			first := waitAssessment(t, e, ws.ID, time.Now(), 3*time.Minute)
			if !first.Attributes.Succeeded || first.Attributes.Drifted {
				t.Fatalf("an assessment right after the apply: %+v", first.Attributes)
			}
			if err := os.WriteFile(file, []byte("changed behind terraform's back"), 0o644); err != nil {
				t.Fatal(err)
			}
			checkDrifted(ctx, t, e, ws, hook)
		})
	}
}

// TestAssessmentOnRequest: with the scheduler off, an assessment starts
// only when asked for (POST /workspaces/:id/actions/assess), by a caller
// who may plan there and only when assessments are enabled; it finds the
// drift and notifies as a scheduled one does.
func TestAssessmentOnRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	mirror, err := testprovider.WriteMirror(t.TempDir(), testprovider.Options{Providers: []testprovider.Provider{testprovider.Null, testprovider.Local}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := testenv.New(t, testenv.Options{Store: st, RunCLIConfig: mirror, AssessmentInterval: -1})
			file := filepath.Join(t.TempDir(), "managed.txt")
			ws, hook := driftWorkspace(ctx, t, e, file)
			if got := assessments(t, e, ws.ID); len(got) != 0 {
				t.Fatalf("with the scheduler off, %d assessments ran unasked", len(got))
			}
			before := time.Now()
			var doc struct {
				Data assessmentJSON `json:"data"`
			}
			api(t, e, "POST", "/api/v2/workspaces/"+ws.ID+"/actions/assess", http.StatusAccepted, &doc)
			if doc.Data.Type != "assessment-results" || doc.Data.Attributes.Status != "queued" {
				t.Fatalf("starting an assessment answered %+v", doc.Data)
			}
			first := waitAssessment(t, e, ws.ID, before, 3*time.Minute)
			if first.ID != doc.Data.ID || !first.Attributes.Succeeded || first.Attributes.Drifted {
				t.Fatalf("the requested assessment: %+v", first)
			}
			if err := os.WriteFile(file, []byte("changed behind terraform's back"), 0o644); err != nil {
				t.Fatal(err)
			}
			api(t, e, "POST", "/api/v2/workspaces/"+ws.ID+"/actions/assess", http.StatusAccepted, nil)
			checkDrifted(ctx, t, e, ws, hook)

			// An assessment whose plan fails (terraform refuses an unknown
			// flag) is recorded as failed and sends assessment:failed.
			if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("TF_CLI_ARGS_plan"),
				Value: tfe.String("-no-such-flag"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
				t.Fatal(err)
			}
			before = time.Now()
			api(t, e, "POST", "/api/v2/workspaces/"+ws.ID+"/actions/assess", http.StatusAccepted, nil)
			hook.waitFor(3*time.Minute, "assessment:failed")
			bad := waitAssessment(t, e, ws.ID, before, time.Minute)
			if bad.Attributes.Succeeded || bad.Attributes.Status != "errored" || bad.Attributes.ErrorMsg == nil || *bad.Attributes.ErrorMsg == "" {
				t.Fatalf("a failed assessment: %+v", bad.Attributes)
			}
			if _, _, sigs := hook.counts(); sigs != 0 {
				t.Fatalf("%d deliveries had a wrong signature", sigs)
			}
			// Three results, newest first; the store selects a page and
			// counts them all.
			all := assessments(t, e, ws.ID)
			if len(all) != 3 || all[0].ID != bad.ID || all[2].ID != first.ID {
				t.Fatalf("the workspace lists %d assessments, want the failed one first and the first one last: %+v", len(all), all)
			}
			var page struct {
				Data []assessmentJSON `json:"data"`
				Meta struct {
					Pagination struct {
						Total int `json:"total-count"`
						Page  int `json:"current-page"`
					} `json:"pagination"`
				} `json:"meta"`
			}
			api(t, e, "GET", "/api/v2/workspaces/"+ws.ID+"/assessment-results?page%5Bnumber%5D=2&page%5Bsize%5D=1", http.StatusOK, &page)
			if len(page.Data) != 1 || page.Data[0].ID != all[1].ID || page.Meta.Pagination.Total != 3 || page.Meta.Pagination.Page != 2 {
				t.Fatalf("page 2 of 1: %+v, want %s of 3", page, all[1].ID)
			}

			// A workspace without assessments enabled is refused with a
			// message saying so.
			other, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("plain")})
			if err != nil {
				t.Fatal(err)
			}
			var errDoc struct {
				Errors []struct {
					Detail string `json:"detail"`
				} `json:"errors"`
			}
			api(t, e, "POST", "/api/v2/workspaces/"+other.ID+"/actions/assess", http.StatusUnprocessableEntity, &errDoc)
			if len(errDoc.Errors) != 1 || !strings.Contains(errDoc.Errors[0].Detail, "assessments-enabled") {
				t.Fatalf("assessing a workspace without assessments: %+v", errDoc)
			}
			api(t, e, "GET", "/api/v2/assessment-results/asmtres-nosuchthing", http.StatusNotFound, nil)
		})
	}
}
