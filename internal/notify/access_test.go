package notify_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestReadingAConfigurationNeedsWhatItsListNeeds: a configuration named
// by ID is seen by those who may list its workspace's or project's
// configurations, and by no one else: its URL (a chat webhook's secret)
// and its delivery responses are not an organization member's to read. A
// member who may not see the workspace or project gets the 404 its list
// gives, for a read, a change, a deletion and a verification alike; one
// who may read it but not change it gets the configuration and a 403 for
// the rest.
func TestReadingAConfigurationNeedsWhatItsListNeeds(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		wsread, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("wsread")})
		if err != nil {
			t.Fatal(err)
		}
		wssecret, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("wssecret")})
		if err != nil {
			t.Fatal(err)
		}
		prj, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "hidden"})
		if err != nil {
			t.Fatal(err)
		}
		readers, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("readers")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: readers, Workspace: wsread}); err != nil {
			t.Fatal(err)
		}
		rita, m := e.UserClient(t, org.Name, "rita@acme.test", readers)
		_, ritaToken, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
		if err != nil {
			t.Fatal(err)
		}

		const hook = "https://hooks.slack.com/services/T000/B000/s3cr3t"
		create := func(path string) string {
			status, body := e.API(t, "", "POST", path, map[string]any{"data": map[string]any{
				"type": "notification-configurations",
				"attributes": map[string]any{"name": "chat", "destination-type": "slack", "url": hook, "enabled": false,
					"triggers": []string{"run:errored"}},
			}})
			if status != http.StatusCreated {
				t.Fatalf("POST %s: %d %s", path, status, body)
			}
			var doc struct {
				Data struct{ ID string } `json:"data"`
			}
			if err := json.Unmarshal(body, &doc); err != nil || doc.Data.ID == "" {
				t.Fatalf("POST %s: %s %v", path, body, err)
			}
			return doc.Data.ID
		}
		onSecret := create("/api/v2/workspaces/" + wssecret.ID + "/notification-configurations")
		onProject := create("/api/v2/projects/" + prj.ID + "/notification-configurations")
		onRead := create("/api/v2/workspaces/" + wsread.ID + "/notification-configurations")

		// The lists, as the route rules decide them.
		if _, err := rita.NotificationConfigurations.List(ctx, wssecret.ID, nil); err != tfe.ErrResourceNotFound {
			t.Fatalf("rita listing wssecret's configurations: %v, want not found", err)
		}
		if _, err := rita.NotificationConfigurations.List(ctx, wsread.ID, nil); err != nil {
			t.Fatalf("rita listing wsread's configurations: %v", err)
		}

		for _, tc := range []struct {
			what, method, path string
			want               int
		}{
			{"reading wssecret's", "GET", "/api/v2/notification-configurations/" + onSecret, http.StatusNotFound},
			{"reading the hidden project's", "GET", "/api/v2/notification-configurations/" + onProject, http.StatusNotFound},
			{"changing wssecret's", "PATCH", "/api/v2/notification-configurations/" + onSecret, http.StatusNotFound},
			{"verifying wssecret's", "POST", "/api/v2/notification-configurations/" + onSecret + "/actions/verify", http.StatusNotFound},
			{"verifying the hidden project's", "POST", "/api/v2/notification-configurations/" + onProject + "/actions/verify", http.StatusNotFound},
			{"deleting the hidden project's", "DELETE", "/api/v2/notification-configurations/" + onProject, http.StatusNotFound},
			{"reading wsread's", "GET", "/api/v2/notification-configurations/" + onRead, http.StatusOK},
			{"changing wsread's", "PATCH", "/api/v2/notification-configurations/" + onRead, http.StatusForbidden},
			{"verifying wsread's", "POST", "/api/v2/notification-configurations/" + onRead + "/actions/verify", http.StatusForbidden},
			{"deleting wsread's", "DELETE", "/api/v2/notification-configurations/" + onRead, http.StatusForbidden},
		} {
			var body any
			if tc.method == "PATCH" {
				body = map[string]any{"data": map[string]any{"type": "notification-configurations", "attributes": map[string]any{"name": "renamed"}}}
			}
			status, out := e.API(t, ritaToken, tc.method, tc.path, body)
			if status != tc.want {
				t.Errorf("rita %s configuration: %d %s, want %d", tc.what, status, out, tc.want)
			}
			if tc.want != http.StatusOK && strings.Contains(string(out), "s3cr3t") {
				t.Errorf("rita %s configuration: the refusal carries the URL: %s", tc.what, out)
			}
		}
		// The site admin still reads them all.
		for _, id := range []string{onSecret, onProject, onRead} {
			if status, out := e.API(t, "", "GET", "/api/v2/notification-configurations/"+id, nil); status != http.StatusOK {
				t.Errorf("the site admin reading %s: %d %s", id, status, out)
			}
		}
	})
}
