package run_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// scoped is an organization where rita, a member whose team may read
// workspace wsread, may not see workspace wssecret; each has a finished
// plan-only run, and wssecret's run a comment.
type scoped struct {
	e                   *testenv.Env
	org                 string
	wsread, wssecret    *tfe.Workspace
	readRun, secretRun  *tfe.Run
	rita                *tfe.Client
	ritaToken           string
	secretComment       string
	secretCommentText   string
	secretRunEventIDs   []string
	secretPlanLogSecret string
}

func newScoped(t *testing.T, e *testenv.Env) *scoped {
	t.Helper()
	ctx := context.Background()
	c := e.Client
	s := &scoped{e: e, org: testenv.NewOrg(t, c, "acme").Name, secretCommentText: "the wssecret password is hunter2",
		secretPlanLogSecret: "wssecret-plan-output"}
	ws := func(name string) *tfe.Workspace {
		w, err := c.Workspaces.Create(ctx, s.org, tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	s.wsread, s.wssecret = ws("wsread"), ws("wssecret")
	runOn := func(w *tfe.Workspace, out string) *tfe.Run {
		cv := testenv.UploadConfig(ctx, t, c, w.ID, `output "o" { value = "`+out+`" }`)
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: w, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true),
			Variables: []*tfe.RunVariable{{Key: "region", Value: `"` + out + `"`}}})
		if err != nil {
			t.Fatal(err)
		}
		return testenv.WaitRun(ctx, t, c, r.ID, tfe.RunPlannedAndFinished, tfe.RunErrored)
	}
	s.readRun, s.secretRun = runOn(s.wsread, "wsread-plan-output"), runOn(s.wssecret, s.secretPlanLogSecret)
	cm, err := c.Comments.Create(ctx, s.secretRun.ID, tfe.CommentCreateOptions{Body: s.secretCommentText})
	if err != nil {
		t.Fatal(err)
	}
	s.secretComment = cm.ID
	evs, err := c.RunEvents.List(ctx, s.secretRun.ID, nil)
	if err != nil || len(evs.Items) == 0 {
		t.Fatalf("wssecret's run events: %v (%v)", evs, err)
	}
	for _, ev := range evs.Items {
		s.secretRunEventIDs = append(s.secretRunEventIDs, ev.ID)
	}
	readers, err := c.Teams.Create(ctx, s.org, tfe.TeamCreateOptions{Name: tfe.String("readers")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: readers, Workspace: s.wsread}); err != nil {
		t.Fatal(err)
	}
	var m *tfe.OrganizationMembership
	s.rita, m = e.UserClient(t, s.org, "rita@acme.test", readers)
	if _, s.ritaToken, err = e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rita.Workspaces.ReadByID(ctx, s.wssecret.ID); err != tfe.ErrResourceNotFound {
		t.Fatalf("rita reading wssecret: %v, want not found", err)
	}
	return s
}

// TestRunCommentsAndEventsByIDNeedTheRun: a comment or a run event named
// by its own ID is read by those who may read its run (RunRead, what its
// run's comments and events lists need), and is a 404 for a member who may
// not see the run's workspace.
func TestRunCommentsAndEventsByIDNeedTheRun(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := newScoped(t, e)
		if _, err := s.rita.Comments.List(ctx, s.secretRun.ID); err != tfe.ErrResourceNotFound {
			t.Fatalf("rita listing wssecret's run's comments: %v, want not found", err)
		}
		paths := []string{"/api/v2/comments/" + s.secretComment}
		for _, id := range s.secretRunEventIDs {
			paths = append(paths, "/api/v2/run-events/"+id, "/api/v2/run-events/"+id+"?include=comment")
		}
		for _, p := range paths {
			status, body := e.API(t, s.ritaToken, "GET", p, nil)
			if status != http.StatusNotFound || strings.Contains(string(body), "hunter2") {
				t.Errorf("rita GET %s: %d %s, want 404", p, status, body)
			}
		}
		// Those who may read the run still read them.
		if cm, err := e.Client.Comments.Read(ctx, s.secretComment); err != nil || cm.Body != s.secretCommentText {
			t.Errorf("the site admin reading the comment: %v, %v", cm, err)
		}
		for _, id := range s.secretRunEventIDs {
			if status, body := e.API(t, "", "GET", "/api/v2/run-events/"+id+"?include=comment", nil); status != http.StatusOK {
				t.Errorf("the site admin reading run event %s: %d %s", id, status, body)
			}
		}
		readComment, err := e.Client.Comments.Create(ctx, s.readRun.ID, tfe.CommentCreateOptions{Body: "fine"})
		if err != nil {
			t.Fatal(err)
		}
		if cm, err := s.rita.Comments.Read(ctx, readComment.ID); err != nil || cm.Body != "fine" {
			t.Errorf("rita reading a comment on wsread's run: %v, %v", cm, err)
		}
	})
}

// TestOrganizationRunListsShowReadableWorkspacesOnly: an organization's
// run list and its run queue hold the runs of the workspaces the caller
// may read, as the workspace list does, and nothing of the others (their
// run variables, workspace documents, plan and apply log URLs); the page
// and its count are the store's, so both count only those.
func TestOrganizationRunListsShowReadableWorkspacesOnly(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := newScoped(t, e)
		c := e.Client
		// A run of each workspace waiting in the queue: agent execution
		// with a pool no agent serves.
		pool, err := c.AgentPools.Create(ctx, s.org, tfe.AgentPoolCreateOptions{Name: tfe.String("idle")})
		if err != nil {
			t.Fatal(err)
		}
		queued := map[string]string{}
		for _, w := range []*tfe.Workspace{s.wsread, s.wssecret} {
			if _, err := c.Workspaces.UpdateByID(ctx, w.ID, tfe.WorkspaceUpdateOptions{ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)}); err != nil {
				t.Fatal(err)
			}
			cv := testenv.UploadConfig(ctx, t, c, w.ID, `output "o" { value = 1 }`)
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: w, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true),
				Variables: []*tfe.RunVariable{{Key: "region", Value: `"` + w.Name + `-queued"`}}})
			if err != nil {
				t.Fatal(err)
			}
			queued[w.Name] = testenv.WaitRun(ctx, t, c, r.ID, tfe.RunPlanQueued).ID
		}

		type list struct {
			Data []struct {
				ID            string `json:"id"`
				Relationships struct {
					Workspace struct {
						Data struct{ ID string } `json:"data"`
					} `json:"workspace"`
				} `json:"relationships"`
			} `json:"data"`
			Meta struct {
				Pagination map[string]any `json:"pagination"`
			} `json:"meta"`
		}
		get := func(token, path string) (list, string) {
			t.Helper()
			status, body := e.API(t, token, "GET", path, nil)
			if status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, status, body)
			}
			var l list
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatalf("GET %s: %v: %s", path, err, body)
			}
			return l, string(body)
		}
		secrets := []string{s.wssecret.ID, s.secretRun.ID, queued["wssecret"], s.secretPlanLogSecret, "wssecret-queued"}
		leaks := func(what, body string) {
			t.Helper()
			for _, x := range secrets {
				if strings.Contains(body, x) {
					t.Errorf("%s names %s of wssecret: %s", what, x, body)
				}
			}
		}
		ids := func(l list) []string {
			var out []string
			for _, r := range l.Data {
				out = append(out, r.ID)
			}
			return out
		}

		l, body := get(s.ritaToken, "/api/v2/organizations/"+s.org+"/runs?include=workspace,plan,apply,configuration_version")
		leaks("rita's organization run list", body)
		if got := ids(l); len(got) != 2 || !slices.Contains(got, s.readRun.ID) || !slices.Contains(got, queued["wsread"]) {
			t.Errorf("rita's organization run list: %v, want wsread's two runs", got)
		}
		// A page of one: the count and the pages are of what she may see.
		l, body = get(s.ritaToken, "/api/v2/organizations/"+s.org+"/runs?page[size]=1&page[number]=2")
		leaks("rita's second page of the organization run list", body)
		if got := ids(l); len(got) != 1 || got[0] != s.readRun.ID {
			t.Errorf("rita's second page of one: %v, want %s", got, s.readRun.ID)
		}
		if n := l.Meta.Pagination["total-count"]; n != float64(2) {
			t.Errorf("rita's organization run list counts %v runs, want 2", n)
		}
		if next := l.Meta.Pagination["next-page"]; next != nil {
			t.Errorf("rita's second page of two has a next page: %v", next)
		}
		// Filtered lists too (those filtered past the store).
		l, body = get(s.ritaToken, "/api/v2/organizations/"+s.org+"/runs?filter[workspace_names]=wssecret,wsread")
		leaks("rita's run list filtered by workspace names", body)
		if got := ids(l); len(got) != 2 {
			t.Errorf("rita's run list filtered by workspace names: %v, want wsread's two runs", got)
		}

		l, body = get(s.ritaToken, "/api/v2/organizations/"+s.org+"/runs/queue?include=workspace")
		leaks("rita's run queue", body)
		if got := ids(l); len(got) != 1 || got[0] != queued["wsread"] {
			t.Errorf("rita's run queue: %v, want %s", got, queued["wsread"])
		}

		// Those who read every workspace see every run.
		if l, _ := get("", "/api/v2/organizations/"+s.org+"/runs"); len(l.Data) != 4 {
			t.Errorf("the site admin's organization run list: %v, want 4 runs", ids(l))
		}
		if l, _ := get("", "/api/v2/organizations/"+s.org+"/runs/queue"); len(l.Data) != 2 {
			t.Errorf("the site admin's run queue: %v, want 2 runs", ids(l))
		}
	})
}
