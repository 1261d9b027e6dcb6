package retention_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestBackingDataActions: what go-tfe's ManageBackingData tests do not
// ask. The current state version and the current configuration version
// cannot be soft deleted (409, transition not allowed); a permanent
// delete needs a soft delete first; a soft-deleted configuration version
// starts no run; a permanently deleted state version's blobs are gone
// once the garbage collector ran; a member with write access to the
// workspace (not admin) can do none of it. Both stores.
func TestBackingDataActions(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		v := makeVersions(ctx, t, c, "app")
		post := func(what, id, action string) (int, string) {
			t.Helper()
			status, body := e.API(t, "", "POST", "/api/v2/"+what+"/"+id+"/actions/"+action, nil)
			return status, string(body)
		}
		for _, x := range []struct{ what, id string }{{"state-versions", v.states[2].ID}, {"configuration-versions", v.cvs[2].ID}} {
			if status, body := post(x.what, x.id, "soft_delete_backing_data"); status != http.StatusConflict || !strings.Contains(body, "current") {
				t.Errorf("soft deleting the current %s: %d %s", x.what, status, body)
			}
			if status, body := post(x.what, x.id, "permanently_delete_backing_data"); status != http.StatusConflict || !strings.Contains(body, "transition not allowed") {
				t.Errorf("permanently deleting the current %s without a soft delete: %d %s", x.what, status, body)
			}
		}

		team, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("writers")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessWrite), Team: team, Workspace: v.ws}); err != nil {
			t.Fatal(err)
		}
		writer, _ := e.UserClient(t, "acme", "writer@acme.test", team)
		if err := writer.StateVersions.SoftDeleteBackingData(ctx, v.states[0].ID); err == nil {
			t.Error("a writer soft deleted a state version's backing data")
		}
		if err := writer.ConfigurationVersions.SoftDeleteBackingData(ctx, v.cvs[0].ID); err == nil {
			t.Error("a writer soft deleted a configuration version's backing data")
		}
		if sv, err := c.StateVersions.Read(ctx, v.states[0].ID); err != nil || sv.Status != tfe.StateVersionFinalized {
			t.Fatalf("after the writer's refusal: %+v %v", sv, err)
		}

		// A soft-deleted configuration version starts no run.
		if err := c.ConfigurationVersions.SoftDeleteBackingData(ctx, v.cvs[0].ID); err != nil {
			t.Fatal(err)
		}
		if cv, err := c.ConfigurationVersions.Read(ctx, v.cvs[0].ID); err != nil || string(cv.Status) != "backing_data_soft_deleted" {
			t.Fatalf("the soft-deleted configuration version: %+v %v", cv, err)
		}
		if _, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: v.ws, ConfigurationVersion: v.cvs[0]}); err == nil {
			t.Error("a run started on a soft-deleted configuration version")
		}

		// A state version deleted for good: its blobs go.
		var keys []string
		for _, col := range []string{"state_key", "json_state_key"} {
			var k string
			if err := e.Server.DB.QueryRow(ctx, `SELECT `+col+` FROM state_versions WHERE id = ?`, v.states[0].ID).Scan(&k); err != nil {
				t.Fatal(err)
			}
			if k != "" {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			t.Fatal("the state version has no blob")
		}
		if err := c.StateVersions.SoftDeleteBackingData(ctx, v.states[0].ID); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if ok, err := e.Server.Blobs.Exists(ctx, k); err != nil || !ok {
				t.Fatalf("a soft delete removed blob %s: %v %v", k, ok, err)
			}
		}
		if err := c.StateVersions.PermanentlyDeleteBackingData(ctx, v.states[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.States.CollectGarbage(ctx, -time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if ok, err := e.Server.Blobs.Exists(ctx, k); err != nil || ok {
				t.Errorf("blob %s after a permanent delete: exists %v, %v", k, ok, err)
			}
		}
		if sv, err := c.StateVersions.Read(ctx, v.states[0].ID); err != nil || string(sv.Status) != "backing_data_permanently_deleted" {
			t.Fatalf("the permanently deleted state version: %+v %v", sv, err)
		}
	})
}
