package ui_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A deployment run's page numbers its steps from 1, as the message of
// each step's workspace run does ("plan step 1").
func TestStackRunStepsNumberFromOne(t *testing.T) {
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
	runLink := regexp.MustCompile(`href="(/app/acme/stack-runs/[^"]+)"`)
	stepRow := regexp.MustCompile(`<tr><td>(\d+)</td><td>plan</td>.*?<a href="([^"]+)">log</a>`)
	var run, step, stepRun string
	for deadline := time.Now().Add(3 * time.Minute); step == ""; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no plan step with a run on %s", run)
		}
		if run == "" {
			_, body := getPage(t, e, e.Token, "/app/acme/stacks/"+st.ID)
			if m := runLink.FindStringSubmatch(body); m != nil {
				run = m[1]
			}
			continue
		}
		_, body := getPage(t, e, e.Token, run)
		if m := stepRow.FindStringSubmatch(between(body, `id="steps"`, "</table>")); m != nil {
			step, stepRun = m[1], m[2]
		}
	}
	if step != "1" {
		t.Errorf("the first plan step is numbered %s, want 1", step)
	}
	_, body := getPage(t, e, e.Token, stepRun)
	if h1 := between(body, "<h1>", "</h1>"); !strings.Contains(h1, "plan step "+step+" ") {
		t.Errorf("step %s's run says %q", step, h1)
	}
}
