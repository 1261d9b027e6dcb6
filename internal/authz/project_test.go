package authz_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestProjectGrantsDecideProjectChanges: a team's project admin grant lets
// its token change and delete that project; a read grant does not.
func TestProjectGrantsDecideProjectChanges(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		prj := must(c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "data"}))(t)
		client := map[string]*tfe.Client{}
		for _, level := range []tfe.TeamProjectAccessType{tfe.TeamProjectAccessRead, tfe.TeamProjectAccessAdmin} {
			tm := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("team-" + string(level))}))(t)
			must(c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: level, Team: tm, Project: prj}))(t)
			client[string(level)] = e.NewClient(t, must(c.TeamTokens.Create(ctx, tm.ID))(t).Token)
		}
		if _, err := client["read"].Projects.Read(ctx, prj.ID); err != nil {
			t.Fatalf("read grant reading its project: %v", err)
		}
		if _, err := client["read"].Projects.Update(ctx, prj.ID, tfe.ProjectUpdateOptions{Description: tfe.String("x")}); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("read grant updated its project: %v", err)
		}
		if _, err := client["admin"].Projects.Update(ctx, prj.ID, tfe.ProjectUpdateOptions{Description: tfe.String("owned by data")}); err != nil {
			t.Fatalf("admin grant updating its project: %v", err)
		}
		if err := client["admin"].Projects.Delete(ctx, prj.ID); err != nil {
			t.Fatalf("admin grant deleting its project: %v", err)
		}
	})
}
