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

// createChoice is an option of the new workspace form's project select.
type createChoice struct {
	ID, Name string
	Selected bool
}

var optionRE = regexp.MustCompile(`<option value="([^"]*)"\s*(selected)?>([^<]*)</option>`)

// createChoices reads the new workspace form's project choices off the
// workspaces page.
func createChoices(t *testing.T, body string) []createChoice {
	t.Helper()
	form := between(body, `id="create-ws"`, "</form>")
	sel := between(form, `<select name="project">`, "</select>")
	if sel == "" {
		t.Fatalf("no project select in the new workspace form: %q", form)
	}
	var out []createChoice
	for _, m := range optionRE.FindAllStringSubmatch(sel, -1) {
		out = append(out, createChoice{ID: m[1], Name: m[3], Selected: m[2] != ""})
	}
	return out
}

// The new workspace form offers the projects the caller may create a
// workspace in, each once, with the default project chosen when the
// caller may create there; there is no second, empty "default" choice.
func TestNewWorkspaceFormOffersTheProjectsOneMayCreateIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	platform, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	apps, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "apps"})
	if err != nil {
		t.Fatal(err)
	}

	_, body := getPage(t, e, e.Token, "/app/acme/workspaces")
	got := createChoices(t, body)
	if len(got) != 3 {
		t.Fatalf("the admin's choices: %+v, want the three projects", got)
	}
	for _, c := range got {
		if c.ID == "" {
			t.Errorf("a choice without a project: %+v", got)
		}
		if c.Selected != (c.Name == "Default Project") {
			t.Errorf("choice %+v: only the default project is chosen at first", c)
		}
	}

	// A member whose team maintains one project and reads another may
	// create workspaces in the first only: it is the one choice, and
	// chosen.
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("platform"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessMaintain, Team: team, Project: platform}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: team, Project: apps}); err != nil {
		t.Fatal(err)
	}
	_, body = getPage(t, e, userToken(t, e, "acme", "member@acme.test", team), "/app/acme/workspaces")
	if got := createChoices(t, body); len(got) != 1 || got[0].ID != platform.ID || !got[0].Selected {
		t.Fatalf("the member's choices: %+v, want only %s, chosen", got, platform.ID)
	}
}

// A stack's deployment workspace is listed with the stack it belongs to,
// linked, so nobody takes stack-<id>-prod for a workspace of theirs.
func TestWorkspaceListNamesTheStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	st, err := e.Client.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "web", Project: &tfe.Project{ID: defaultProject(t, e, "acme")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/stack", nil); err != nil {
		t.Fatal(err)
	}
	name := "stack-" + st.ID + "-prod"
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := e.Client.Workspaces.Read(ctx, "acme", name); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stack made no workspace %s", name)
		}
	}
	if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("mine")}); err != nil {
		t.Fatal(err)
	}
	_, body := getPage(t, e, e.Token, "/app/acme/workspaces")
	row := between(body, `href="/app/acme/workspaces/`+name+`"`, "</tr>")
	if want := `deployment of stack <a href="/app/acme/stacks/` + st.ID + `">web</a>`; !strings.Contains(row, want) {
		t.Errorf("the stack's workspace's row: %q, want %s", row, want)
	}
	if row := between(body, `href="/app/acme/workspaces/mine"`, "</tr>"); row == "" || strings.Contains(row, "deployment of stack") {
		t.Errorf("a workspace of people's: %q, want no stack named", row)
	}
}

// defaultProject is the ID of org's default project.
func defaultProject(t *testing.T, e *testenv.Env, org string) string {
	t.Helper()
	ps, err := e.Client.Projects.List(context.Background(), org, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps.Items {
		if p.Name == "Default Project" {
			return p.ID
		}
	}
	t.Fatalf("%s has no default project", org)
	return ""
}
