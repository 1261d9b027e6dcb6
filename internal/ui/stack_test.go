package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A stack deployment whose plan waits for an operator is approved from its
// run's page, and then deploys.
func TestApproveStackDeployment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Client.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "web", Project: &tfe.Project{ID: prj.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/stack", nil); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/stacks")
	tb.press(`#stacks a`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`section.deployment`)))
	// The deployment's run appears once the configuration is processed.
	var runLink string
	for deadline := time.Now().Add(2 * time.Minute); runLink == ""; time.Sleep(200 * time.Millisecond) {
		runLink = must(tb, chromedp.Evaluate[string](`(function(){var a=document.querySelector('section[data-deployment=prod] a');return a?a.getAttribute('href'):''})()`))
		if runLink == "" {
			if time.Now().After(deadline) {
				t.Fatalf("no run of deployment prod: %q", tb.text("main"))
			}
			tb.do(chromedp.Reload())
		}
	}
	tb.screenshot("stack")
	tb.open(runLink)
	for deadline := time.Now().Add(3 * time.Minute); !strings.Contains(tb.text("#stack-run-status"), "pending-operator"); time.Sleep(300 * time.Millisecond) {
		if s := tb.text("#stack-run-status"); s == "failed" || time.Now().After(deadline) {
			t.Fatalf("the deployment run is %s, want it waiting for approval", s)
		}
		tb.open(runLink)
	}
	if !strings.Contains(tb.text("#steps"), "pending-operator") || !strings.Contains(tb.text("#steps"), "+1") {
		t.Fatalf("steps: %q", tb.text("#steps"))
	}
	tb.screenshot("pending-approval")
	// The loop below reopens the page until the run has succeeded, and
	// then the approve form must be gone.
	tb.press(`#approve button`)
	for deadline := time.Now().Add(3 * time.Minute); tb.text("#stack-run-status") != "succeeded"; time.Sleep(300 * time.Millisecond) {
		if s := tb.text("#stack-run-status"); s == "failed" || time.Now().After(deadline) {
			t.Fatalf("after approval the deployment run is %s", s)
		}
		tb.open(runLink)
	}
	if tb.exists("#approve") {
		t.Fatal("a finished run still offers approval")
	}
	tb.screenshot("approved")
	wantPageEvent(t, e, "stack-deployment-run", "approve-all-plans", runLink[strings.LastIndex(runLink, "/")+1:], http.StatusNoContent)

	// A speculative plan is listed on its own, shown as one, and offers
	// no approval.
	if _, err := e.Client.Stacks.Update(ctx, st.ID, tfe.StackUpdateOptions{SpeculativeEnabled: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/stack", &tfe.CreateStackConfigurationOptions{SpeculativeEnabled: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	stackPage := strings.TrimSuffix(runLink[:strings.Index(runLink, "/stack-runs/")], "/") + "/stacks/" + st.ID
	tb.open(stackPage)
	specLink := must(tb, chromedp.Evaluate[string](`(function(){var a=document.querySelector('#speculative tr[data-deployment=prod] a');return a?a.getAttribute('href'):''})()`))
	if specLink == "" {
		t.Fatalf("the stack page lists no speculative plan: %q", tb.text("main"))
	}
	tb.screenshot("speculative-list")
	if strings.Contains(tb.text(`section[data-deployment=prod]`), specLink[strings.LastIndex(specLink, "/")+1:]) {
		t.Errorf("prod's own runs list the speculative plan: %q", tb.text(`section[data-deployment=prod]`))
	}
	tb.open(specLink)
	for deadline := time.Now().Add(3 * time.Minute); tb.text("#stack-run-status") != "succeeded"; time.Sleep(300 * time.Millisecond) {
		if s := tb.text("#stack-run-status"); s == "failed" || time.Now().After(deadline) {
			t.Fatalf("the speculative plan is %s", s)
		}
		tb.open(specLink)
	}
	if !strings.Contains(tb.text("main"), "speculative plan") || tb.exists("#approve") || !strings.Contains(tb.text("#steps"), "plan") {
		t.Errorf("the speculative plan's page: %q", tb.text("main"))
	}
	tb.screenshot("speculative")
}
