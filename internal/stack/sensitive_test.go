package stack_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestSensitiveInputs: a deployment input whose stack variable is
// sensitive reaches terraform (the state holds it) but is never shown: the
// runs of the deployment's workspace list it with an empty value, the plan
// and apply logs do not contain it, even where the module prints it with
// nonsensitive(), and the plan's JSON output redacts the variable. Then
// cancelling a deployment run whose plan waits discards the saved plan.
func TestSensitiveInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	const secret = "s3cr3t-hunter2"
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, _, st := newStack(t, e, "secret", "vault", "")
		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/secret", nil)
		if err != nil {
			t.Fatal(err)
		}
		prod := waitRun(t, c, groupRun(t, c, cfg.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if prod.Status != "pre-deploying-pending-operator" {
			t.Fatalf("prod is %s; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}
		if err := c.StackDeploymentSteps.Advance(ctx, steps(t, c, prod.ID)[0].ID); err != nil {
			t.Fatal(err)
		}
		if prod = waitRun(t, c, prod.ID, is("succeeded", "failed")); prod.Status != "succeeded" {
			t.Fatalf("prod ended %s; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}

		ws := "stack-" + st.ID + "-prod"
		runs := workspaceRuns(t, c, org.Name, ws)
		if len(runs) == 0 {
			t.Fatal("the deployment's workspace has no runs")
		}
		read := func(rd io.Reader, err error) string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rd)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		shown := 0
		for _, r := range runs {
			found := false
			for _, v := range r.Variables {
				if v.Key == "token" {
					found = true
					if v.Value != "" {
						t.Errorf("run %s shows the sensitive input token = %q", r.ID, v.Value)
					}
				}
			}
			if !found {
				t.Errorf("run %s has no variable token: %+v", r.ID, r.Variables)
			}
			req, _ := http.NewRequest("GET", e.URL+"/api/v2/runs/"+r.ID, nil)
			req.Header.Set("Authorization", "Bearer "+e.Token)
			resp, err := e.HTTP.Do(req)
			if body := read(respBody(resp, err)); strings.Contains(body, secret) {
				t.Errorf("GET /runs/%s shows the secret: %s", r.ID, body)
			}
			full, err := c.Runs.ReadWithOptions(ctx, r.ID, &tfe.RunReadOptions{Include: []tfe.RunIncludeOpt{tfe.RunPlan, tfe.RunApply}})
			if err != nil {
				t.Fatal(err)
			}
			if log := read(c.Plans.Logs(ctx, full.Plan.ID)); strings.Contains(log, secret) {
				t.Errorf("the plan log of %s shows the secret:\n%s", r.ID, log)
			} else if strings.Contains(log, "terraform_data.leak") {
				shown++
			}
			// The plan's redacted JSON (the full one is for owners, as in
			// HCP Terraform): the variable is redacted (the leak
			// resource's value is terraform's own, declassified with
			// nonsensitive(), so it is not looked at).
			req, _ = http.NewRequest("GET", e.URL+"/api/v2/plans/"+full.Plan.ID+"/json-output-redacted", nil)
			req.Header.Set("Authorization", "Bearer "+e.Token)
			resp, err = e.HTTP.Do(req)
			js := read(respBody(resp, err))
			var plan struct {
				Variables map[string]struct {
					Value any `json:"value"`
				} `json:"variables"`
			}
			if err := json.Unmarshal([]byte(js), &plan); err != nil {
				t.Fatal(err)
			}
			if v, ok := plan.Variables["token"]; !ok || v.Value != nil {
				t.Errorf("the plan JSON of %s shows variable token as %v (present %v), want it redacted", r.ID, v.Value, ok)
			}
			if full.Status == tfe.RunApplied {
				if log := read(c.Applies.Logs(ctx, full.Apply.ID)); strings.Contains(log, secret) {
					t.Errorf("the apply log of %s shows the secret:\n%s", r.ID, log)
				}
			}
		}
		if shown == 0 {
			t.Error("no plan log mentions terraform_data.leak: the check of the log proves nothing")
		}
		// The value did reach terraform: the state holds it.
		w, err := c.Workspaces.Read(ctx, org.Name, ws)
		if err != nil {
			t.Fatal(err)
		}
		sv, err := c.StateVersions.ReadCurrent(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		state, err := c.StateVersions.Download(ctx, sv.DownloadURL)
		if err != nil || !strings.Contains(string(state), secret) {
			t.Errorf("the deployment's state does not hold the input (%v)", err)
		}

		// At rest, the input appears in no database row or blob file
		// (the deployment run's inputs, the workspace runs' variables,
		// the state and plans are sealed). Checked before the input
		// changes below, as the stored plan of that change holds the old
		// value (in the full plan JSON, for owners).
		e.Stop(t)
		testenv.AssertNoSecrets(t, e, st.ID, map[string]string{"sensitive input": secret})
		e = testenv.New(t, e.Opts)
		c = e.Client

		// Cancelling a run whose plan waits discards that saved plan.
		next := copyDir(t, "testdata/secret")
		rewrite(t, next+"/main.tfdeploy.hcl", secret, "an0ther-secret")
		cfg2, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, next, nil)
		if err != nil {
			t.Fatal(err)
		}
		waiting := waitRun(t, c, groupRun(t, c, cfg2.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if waiting.Status != "pre-deploying-pending-operator" {
			t.Fatalf("the second run is %s", waiting.Status)
		}
		saved := workspaceRuns(t, c, org.Name, ws)[0]
		if saved.Status != tfe.RunPlannedAndSaved {
			t.Fatalf("the waiting plan's run is %s", saved.Status)
		}
		// The changed input's plan prints the old value in the diff of
		// module.box.terraform_data.leak, whose input the module
		// declassified: the state does not mark it sensitive anywhere, so
		// the runner masks it as a sensitive input of the run that wrote
		// the state (Inputs.Masks), in the log and the redacted plan JSON,
		// and the new value as well.
		full, err := c.Runs.ReadWithOptions(ctx, saved.ID, &tfe.RunReadOptions{Include: []tfe.RunIncludeOpt{tfe.RunPlan}})
		if err != nil {
			t.Fatal(err)
		}
		log := read(c.Plans.Logs(ctx, full.Plan.ID))
		// (The quoted literal is masked whole: `"old"` -> `***`.)
		if !strings.Contains(log, `input  = *** -> ***`) {
			t.Errorf("the changed input's plan log does not show leak's old and new input masked:\n%s", log)
		}
		code, raw := e.API(t, "", http.MethodGet, "/api/v2/plans/"+full.Plan.ID+"/json-output-redacted", nil)
		if code != http.StatusOK {
			t.Fatalf("the changed input's redacted plan JSON: %d %s", code, raw)
		}
		js := string(raw)
		for what, text := range map[string]string{"plan log": log, "redacted plan JSON": js} {
			for _, v := range []string{secret, "an0ther-secret"} {
				if strings.Contains(text, v) {
					t.Errorf("the %s of the changed input's run %s holds %q", what, saved.ID, v)
				}
			}
		}
		if err := c.StackDeploymentRuns.Cancel(ctx, waiting.ID); err != nil {
			t.Fatal(err)
		}
		if r := waitRun(t, c, waiting.ID, is("abandoned", "failed", "succeeded")); r.Status != "abandoned" {
			t.Errorf("the cancelled run is %s, want abandoned", r.Status)
		}
		if r, err := c.Runs.Read(ctx, saved.ID); err != nil || r.Status != tfe.RunDiscarded {
			t.Errorf("the cancelled run's saved plan = %v, %v; want discarded", r.Status, err)
		}
	})
}

func respBody(resp *http.Response, err error) (io.Reader, error) {
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.NewReader(string(b)), err
}
