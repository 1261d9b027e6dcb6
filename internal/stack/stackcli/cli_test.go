package stackcli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func run(t *testing.T, e *testenv.Env, args ...string) (string, error) {
	t.Helper()
	cmd := Command(e.HTTP)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--address", e.URL, "--token", e.Token))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestStackCommands uploads a stack with the CLI, watches dev converge and
// prod wait, approves prod and watches it converge.
func TestStackCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	org := testenv.NewOrg(t, e.Client, "cli")
	prj, err := e.Client.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Client.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "web", Project: &tfe.Project{ID: prj.ID}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, e, "upload", st.ID, "../testdata/broken")
	if err == nil || !strings.Contains(out, "error: main.tfcomponent.hcl:5,1: Unsupported block type") {
		t.Errorf("broken upload: %v\n%s", err, out)
	}
	out, err = run(t, e, "upload", st.ID, "../testdata/e2e")
	if err != nil || !strings.Contains(out, ": completed") {
		t.Fatalf("upload: %v\n%s", err, out)
	}
	out, err = run(t, e, "deployments", st.ID)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+)\s+\S+\s+(sdr-\w+)$`).FindAllStringSubmatch(out, -1) {
		ids[m[1]] = m[2]
	}
	if ids["dev"] == "" || ids["prod"] == "" {
		t.Fatalf("deployments:\n%s", out)
	}
	if out, err := run(t, e, "watch", ids["dev"]); err != nil || !strings.Contains(out, "run "+ids["dev"]+" succeeded") ||
		!strings.Contains(out, "  | Plan: ") || !strings.Contains(out, "  | Apply complete!") {
		t.Errorf("watch dev: %v\n%s", err, out)
	}
	if out, err := run(t, e, "watch", ids["prod"]); err != nil || !strings.Contains(out, "waits for approval") {
		t.Fatalf("watch prod: %v\n%s", err, out)
	}
	if out, err := run(t, e, "approve", ids["prod"]); err != nil {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	out, err = run(t, e, "watch", ids["prod"])
	if err != nil || !strings.Contains(out, "step 2 apply  completed") || !strings.Contains(out, "succeeded") {
		t.Errorf("watch prod after approval: %v\n%s", err, out)
	}
	if out, err := run(t, e, "runs", st.ID, "prod"); err != nil || !strings.Contains(out, ids["prod"]+"  succeeded") {
		t.Errorf("runs: %v\n%s", err, out)
	}
	if _, err := run(t, e, "cancel", ids["prod"]); err == nil {
		t.Error("cancelled a finished run")
	}

	// A speculative upload lists its runs; each only plans.
	if out, err := run(t, e, "upload", "--speculative", st.ID, "../testdata/e2e"); err == nil {
		t.Errorf("a speculative upload to a stack without speculative-enabled: %s", out)
	}
	if _, err := e.Client.Stacks.Update(ctx, st.ID, tfe.StackUpdateOptions{SpeculativeEnabled: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, e, "upload", "--speculative", "--deployment", "prod", st.ID, "../testdata/e2e")
	runs := regexp.MustCompile(`(?m)^run (sdr-\w+) \(group prod_default\)`).FindStringSubmatch(out)
	if err != nil || !strings.Contains(out, ", speculative): completed") || runs == nil || strings.Count(out, "\nrun ") != 1 {
		t.Fatalf("speculative upload of prod alone: %v\n%s", err, out)
	}
	out, err = run(t, e, "watch", runs[1])
	if err != nil || !strings.Contains(out, "step 1 plan   completed") || !strings.Contains(out, "  | No changes.") ||
		strings.Contains(out, "step 2") || !strings.Contains(out, "run "+runs[1]+" succeeded") {
		t.Errorf("watch a speculative run: %v\n%s", err, out)
	}
	if out, err := run(t, e, "deployments", st.ID); err != nil || !strings.Contains(out, ids["prod"]) {
		t.Errorf("after a speculative plan prod's latest run is not %s any more: %v\n%s", ids["prod"], err, out)
	}
}
