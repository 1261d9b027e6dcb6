package run_test

import (
	"context"
	"net/http"
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
