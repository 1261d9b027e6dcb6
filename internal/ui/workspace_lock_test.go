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

// The workspace page offers Unlock only to the lock's holder, who alone
// may unlock; a lock held by a run (one waiting for confirmation) or by
// someone else names its holder, the run linked to its page, and is
// offered as Force unlock to the workspace's admins only, whom the API
// lets force-unlock; a writer, who may lock, is offered neither.
func TestWorkspaceLockOffersWhatTheHolderMayDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("writers"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessWrite), Team: team, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	writer := newTab(t, e, userToken(t, e, "acme", "writer@acme.test", team))
	owner := newTab(t, e, e.Token)
	const page = "/app/acme/workspaces/app"
	locked := func() *tfe.Workspace {
		t.Helper()
		w, err := e.Client.Workspaces.ReadByID(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	// A run waiting for confirmation holds the lock.
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	waitRunStatus(t, e, r.ID, tfe.RunPlanned)
	if w := locked(); !w.Locked || w.LockedBy == nil || w.LockedBy.Run == nil || w.LockedBy.Run.ID != r.ID {
		t.Fatalf("the workspace is not locked by the planned run %s: %+v", r.ID, w.LockedBy)
	}
	for _, tb := range []*tab{writer, owner} {
		tb.open(page)
		if got := tb.text("#lock-state"); !strings.Contains(got, "locked by run "+r.ID) {
			t.Fatalf("the lock held by run %s reads %q", r.ID, got)
		}
		if href := must(tb, chromedp.Evaluate[string](`document.querySelector('#lock-run').getAttribute('href')`)); href != page+"/runs/"+r.ID {
			t.Fatalf("the lock's run links to %q, want its page", href)
		}
		if tb.exists("#lock-form") {
			t.Fatalf("the lock held by run %s is offered to be unlocked: %q", r.ID, tb.text("#lock-form"))
		}
	}
	if writer.exists("#force-unlock-form") {
		t.Fatal("a writer, who may not force-unlock, is offered Force unlock")
	}
	owner.screenshot("locked-by-run")
	owner.press("#force-unlock-form button")
	owner.waitText("#lock-state", "unlocked", time.Minute)
	if w := locked(); w.Locked {
		t.Fatalf("Force unlock left the workspace locked by %+v", w.LockedBy)
	}
	wantPageEvent(t, e, "workspace", "force-unlock", ws.ID, http.StatusOK)

	// The writer's own lock: theirs to unlock, the owner's to force.
	writer.open(page)
	writer.press("#lock-form button")
	writer.waitText("#lock-state", "locked by you", time.Minute)
	if got := writer.text("#lock-form button"); got != "Unlock" || writer.exists("#force-unlock-form") {
		t.Fatalf("the holder is offered %q (force: %v), want Unlock", got, writer.exists("#force-unlock-form"))
	}
	owner.open(page)
	if got := owner.text("#lock-state"); !strings.Contains(got, "locked by user ") {
		t.Fatalf("the writer's lock reads %q to the owner", got)
	}
	if owner.exists("#lock-form") || !owner.exists("#force-unlock-form") {
		t.Fatalf("the owner is offered Unlock %v, Force unlock %v on the writer's lock; want Force unlock only", owner.exists("#lock-form"), owner.exists("#force-unlock-form"))
	}
	writer.press("#lock-form button")
	writer.waitText("#lock-state", "unlocked", time.Minute)

	// A writer posting a force-unlock anyway is refused, the lock kept.
	owner.open(page)
	owner.press("#lock-form button")
	owner.waitText("#lock-state", "locked by you", time.Minute)
	writer.open(page)
	if st := postFrom(writer, page+"/unlock", map[string]string{"force": "on"}); st != http.StatusForbidden {
		t.Fatalf("a writer's force-unlock: %d, want 403", st)
	}
	if !locked().Locked {
		t.Fatal("a writer's refused force-unlock unlocked the workspace")
	}
}
