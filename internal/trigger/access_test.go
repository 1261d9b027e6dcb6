package trigger_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestRunTriggersNeedTheirWorkspaces: a run trigger named by ID is read by
// those who may read its workspace (what its workspace's trigger list
// needs) and is a 404 for others; a workspace admin cannot make a
// workspace she may not see the source of her workspace's trigger (404,
// as for one that does not exist), as HCP Terraform asks to read the
// source's runs; and a response includes the documents of the trigger's
// workspaces the caller may read, not the others.
func TestRunTriggersNeedTheirWorkspaces(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		ws := map[string]*tfe.Workspace{}
		for _, name := range []string{"wsread", "wssecret", "wshidden", "wsmine"} {
			w, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			ws[name] = w
		}
		team := func(name string, grants map[string]tfe.AccessType) string {
			tm, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			for w, a := range grants {
				if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(a), Team: tm, Workspace: ws[w]}); err != nil {
					t.Fatal(err)
				}
			}
			_, m := e.UserClient(t, org, name+"@acme.test", tm)
			_, token, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			return token
		}
		rita := team("rita", map[string]tfe.AccessType{"wsread": tfe.AccessRead})
		ada := team("ada", map[string]tfe.AccessType{"wsmine": tfe.AccessAdmin, "wsread": tfe.AccessRead})

		create := func(token, target, source string) (int, string) {
			t.Helper()
			status, body := e.API(t, token, "POST", "/api/v2/workspaces/"+ws[target].ID+"/run-triggers", map[string]any{"data": map[string]any{
				"relationships": map[string]any{"sourceable": map[string]any{"data": map[string]any{"type": "workspaces", "id": ws[source].ID}}}}})
			var doc struct {
				Data struct{ ID string } `json:"data"`
			}
			_ = json.Unmarshal(body, &doc)
			return status, doc.Data.ID
		}
		if status, _ := create(ada, "wsmine", "wssecret"); status != http.StatusNotFound {
			t.Errorf("a workspace admin making a workspace she cannot see her trigger's source: %d, want 404", status)
		}
		if status, _ := create(ada, "wsmine", "wsread"); status != http.StatusCreated {
			t.Errorf("a workspace admin making a workspace she may read her trigger's source: %d, want 201", status)
		}
		status, outOfSight := create("", "wssecret", "wsread") // wsread triggers wssecret
		if status != http.StatusCreated {
			t.Fatalf("the site admin creating a trigger: %d", status)
		}
		status, intoSight := create("", "wsread", "wshidden") // wshidden triggers wsread
		if status != http.StatusCreated {
			t.Fatalf("the site admin creating a trigger: %d", status)
		}

		for _, tc := range []struct {
			what, method, path string
			want               int
		}{
			{"reading wssecret's trigger", "GET", "/api/v2/run-triggers/" + outOfSight, http.StatusNotFound},
			{"deleting wssecret's trigger", "DELETE", "/api/v2/run-triggers/" + outOfSight, http.StatusNotFound},
			{"reading wsread's trigger", "GET", "/api/v2/run-triggers/" + intoSight + "?include=sourceable,workspace", http.StatusOK},
			{"listing wsread's outbound triggers", "GET", "/api/v2/workspaces/" + ws["wsread"].ID + "/run-triggers?filter[run-trigger][type]=outbound&include=workspace,sourceable", http.StatusOK},
			{"listing wsread's inbound triggers", "GET", "/api/v2/workspaces/" + ws["wsread"].ID + "/run-triggers?filter[run-trigger][type]=inbound&include=sourceable,workspace", http.StatusOK},
		} {
			status, body := e.API(t, rita, tc.method, tc.path, nil)
			if status != tc.want {
				t.Errorf("rita %s: %d %s, want %d", tc.what, status, body, tc.want)
				continue
			}
			var doc struct {
				Included []struct{ Type, ID string } `json:"included"`
			}
			_ = json.Unmarshal(body, &doc)
			sawRead := false
			for _, inc := range doc.Included {
				if inc.ID == ws["wssecret"].ID || inc.ID == ws["wshidden"].ID {
					t.Errorf("rita %s: the response includes the document of a workspace she cannot see: %s", tc.what, body)
				}
				sawRead = sawRead || inc.ID == ws["wsread"].ID
			}
			if tc.want == http.StatusOK && strings.Contains(tc.path, "include=") && !sawRead {
				t.Errorf("rita %s: the response does not include wsread's document: %s", tc.what, body)
			}
		}
		// The site admin reads them, and gets the included documents.
		status, body := e.API(t, "", "GET", "/api/v2/run-triggers/"+outOfSight+"?include=workspace", nil)
		if status != http.StatusOK || !json.Valid(body) {
			t.Errorf("the site admin reading a trigger: %d %s", status, body)
		}
		var doc struct {
			Included []struct{ ID string } `json:"included"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || len(doc.Included) != 1 || doc.Included[0].ID != ws["wssecret"].ID {
			t.Errorf("the site admin's trigger with include=workspace: %s", body)
		}
	})
}
