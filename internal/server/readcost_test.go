package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/assessment"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestWorkspaceReadRoundTrips pins what one go-tfe Workspaces.Read by an
// organization member costs in store round trips: the authorization
// guard and the handler share the workspace and the caller's teams
// (the request memo), and nothing is read twice. It also
// proves that a read after a change sees the change: the memo lives one
// request.
func TestWorkspaceReadRoundTrips(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "rt")
		owners := ownersTeam(t, e, "rt")
		c, _ := e.UserClient(t, "rt", "reader@rt.test", owners)
		if _, err := e.Client.Workspaces.Create(ctx, "rt", tfe.WorkspaceCreateOptions{Name: tfe.String("w")}); err != nil {
			t.Fatal(err)
		}
		least := leastStatements(t, e, func() {
			w, err := c.Workspaces.Read(ctx, "rt", "w")
			if err != nil {
				t.Fatal(err)
			}
			if w.Permissions == nil || !w.Permissions.CanUpdate {
				t.Fatalf("an owner's permissions are %+v", w.Permissions)
			}
		})
		// Before the request memo the guard and the handler each looked
		// the workspace up by name (two queries), read it and its tags,
		// and the caller's teams: five more than then 14. The caller's
		// teams come with the token (auth's one query); the workspace's
		// tags with its row; and the current run, run count,
		// configuration version, state version, health assessment,
		// no-code module, variables and the project's and organization's
		// execution defaults in one statement (readDocument), which a
		// read by name makes the workspace's own: token, workspace with
		// its document.
		if least > 2 {
			t.Errorf("a workspace read costs %d store queries, want at most 2", least)
		}
		// A read by ID the same: the guard resolves the workspace by ID
		// first, and on the workspace's own read route that statement
		// reads the document too.
		w, err := c.Workspaces.Read(ctx, "rt", "w")
		if err != nil {
			t.Fatal(err)
		}
		least = leastStatements(t, e, func() {
			byID, err := c.Workspaces.ReadByID(ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if byID.Name != "w" || byID.Permissions == nil || !byID.Permissions.CanUpdate || byID.Project == nil || byID.Project.ID != w.Project.ID {
				t.Fatalf("a read by ID: %+v", byID)
			}
		})
		if least > 2 {
			t.Errorf("a workspace read by ID costs %d store queries, want at most 2", least)
		}
		if _, err := c.Workspaces.Update(ctx, "rt", "w", tfe.WorkspaceUpdateOptions{Description: tfe.String("changed")}); err != nil {
			t.Fatal(err)
		}
		if w, err := c.Workspaces.Read(ctx, "rt", "w"); err != nil || w.Description != "changed" {
			t.Fatalf("a read after an update: %v, %v", w, err)
		}
	})
}

// TestWorkspaceDocumentInOneStatement: a workspace with an applied run
// shows, through the one statement that reads its relationships
// (workspace readDocument), what each domain answers on its own: the
// current run, the run count, the current configuration version and
// state version with its resources and outputs (the assessment and
// no-code parts are proven by their own packages' tests); a workspace with
// neither shows none of them.
func TestWorkspaceDocumentInOneStatement(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "doc")
		ws, err := e.Client.Workspaces.Create(ctx, "doc", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		empty, err := e.Client.Workspaces.Create(ctx, "doc", tfe.WorkspaceCreateOptions{Name: tfe.String("empty")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "a" {}
output "o" { value = "v" }
`)
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunApplied)

		got, err := e.Client.Workspaces.Read(ctx, "doc", "w")
		if err != nil {
			t.Fatal(err)
		}
		runID, _ := e.Server.Runs.CurrentRunID(ctx, ws.ID)
		count, _ := e.Server.Runs.RunsCount(ctx, ws.ID)
		svID, _ := e.Server.States.CurrentStateVersionID(ctx, ws.ID)
		if runID != r.ID || count != 1 || svID == "" {
			t.Fatalf("the domains say current run %q (want %s), %d runs, state version %q", runID, r.ID, count, svID)
		}
		if got.CurrentRun == nil || got.CurrentRun.ID != runID || got.RunsCount != count ||
			got.CurrentConfigurationVersion == nil || got.CurrentConfigurationVersion.ID != cv.ID ||
			got.CurrentStateVersion == nil || got.CurrentStateVersion.ID != svID || got.ResourceCount != 1 || len(got.Outputs) != 1 {
			t.Fatalf("the workspace shows current run %+v, %d runs, configuration version %+v, state version %+v, %d resources, outputs %+v",
				got.CurrentRun, got.RunsCount, got.CurrentConfigurationVersion, got.CurrentStateVersion, got.ResourceCount, got.Outputs)
		}
		if got.SourceModuleID != "" || got.NoCodeUpgradeAvailable {
			t.Fatalf("a workspace without a no-code module shows %q, %v", got.SourceModuleID, got.NoCodeUpgradeAvailable)
		}

		e0, err := e.Client.Workspaces.ReadByID(ctx, empty.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e0.CurrentRun != nil || e0.RunsCount != 0 || e0.CurrentConfigurationVersion != nil || e0.CurrentStateVersion != nil || len(e0.Outputs) != 0 {
			t.Fatalf("an empty workspace shows current run %+v, %d runs, configuration version %+v, state version %+v, outputs %+v",
				e0.CurrentRun, e0.RunsCount, e0.CurrentConfigurationVersion, e0.CurrentStateVersion, e0.Outputs)
		}
	})
}

// TestWorkspaceReadShowsWhatItInherits: what the one document statement
// reads of the workspace's project and organization and of its variables
// is what they say, after each change: the organization's default
// execution mode, the project's overwrite of it, the project's
// auto-destroy duration for a workspace that inherits it, and the
// workspace's variables.
func TestWorkspaceReadShowsWhatItInherits(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "inh")
		p, err := e.Client.Projects.Create(ctx, "inh", tfe.ProjectCreateOptions{Name: "p"})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := e.Client.Workspaces.Create(ctx, "inh", tfe.WorkspaceCreateOptions{Name: tfe.String("w"), Project: p})
		if err != nil {
			t.Fatal(err)
		}
		read := func(what string) *tfe.Workspace {
			t.Helper()
			w, err := e.Client.Workspaces.Read(ctx, "inh", "w")
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return w
		}
		if w := read("at first"); w.ExecutionMode != "remote" || !w.Operations || len(w.Variables) != 0 {
			t.Fatalf("at first the workspace shows execution mode %q, operations %v, variables %v", w.ExecutionMode, w.Operations, w.Variables)
		}
		if _, err := e.Client.Organizations.Update(ctx, "inh", tfe.OrganizationUpdateOptions{DefaultExecutionMode: tfe.String("local")}); err != nil {
			t.Fatal(err)
		}
		if w := read("after the organization's change"); w.ExecutionMode != "local" || w.Operations {
			t.Fatalf("with the organization's default local the workspace shows %q, operations %v", w.ExecutionMode, w.Operations)
		}
		if _, err := e.Client.Projects.Update(ctx, p.ID, tfe.ProjectUpdateOptions{DefaultExecutionMode: tfe.String("remote"),
			SettingOverwrites: &tfe.ProjectSettingOverwrites{ExecutionMode: tfe.Bool(true)}}); err != nil {
			t.Fatal(err)
		}
		if w := read("after the project's overwrite"); w.ExecutionMode != "remote" || !w.Operations {
			t.Fatalf("with the project overwriting remote the workspace shows %q, operations %v", w.ExecutionMode, w.Operations)
		}
		if _, err := e.Client.Projects.Update(ctx, p.ID, tfe.ProjectUpdateOptions{AutoDestroyActivityDuration: jsonapi.NewNullableAttrWithValue("14d")}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Workspaces.Update(ctx, "inh", "w", tfe.WorkspaceUpdateOptions{InheritsProjectAutoDestroy: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		if d, err := read("after the project's auto-destroy").AutoDestroyActivityDuration.Get(); err != nil || d != "14d" {
			t.Fatalf("the workspace inherits auto-destroy %q (%v), want 14d", d, err)
		}
		var ids []string
		for _, k := range []string{"a", "b"} {
			v, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String(k), Value: tfe.String("1"), Category: tfe.Category(tfe.CategoryTerraform)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
		}
		w := read("after two variables")
		if len(w.Variables) != 2 || w.Variables[0].ID != ids[0] || w.Variables[1].ID != ids[1] {
			t.Fatalf("the workspace shows variables %+v, want %v", w.Variables, ids)
		}
	})
}

// ownersTeam returns organization org's owners team.
func ownersTeam(t *testing.T, e *testenv.Env, org string) *tfe.Team {
	t.Helper()
	owners, err := e.Client.Teams.List(context.Background(), org, &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(owners.Items) != 1 {
		t.Fatalf("the owners team of %s: %v", org, err)
	}
	return owners.Items[0]
}

// TestWorkspaceDocumentReadsNoHistory: the parts of a workspace read that
// pick the newest of a workspace's history (the current configuration
// version, the newest health assessment) read it through an index in the
// order asked, on each store's own planner, instead of sorting the
// workspace's whole history on every read.
func TestWorkspaceDocumentReadsNoHistory(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		parts := map[string]struct{ expr, index string }{
			"current configuration version": {configversion.CurrentIDSQL(), "configuration_versions_current"},
			"newest assessment":             {assessment.CurrentIDSQL(), "assessment_results_workspace"},
		}
		for name, p := range parts {
			var all string
			err := e.Server.DB.Tx(ctx, func(tx *store.Tx) error {
				if e.Server.DB.Driver().Name() == "postgres" {
					// Empty tables: a sequential scan would be as cheap
					// as any index, so the planner is asked for one.
					if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
						return err
					}
				}
				var err error
				all, err = storetest.QueryPlan(ctx, tx, `SELECT (`+p.expr+`) FROM workspaces ws WHERE ws.id = ?`, "ws-x")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(all, p.index) || strings.Contains(all, "TEMP B-TREE") || strings.Contains(all, "Sort") {
				t.Errorf("the %s is not read through %s in order:\n%s", name, p.index, all)
			}
		}
	})
}

// TestTeamListRoundTrips: a team list names its teams' members'
// memberships (one statement for all of them); the members' teams are
// read only when the memberships are included, since only an included
// membership names its teams, and then every included membership names
// them.
func TestTeamListRoundTrips(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "tr")
		owners := ownersTeam(t, e, "tr")
		c, _ := e.UserClient(t, "tr", "reader@tr.test", owners)
		least := func(include ...tfe.TeamIncludeOpt) (int64, *tfe.Team) {
			t.Helper()
			var team *tfe.Team
			n := leastStatements(t, e, func() {
				l, err := c.Teams.List(ctx, "tr", &tfe.TeamListOptions{Names: []string{"owners"}, Include: include})
				if err != nil || len(l.Items) != 1 {
					t.Fatalf("the owners team: %v", err)
				}
				team = l.Items[0]
			})
			return n, team
		}
		plain, team := least()
		if len(team.OrganizationMemberships) != 2 {
			t.Fatalf("the owners team names %d memberships, want 2 (the admin's and the reader's)", len(team.OrganizationMemberships))
		}
		included, team := least(tfe.TeamOrganizationMemberships)
		for _, m := range team.OrganizationMemberships {
			if len(m.Teams) != 1 || m.Teams[0].ID != owners.ID {
				t.Fatalf("included membership %s names teams %v, want the owners team", m.ID, m.Teams)
			}
		}
		if included != plain+2 {
			t.Errorf("a team list costs %d statements, %d with its memberships included; want two more (the members' users and their teams) only for the included memberships", plain, included)
		}
	})
}

// TestWorkspaceReadWithStateRoundTrips: a workspace with state is read in
// 2 store statements too (it was 5: the state's head, version and outputs
// after the document), and its state version in 5. The document's
// statement takes the current version's resource count and its outputs'
// IDs along; a read that includes the outputs, whose attributes that does
// not carry, asks the state domain, and shows no sensitive value.
func TestWorkspaceReadWithStateRoundTrips(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "rs")
		c, _ := e.UserClient(t, "rs", "reader@rs.test", ownersTeam(t, e, "rs"))
		ws, _ := appliedRun(t, e, "rs", `resource "terraform_data" "a" { count = 3 }
output "zeta" { value = "z" }
output "alpha" { value = "a" }
output "secret" {
  value     = "hunter2"
  sensitive = true
}`)
		sv, err := c.StateVersions.ReadCurrent(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
		if err != nil || len(outs.Items) != 3 {
			t.Fatalf("current outputs: %v, %+v", err, outs)
		}
		least := leastStatements(t, e, func() {
			w, err := c.Workspaces.Read(ctx, "rs", "w")
			if err != nil {
				t.Fatal(err)
			}
			if w.CurrentStateVersion == nil || w.CurrentStateVersion.ID != sv.ID || w.ResourceCount != 3 {
				t.Fatalf("state of the read: %+v, %d resources; want %s, 3", w.CurrentStateVersion, w.ResourceCount, sv.ID)
			}
			if len(w.Outputs) != len(outs.Items) {
				t.Fatalf("the read names %d outputs, want %d", len(w.Outputs), len(outs.Items))
			}
			for i, o := range outs.Items { // in name order, as the outputs endpoint
				if w.Outputs[i].ID != o.ID {
					t.Fatalf("output %d is %s, want %s (%s)", i, w.Outputs[i].ID, o.ID, o.Name)
				}
			}
		})
		if least > 2 {
			t.Errorf("a read of a workspace with state costs %d store queries, want at most 2", least)
		}
		// With the outputs included: their attributes, no sensitive value.
		w, err := c.Workspaces.ReadWithOptions(ctx, "rs", "w", &tfe.WorkspaceReadOptions{Include: []tfe.WSIncludeOpt{tfe.WSOutputs}})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*tfe.WorkspaceOutputs{}
		for _, o := range w.Outputs {
			byName[o.Name] = o
		}
		if o := byName["alpha"]; o == nil || o.Value != "a" || o.Sensitive {
			t.Fatalf("included output alpha: %+v", o)
		}
		if o := byName["secret"]; o == nil || !o.Sensitive || o.Value != nil {
			t.Fatalf("included output secret: %+v", o)
		}

		// The state version's own read by ID reads the version once (the
		// guard and the handler share it; it was read three times): the
		// token, the version, its workspace, its outputs and the audit
		// record of the read.
		least = leastStatements(t, e, func() {
			got, err := c.StateVersions.Read(ctx, sv.ID)
			if err != nil || got.ID != sv.ID || got.Serial != sv.Serial || len(got.Outputs) != 3 {
				t.Fatalf("the state version's read: %v, %+v", err, got)
			}
		})
		if least > 5 {
			t.Errorf("a state version's read costs %d store queries, want at most 5", least)
		}
		// The workspace's current version and current outputs, which
		// terraform_remote_state and tfe_outputs read: the token, the
		// workspace, the head and the version in one statement, the
		// outputs, and the audit record (it was 6: the head alone). The
		// current outputs need no version: they are read through the head
		// (4).
		for _, read := range []struct {
			name string
			want int64
			do   func() error
		}{
			{"current state version", 5, func() error {
				got, err := c.StateVersions.ReadCurrent(ctx, ws.ID)
				if err == nil && (got.ID != sv.ID || len(got.Outputs) != 3) {
					t.Fatalf("the current state version: %+v", got)
				}
				return err
			}},
			{"current outputs", 4, func() error {
				got, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
				if err == nil && len(got.Items) != 3 {
					t.Fatalf("the current outputs: %+v", got)
				}
				return err
			}},
		} {
			least := leastStatements(t, e, func() {
				if err := read.do(); err != nil {
					t.Fatalf("the %s: %v", read.name, err)
				}
			})
			if least > read.want {
				t.Errorf("a read of the %s costs %d store queries, want at most %d", read.name, least, read.want)
			}
		}
	})
}

// leastStatements runs do six times and returns the fewest store
// statements the requests of one run of it cost (testenv's
// RequestStatements: in transactions or not, none of a background
// loop's), once the server's caches have seen the caller.
func leastStatements(t *testing.T, e *testenv.Env, do func()) int64 {
	t.Helper()
	least := int64(1 << 30)
	for range 6 {
		least = min(least, e.RequestStatements(t, do))
	}
	return least
}

// appliedRun makes workspace w in org (auto-apply), whose first run of
// config has applied.
func appliedRun(t *testing.T, e *testenv.Env, org, config string) (*tfe.Workspace, *tfe.Run) {
	t.Helper()
	ctx := context.Background()
	ws, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("w"), AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, config)
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunApplied)
	return ws, r
}

// TestWorkspaceOutputsForRunTokens: a run's token reads another
// workspace, and its outputs, only where the remote-state rule lets it
// read the state, also now that the document's statement carries the
// output IDs (the state adapter applies the rule to both ways of reading
// the summary).
func TestWorkspaceOutputsForRunTokens(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "rt")
		producer, _ := appliedRun(t, e, "rt", `output "o" { value = "v" }`)
		// A run of another workspace that waits behind its lock: its
		// token is live.
		consumer, err := e.Client.Workspaces.Create(ctx, "rt", tfe.WorkspaceCreateOptions{Name: tfe.String("consumer")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, consumer.ID, `resource "terraform_data" "a" {}`)
		if _, err := e.Client.Workspaces.Lock(ctx, consumer.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: consumer, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindRun, Subject: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		asRun := e.NewClient(t, secret)
		if _, err := asRun.Workspaces.ReadByID(ctx, producer.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("a run token read a workspace that does not share its state: %v", err)
		}
		if _, err := e.Client.Workspaces.UpdateByID(ctx, producer.ID, tfe.WorkspaceUpdateOptions{GlobalRemoteState: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		w, err := asRun.Workspaces.ReadByID(ctx, producer.ID)
		if err != nil {
			t.Fatalf("a run token's read of a workspace that shares its state: %v", err)
		}
		if len(w.Outputs) != 1 || w.CurrentStateVersion == nil {
			t.Fatalf("a run token's read of a workspace that shares its state names %d outputs and state %v, want 1 and its version", len(w.Outputs), w.CurrentStateVersion)
		}
	})
}
