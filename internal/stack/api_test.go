package stack_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestStackAPI drives stacks and their configurations through go-tfe's
// stack client on both stores: create, upload a real archive, read the
// groups and deployments it declares, and see a malformed configuration
// fail with diagnostics that name file and line.
func TestStackAPI(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "stacks")
		prj, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "platform"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "twotier", Project: &tfe.Project{ID: prj.ID}, Description: tfe.String("two components")})
		if err != nil {
			t.Fatalf("creating stack: %v", err)
		}
		if !strings.HasPrefix(st.ID, "st-") || st.Name != "twotier" || st.Project == nil || st.Project.ID != prj.ID {
			t.Fatalf("stack = %+v", st)
		}
		if _, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "twotier", Project: &tfe.Project{ID: prj.ID}}); err == nil {
			t.Error("a second stack of the same name in the project was created")
		}
		// A connection through a token that does not exist is refused
		// before anything is kept (TestVCSBackedStack connects one).
		_, err = c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "vcs", Project: &tfe.Project{ID: prj.ID},
			VCSRepo: &tfe.StackVCSRepoOptions{Identifier: "acme/infra", OAuthTokenID: "ot-x"}})
		if err != tfe.ErrResourceNotFound {
			t.Errorf("a stack connected through a missing token: err = %v, want not found", err)
		}
		list, err := c.Stacks.List(ctx, org.Name, &tfe.StackListOptions{ProjectID: prj.ID, SearchByName: "TWO"})
		if err != nil || len(list.Items) != 1 || list.Items[0].ID != st.ID {
			t.Fatalf("list = %+v, %v", list, err)
		}
		st, err = c.Stacks.Update(ctx, st.ID, tfe.StackUpdateOptions{Description: tfe.String("changed")})
		if err != nil || st.Description != "changed" {
			t.Fatalf("update = %+v, %v", st, err)
		}

		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/tfdata", nil)
		if err != nil {
			t.Fatalf("uploading: %v", err)
		}
		cfg, err = c.StackConfigurations.Read(ctx, cfg.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Status != tfe.StackConfigurationStatusCompleted || cfg.SequenceNumber != 1 || len(cfg.Components) != 2 {
			// (go-tfe decodes StackComponent with json tags that its
			// JSON:API decoder ignores: only the count arrives.)
			t.Fatalf("configuration = %+v", cfg)
		}
		groups, err := c.StackDeploymentGroups.List(ctx, cfg.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, g := range groups.Items {
			names = append(names, g.Name)
			// The runs have started, or are about to.
			if g.Status != "pending" && g.Status != "deploying" {
				t.Errorf("group %s is %s", g.Name, g.Status)
			}
		}
		if got := strings.Join(names, " "); got != "canary dev_default prod_default" {
			t.Errorf("groups = %s", got)
		}
		g, err := c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, "canary")
		if err != nil || g.StackConfiguration == nil || g.StackConfiguration.ID != cfg.ID {
			t.Fatalf("group by name = %+v, %v", g, err)
		}
		if g2, err := c.StackDeploymentGroups.Read(ctx, g.ID); err != nil || g2.Name != "canary" {
			t.Errorf("group = %+v, %v", g2, err)
		}
		sums, err := c.StackDeploymentGroupSummaries.List(ctx, cfg.ID, nil)
		if err != nil || len(sums.Items) != 3 {
			t.Fatalf("group summaries = %+v, %v", sums, err)
		}
		// Runs are under way: each group's one run is counted once, in
		// whatever status it has reached.
		for _, sm := range sums.Items {
			c := sm.StatusCounts
			if c == nil || c.Pending+c.PreDeploying+c.PreDeployingPendingOperator+c.AcquiringLock+c.Deploying+c.Succeeded+c.Failed+c.Abandoned != 1 {
				t.Errorf("group summary %s counts %+v", sm.Name, c)
			}
		}
		deps, err := c.StackDeployments.List(ctx, st.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		names = nil
		for _, d := range deps.Items {
			names = append(names, d.Name)
		}
		if got := strings.Join(names, " "); got != "dev prod staging" {
			t.Errorf("deployments = %s", got)
		}

		// A malformed configuration fails with diagnostics.
		bad, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/broken", nil)
		if err != nil {
			t.Fatal(err)
		}
		bad, err = c.StackConfigurations.Read(ctx, bad.ID)
		if err != nil || bad.Status != tfe.StackConfigurationStatusFailed || bad.SequenceNumber != 2 {
			t.Fatalf("broken configuration = %+v, %v", bad, err)
		}
		diags, err := c.StackConfigurations.Diagnostics(ctx, bad.ID)
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, d := range diags.Items {
			if len(d.Diags) != 1 || d.Diags[0].Range == nil || d.Diags[0].Snippet == nil {
				t.Fatalf("diagnostic without a range or snippet: %+v", d)
			}
			seen = append(seen, d.Severity+": "+d.Summary+" at "+d.Diags[0].Range.Filename+":"+strconv.Itoa(d.Diags[0].Range.Start.Line))
		}
		want := "error: Missing variable type at main.tfcomponent.hcl:1 | error: Unsupported block type at main.tfcomponent.hcl:5"
		if got := strings.Join(seen, " | "); got != want {
			t.Errorf("diagnostics:\n got %s\nwant %s", got, want)
		}
		if one, err := c.StackDiagnostics.Read(ctx, diags.Items[1].ID); err != nil || one.Diags[0].Snippet.Code != `resource "terraform_data" "stray" {}` {
			t.Errorf("diagnostic = %+v, %v", one, err)
		}
		// The failed configuration has no groups: nothing of it runs.
		if groups, err := c.StackDeploymentGroups.List(ctx, bad.ID, nil); err != nil || len(groups.Items) != 0 {
			t.Errorf("groups of a failed configuration = %+v, %v", groups, err)
		}
		// The failed configuration changed no deployment.
		if deps, err := c.StackDeployments.List(ctx, st.ID, nil); err != nil || len(deps.Items) != 3 {
			t.Errorf("deployments after a failed configuration = %+v, %v", deps, err)
		}
		sum, err := c.StackConfigurationSummaries.List(ctx, st.ID, nil)
		if err != nil || len(sum.Items) != 2 || sum.Items[0].Status != "failed" || sum.Items[1].Status != "completed" {
			t.Errorf("summaries = %+v, %v", sum, err)
		}
		// No upload URL once the archive has arrived.
		if err := c.StackConfigurations.UploadTarGzip(ctx, e.URL+"/_cap/0/x/stack-configurations/"+cfg.ID+"/upload", strings.NewReader("x")); err == nil {
			t.Error("an unsigned upload was accepted")
		}

		if err := c.Stacks.Delete(ctx, st.ID); err == nil || !errors.Is(err, tfe.ErrResourceNotFound) && !strings.Contains(err.Error(), "force") {
			t.Errorf("deleting a stack with deployments: %v", err)
		}
		if err := c.Projects.Delete(ctx, prj.ID); err == nil {
			t.Errorf("deleting a project holding a stack: %v", err)
		}
		if err := c.Stacks.ForceDelete(ctx, st.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Stacks.Read(ctx, st.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("read after delete: %v", err)
		}
	})
}

// TestStackReuseAndBadArchive uses the raw API for what go-tfe does not
// wrap: source=reuse, and an upload that is not an archive.
func TestStackReuseAndBadArchive(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	c := e.Client
	org := testenv.NewOrg(t, c, "reuse")
	prj, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "s", Project: &tfe.Project{ID: prj.ID}})
	if err != nil {
		t.Fatal(err)
	}
	// A project holding a stack is not deleted.
	empty, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "held", Project: &tfe.Project{ID: empty.ID}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Projects.Delete(ctx, empty.ID); err == nil || !strings.Contains(err.Error(), "stacks") {
		t.Errorf("deleting a project holding a stack: %v", err)
	}
	post := func(path string) *http.Response {
		req, _ := http.NewRequest("POST", e.URL+"/api/v2"+path, strings.NewReader(`{"data":{"type":"stack-configurations","attributes":{}}}`))
		req.Header.Set("Authorization", "Bearer "+e.Token)
		req.Header.Set("Content-Type", "application/vnd.api+json")
		resp, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("/stacks/" + st.ID + "/stack-configurations?source=reuse"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("reuse with nothing uploaded: %d", resp.StatusCode)
	}
	// terraform-version (the engine of the deployments) must be a version.
	req, _ := http.NewRequest("PATCH", e.URL+"/api/v2/stacks/"+st.ID,
		strings.NewReader(`{"data":{"type":"stacks","attributes":{"terraform-version":"1.x; rm -rf"}}}`))
	req.Header.Set("Authorization", "Bearer "+e.Token)
	req.Header.Set("Content-Type", "application/vnd.api+json")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	detail, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(detail), "is not a version") {
		t.Errorf("a bad terraform-version: %d %s", resp.StatusCode, detail)
	}
	setEngine(t, e, st.ID, "1.12.6")
	first, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/tfdata", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp := post("/stacks/" + st.ID + "/stack-configurations?source=reuse"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("reuse: %d", resp.StatusCode)
	}
	list, err := c.StackConfigurations.List(ctx, st.ID, nil)
	if err != nil || len(list.Items) != 2 || list.Items[0].Status != tfe.StackConfigurationStatusCompleted || list.Items[1].ID != first.ID {
		t.Fatalf("configurations = %+v, %v", list, err)
	}

	// Garbage instead of a tar.gz: the configuration fails with a diagnostic.
	cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ = c.StackConfigurations.Read(ctx, cfg.ID)
	if cfg.Status != tfe.StackConfigurationStatusFailed {
		t.Errorf("empty folder: status %s", cfg.Status)
	}
	diags, err := c.StackConfigurations.Diagnostics(ctx, cfg.ID)
	if err != nil || len(diags.Items) != 2 || diags.Items[0].Summary != "No components" {
		t.Errorf("diagnostics = %+v, %v", diags, err)
	}
}
