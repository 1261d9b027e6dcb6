package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

func newOrg(t *testing.T, c *tfe.Client, name string) *tfe.Organization {
	t.Helper()
	org, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(name), Email: tfe.String("ops@" + name + ".test")})
	if err != nil {
		t.Fatal(err)
	}
	return org
}

func newUserClient(t *testing.T, e *testenv.Env, name string, siteAdmin bool) *tfe.Client {
	t.Helper()
	u, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, name, name+"@users.test", siteAdmin)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	return e.NewClient(t, secret)
}

// raw sends a JSON:API request with the site token and returns status and body.
func raw(t *testing.T, e *testenv.Env, method, path, body string) (int, string) {
	t.Helper()
	code, b := e.API(t, "", method, path, body)
	return code, string(b)
}

func TestWorkspaceCRUD(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := newOrg(t, c, "acme")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{
			Name:             tfe.String("web-prod"),
			Description:      tfe.String("the web"),
			AutoApply:        tfe.Bool(true),
			TerraformVersion: tfe.String("1.9.5"),
			WorkingDirectory: tfe.String("infra/"),
			SourceName:       tfe.String("my-app"),
			SourceURL:        tfe.String("https://my-app.test"),
			Tags:             []*tfe.Tag{{Name: "prod"}, {Name: "web"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(w.ID, "ws-") || w.Name != "web-prod" || !w.AutoApply || w.TerraformVersion != "1.9.5" ||
			w.WorkingDirectory != "infra/" || w.Description != "the web" || w.ExecutionMode != "remote" ||
			!w.SpeculativeEnabled || !w.StructuredRunOutputEnabled || w.Locked || w.Source != tfe.WorkspaceSourceAPI {
			t.Fatalf("created workspace: %+v", w)
		}
		if w.Project == nil || w.Project.ID != org.DefaultProject.ID {
			t.Fatalf("workspace not in the default project: %+v", w.Project)
		}
		if len(w.TagNames) != 2 || w.TagNames[0] != "prod" || w.TagNames[1] != "web" {
			t.Fatalf("tag names: %v", w.TagNames)
		}
		if w.Permissions == nil || !w.Permissions.CanUpdate || !w.Permissions.CanForceUnlock || w.Actions == nil || !w.Actions.IsDestroyable {
			t.Fatalf("owner permissions: %+v %+v", w.Permissions, w.Actions)
		}
		byName, err := c.Workspaces.Read(ctx, "acme", "web-prod")
		if err != nil {
			t.Fatal(err)
		}
		byID, err := c.Workspaces.ReadByID(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if byName.ID != w.ID || byID.Name != w.Name || !byID.UpdatedAt.Equal(w.UpdatedAt) {
			t.Fatalf("reads disagree: %+v / %+v", byName, byID)
		}

		// Defaults of a bare workspace.
		bare, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("bare_1")})
		if err != nil {
			t.Fatal(err)
		}
		if bare.TerraformVersion != "latest" || !bare.SpeculativeEnabled || bare.AutoApply || bare.GlobalRemoteState {
			t.Fatalf("defaults: %+v", bare)
		}

		// Duplicate names are refused.
		_, err = c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("web-prod")})
		if err == nil || !strings.Contains(err.Error(), "has already been taken") {
			t.Fatalf("duplicate: %v", err)
		}
		// Invalid names, execution modes and versions are 422 (sent raw:
		// go-tfe would refuse them before sending).
		for _, body := range []string{
			`{"data":{"type":"workspaces","attributes":{"name":"has space"}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"` + strings.Repeat("a", 91) + `"}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"ag","execution-mode":"agent"}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"ag2","agent-pool-id":"apool-1"}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"tv","terraform-version":"nonexisting"}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"em","execution-mode":"sideways"}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"bt","trigger-prefixes":["/a"],"trigger-patterns":["/b/*"]}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"grs","global-remote-state":true,"project-remote-state":true}}}`,
			`{"data":{"type":"workspaces","attributes":{"name":"ty","auto-apply":"yes"}}}`,
		} {
			if code, out := raw(t, e, "POST", "/api/v2/organizations/acme/workspaces", body); code != 422 {
				t.Errorf("POST %s: %d %s", body, code, out)
			}
		}
		if code, out := raw(t, e, "POST", "/api/v2/organizations/acme/workspaces", `{"data":{"type":"workspaces","attributes":{"name":"ag","execution-mode":"agent"}}}`); !strings.Contains(out, "agent-pool-id must be specified") {
			t.Errorf("agent without pool: %d %s", code, out)
		}

		// Update by name and by ID.
		u, err := c.Workspaces.Update(ctx, "acme", "web-prod", tfe.WorkspaceUpdateOptions{
			Name: tfe.String("web-production"), ExecutionMode: tfe.String("local"), GlobalRemoteState: tfe.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		if u.Name != "web-production" || u.ExecutionMode != "local" || u.Operations || !u.GlobalRemoteState || u.SettingOverwrites == nil || !*u.SettingOverwrites.ExecutionMode {
			t.Fatalf("updated: %+v", u)
		}
		u, err = c.Workspaces.UpdateByID(ctx, w.ID, tfe.WorkspaceUpdateOptions{AutoApply: tfe.Bool(false)})
		if err != nil || u.AutoApply || u.Name != "web-production" || u.ExecutionMode != "local" {
			t.Fatalf("update by id: %+v %v", u, err)
		}
		if _, err := c.Workspaces.Read(ctx, "acme", "web-prod"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("old name still resolves: %v", err)
		}

		// Survives a restart.
		e = e.Restart(t)
		c = e.Client
		got, err := c.Workspaces.ReadByID(ctx, w.ID)
		if err != nil || got.Name != "web-production" || got.ExecutionMode != "local" || len(got.TagNames) != 2 {
			t.Fatalf("after restart: %+v %v", got, err)
		}

		// Delete.
		if err := c.Workspaces.Delete(ctx, "acme", "web-production"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.ReadByID(ctx, w.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleted workspace still readable: %v", err)
		}
		if err := c.Workspaces.DeleteByID(ctx, bare.ID); err != nil {
			t.Fatal(err)
		}
		// Malformed IDs are 404, not 5xx.
		if code, _ := raw(t, e, "GET", "/api/v2/workspaces/nonsense", ""); code != 404 {
			t.Fatalf("malformed id: %d", code)
		}
	})
}

func TestWorkspaceList(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		p, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "team-a"})
		if err != nil {
			t.Fatal(err)
		}
		mk := func(name string, tags []string, project *tfe.Project) {
			o := tfe.WorkspaceCreateOptions{Name: tfe.String(name), Project: project}
			for _, tg := range tags {
				o.Tags = append(o.Tags, &tfe.Tag{Name: tg})
			}
			if _, err := c.Workspaces.Create(ctx, "acme", o); err != nil {
				t.Fatal(err)
			}
		}
		mk("app-prod", []string{"prod", "app"}, nil)
		mk("app-dev", []string{"dev", "app"}, nil)
		mk("db-prod", []string{"prod"}, p)
		mk("zeta", nil, p)

		names := func(o *tfe.WorkspaceListOptions) []string {
			t.Helper()
			l, err := c.Workspaces.List(ctx, "acme", o)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, w := range l.Items {
				out = append(out, w.Name)
			}
			return out
		}
		for _, tc := range []struct {
			opts *tfe.WorkspaceListOptions
			want string
		}{
			{nil, "app-dev,app-prod,db-prod,zeta"},
			{&tfe.WorkspaceListOptions{Search: "prod"}, "app-prod,db-prod"},
			{&tfe.WorkspaceListOptions{WildcardName: "app-*"}, "app-dev,app-prod"},
			{&tfe.WorkspaceListOptions{WildcardName: "*prod"}, "app-prod,db-prod"},
			{&tfe.WorkspaceListOptions{WildcardName: "*pp-d*"}, "app-dev"},
			{&tfe.WorkspaceListOptions{Tags: "prod,app"}, "app-prod"},
			{&tfe.WorkspaceListOptions{Tags: "prod", ExcludeTags: "app"}, "db-prod"},
			{&tfe.WorkspaceListOptions{ProjectID: p.ID}, "db-prod,zeta"},
			{&tfe.WorkspaceListOptions{Sort: "-name"}, "zeta,db-prod,app-prod,app-dev"},
			{&tfe.WorkspaceListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 3}}, "zeta"},
		} {
			if got := strings.Join(names(tc.opts), ","); got != tc.want {
				t.Errorf("list %+v: got %s, want %s", tc.opts, got, tc.want)
			}
		}
		l, err := c.Workspaces.List(ctx, "acme", &tfe.WorkspaceListOptions{ListOptions: tfe.ListOptions{PageNumber: 999, PageSize: 2}})
		if err != nil || len(l.Items) != 0 || l.CurrentPage != 999 || l.TotalCount != 4 {
			t.Fatalf("out of range page: %+v %v", l, err)
		}
		l, err = c.Workspaces.List(ctx, "acme", &tfe.WorkspaceListOptions{Include: []tfe.WSIncludeOpt{tfe.WSOrganization, tfe.WSProject, tfe.WSLockedBy, tfe.WSCurrentRun}})
		if err != nil || len(l.Items) != 4 {
			t.Fatalf("list with includes: %v", err)
		}
		for _, w := range l.Items {
			// go-tfe fills related objects from included only.
			if w.Project == nil || w.Project.Name == "" || w.Organization == nil || w.Organization.Email != "ops@acme.test" {
				t.Fatalf("list with includes: %s without its project or organization included: %+v %+v", w.Name, w.Project, w.Organization)
			}
		}
		if code, out := raw(t, e, "GET", "/api/v2/organizations/acme/workspaces?include=bogus", ""); code != 400 || !strings.Contains(out, "include parameter") {
			t.Fatalf("bogus include: %d %s", code, out)
		}

		// LIKE's wildcards in a name are matched as themselves.
		mk("under_score", nil, nil)
		mk("underxscore", nil, nil)
		for _, tc := range []struct {
			opts *tfe.WorkspaceListOptions
			want string
		}{
			{&tfe.WorkspaceListOptions{Search: "R_S"}, "under_score"},
			{&tfe.WorkspaceListOptions{WildcardName: "under_*"}, "under_score"},
			{&tfe.WorkspaceListOptions{WildcardName: "*%"}, ""},
			{&tfe.WorkspaceListOptions{WildcardName: "UNDER_SCORE"}, "under_score"},
		} {
			if got := strings.Join(names(tc.opts), ","); got != tc.want {
				t.Errorf("list %+v: got %s, want %s", tc.opts, got, tc.want)
			}
		}
		for _, n := range []string{"under_score", "underxscore"} {
			if err := c.Workspaces.Delete(ctx, "acme", n); err != nil {
				t.Fatal(err)
			}
		}

		// Tag bindings filter the effective bindings: a workspace's own,
		// and its project's for keys it does not bind itself.
		if _, err := c.Projects.Update(ctx, p.ID, tfe.ProjectUpdateOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "prod"}, {Key: "team", Value: "data"}}}); err != nil {
			t.Fatal(err)
		}
		dbProd, err := c.Workspaces.Read(ctx, "acme", "db-prod")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.AddTagBindings(ctx, dbProd.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "staging"}}}); err != nil {
			t.Fatal(err)
		}
		appDev, err := c.Workspaces.Read(ctx, "acme", "app-dev")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.AddTagBindings(ctx, appDev.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "team", Value: "web"}}}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			tagged []*tfe.TagBinding
			want   string
		}{
			{[]*tfe.TagBinding{{Key: "env", Value: "prod"}}, "zeta"},
			{[]*tfe.TagBinding{{Key: "env", Value: "staging"}}, "db-prod"},
			{[]*tfe.TagBinding{{Key: "env"}}, "db-prod,zeta"},
			{[]*tfe.TagBinding{{Key: "team"}}, "app-dev,db-prod,zeta"},
			{[]*tfe.TagBinding{{Key: "team", Value: "data"}, {Key: "env", Value: "staging"}}, "db-prod"},
			{[]*tfe.TagBinding{{Key: "nope"}}, ""},
		} {
			if got := strings.Join(names(&tfe.WorkspaceListOptions{TagBindings: tc.tagged}), ","); got != tc.want {
				var f []string
				for _, b := range tc.tagged {
					f = append(f, b.Key+"="+b.Value)
				}
				t.Errorf("tagged %v: got %s, want %s", f, got, tc.want)
			}
		}

		// The current run: sorted by when it was created (workspaces
		// without one last, or first reversed) and filtered by its status.
		// Locked workspaces keep their runs pending.
		zeta, err := c.Workspaces.Read(ctx, "acme", "zeta")
		if err != nil {
			t.Fatal(err)
		}
		currentRun := map[string]string{}
		for _, w := range []*tfe.Workspace{zeta, appDev} {
			if _, err := c.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{}); err != nil {
				t.Fatal(err)
			}
			cv := testenv.UploadConfig(ctx, t, c, w.ID, `resource "terraform_data" "a" {}`)
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: w, ConfigurationVersion: cv})
			if err != nil {
				t.Fatal(err)
			}
			currentRun[w.Name] = r.ID
		}
		// A page's documents are read together: each workspace still
		// names its own current run and lock.
		listed, err := c.Workspaces.List(ctx, "acme", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range listed.Items {
			got := ""
			if w.CurrentRun != nil {
				got = w.CurrentRun.ID
			}
			if got != currentRun[w.Name] || w.Locked != (currentRun[w.Name] != "") {
				t.Errorf("listed %s: current run %q, locked %v; want %q, %v", w.Name, got, w.Locked, currentRun[w.Name], currentRun[w.Name] != "")
			}
		}
		for _, tc := range []struct {
			opts *tfe.WorkspaceListOptions
			want string
		}{
			{&tfe.WorkspaceListOptions{Sort: "current-run.created-at"}, "zeta,app-dev,app-prod,db-prod"},
			{&tfe.WorkspaceListOptions{Sort: "-current-run.created-at"}, "app-prod,db-prod,app-dev,zeta"},
			{&tfe.WorkspaceListOptions{Sort: "-current-run.created-at", ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 3}}, "zeta"},
			{&tfe.WorkspaceListOptions{CurrentRunStatus: "pending"}, "app-dev,zeta"},
			{&tfe.WorkspaceListOptions{CurrentRunStatus: "applied,errored"}, ""},
		} {
			if got := strings.Join(names(tc.opts), ","); got != tc.want {
				t.Errorf("list %+v: got %s, want %s", tc.opts, got, tc.want)
			}
		}

		// Deleting the organization takes its projects, workspaces and tags along.
		if err := c.Organizations.Delete(ctx, "acme"); err != nil {
			t.Fatalf("deleting an organization with workspaces: %v", err)
		}
		newOrg(t, c, "acme")
		if l, err := c.Workspaces.List(ctx, "acme", nil); err != nil || len(l.Items) != 0 {
			t.Fatalf("workspaces survived their organization: %+v %v", l, err)
		}
	})
}

func TestWorkspaceLockRace(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("contended")})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, locked, other := 0, 0, []error{}
		start := make(chan struct{})
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := c.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{Reason: tfe.String("race")})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, tfe.ErrWorkspaceLocked):
					locked++
				default:
					other = append(other, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins != 1 || locked != 19 || len(other) > 0 {
			t.Fatalf("20 concurrent locks: %d won, %d refused as locked, other errors %v", wins, locked, other)
		}
		got, err := c.Workspaces.ReadByID(ctx, w.ID)
		if err != nil || !got.Locked || got.LockedBy == nil || got.LockedBy.User == nil {
			t.Fatalf("after the race: %+v %v", got, err)
		}
	})
}

func TestWorkspaceLocking(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("ws")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.Unlock(ctx, w.ID); !errors.Is(err, tfe.ErrWorkspaceNotLocked) {
			t.Fatalf("unlock of an unlocked workspace: %v", err)
		}
		if _, err := c.Workspaces.ForceUnlock(ctx, w.ID); !errors.Is(err, tfe.ErrWorkspaceNotLocked) {
			t.Fatalf("force-unlock of an unlocked workspace: %v", err)
		}
		lw, err := c.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{Reason: tfe.String("testing")})
		if err != nil || !lw.Locked || lw.LockedBy == nil || lw.LockedBy.User == nil || lw.LockedBy.Run != nil {
			t.Fatalf("lock: %+v %v", lw, err)
		}
		holderKind, holderID, err := e.Server.Workspaces.LockHolder(auth.WithPrincipal(ctx, &auth.Principal{SiteAdmin: true}), w.ID)
		if err != nil || holderKind != "users" || holderID != lw.LockedBy.User.ID {
			t.Fatalf("LockHolder: %s %s %v", holderKind, holderID, err)
		}
		// Another user cannot unlock it (go-tfe maps the text to ErrWorkspaceLockedByUser).
		other := newUserClient(t, e, "mallory", true)
		if _, err := other.Workspaces.Unlock(ctx, w.ID); !errors.Is(err, tfe.ErrWorkspaceLockedByUser) {
			t.Fatalf("unlock by another user: %v", err)
		}
		if _, err := other.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{}); !errors.Is(err, tfe.ErrWorkspaceLocked) {
			t.Fatalf("lock by another user: %v", err)
		}
		// The holder can; then force-unlock releases anyone's lock.
		uw, err := c.Workspaces.Unlock(ctx, w.ID)
		if err != nil || uw.Locked || uw.LockedBy != nil {
			t.Fatalf("unlock by holder: %+v %v", uw, err)
		}
		if _, err := other.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		fw, err := c.Workspaces.ForceUnlock(ctx, w.ID)
		if err != nil || fw.Locked {
			t.Fatalf("force-unlock: %+v %v", fw, err)
		}
	})
}

type fakeState struct{ resources int }

func (f *fakeState) CurrentStateVersionID(ctx context.Context, workspaceID string) (string, error) {
	if f.resources > 0 {
		return "sv-fake", nil
	}
	return "", nil
}

func (f *fakeState) ResourceCount(ctx context.Context, workspaceID string) (int, error) {
	return f.resources, nil
}

func TestWorkspaceSafeDelete(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		mk := func(name string) *tfe.Workspace {
			w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		a, b, d := mk("a"), mk("b"), mk("d")
		if err := c.Workspaces.SafeDelete(ctx, "acme", "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.ReadByID(ctx, a.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("safe-deleted workspace still there: %v", err)
		}
		if _, err := c.Workspaces.Lock(ctx, b.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Workspaces.SafeDeleteByID(ctx, b.ID); !errors.Is(err, tfe.ErrWorkspaceLockedCannotDelete) {
			t.Fatalf("safe delete of a locked workspace: %v", err)
		}
		// A workspace that manages resources is refused.
		fs := &fakeState{resources: 3}
		e.Server.Workspaces.State = fs
		if err := c.Workspaces.SafeDeleteByID(ctx, d.ID); !errors.Is(err, tfe.ErrWorkspaceNotSafeToDelete) {
			t.Fatalf("safe delete with resources: %v", err)
		}
		got, err := c.Workspaces.ReadByID(ctx, d.ID)
		if err != nil || got.ResourceCount != 3 || got.CurrentStateVersion == nil || got.CurrentStateVersion.ID != "sv-fake" {
			t.Fatalf("state info not shown: %+v %v", got, err)
		}
		// Plain delete always deletes, locked or not.
		if err := c.Workspaces.DeleteByID(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.Workspaces.Delete(ctx, "acme", "d"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWorkspaceRemoteStateConsumers(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		mk := func(name string) *tfe.Workspace {
			w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		target, r1, r2, r3 := mk("target"), mk("r1"), mk("r2"), mk("r3")
		svc := e.Server.Workspaces
		can := func(reader, tgt string) bool {
			t.Helper()
			ok, err := svc.CanReadStateOf(ctx, reader, tgt)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !can(target.ID, target.ID) || can(r1.ID, target.ID) {
			t.Fatal("before sharing")
		}
		if err := c.Workspaces.AddRemoteStateConsumers(ctx, target.ID, tfe.WorkspaceAddRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{r1, r2}}); err != nil {
			t.Fatal(err)
		}
		list := func() string {
			l, err := c.Workspaces.ListRemoteStateConsumers(ctx, target.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			var n []string
			for _, w := range l.Items {
				n = append(n, w.Name)
			}
			return strings.Join(n, ",")
		}
		if got := list(); got != "r1,r2" {
			t.Fatalf("consumers: %s", got)
		}
		if !can(r1.ID, target.ID) || can(r3.ID, target.ID) {
			t.Fatal("consumer check after add")
		}
		if err := c.Workspaces.UpdateRemoteStateConsumers(ctx, target.ID, tfe.WorkspaceUpdateRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{r3}}); err != nil {
			t.Fatal(err)
		}
		if got := list(); got != "r3" {
			t.Fatalf("consumers after replace: %s", got)
		}
		if err := c.Workspaces.RemoveRemoteStateConsumers(ctx, target.ID, tfe.WorkspaceRemoveRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{r3}}); err != nil {
			t.Fatal(err)
		}
		if got := list(); got != "" || can(r3.ID, target.ID) {
			t.Fatalf("consumers after remove: %q", got)
		}
		if _, err := c.Workspaces.UpdateByID(ctx, target.ID, tfe.WorkspaceUpdateOptions{GlobalRemoteState: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		if !can(r3.ID, target.ID) {
			t.Fatal("global remote state not honoured")
		}
		// A workspace of another organization is never a consumer.
		newOrg(t, c, "other")
		foreign, err := c.Workspaces.Create(ctx, "other", tfe.WorkspaceCreateOptions{Name: tfe.String("foreign")})
		if err != nil {
			t.Fatal(err)
		}
		if can(foreign.ID, target.ID) {
			t.Fatal("cross-organization state read allowed")
		}
		if err := c.Workspaces.AddRemoteStateConsumers(ctx, target.ID, tfe.WorkspaceAddRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{foreign}}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("foreign consumer: %v", err)
		}
	})
}

func TestWorkspaceTags(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("ws")})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Workspaces.AddTags(ctx, w.ID, tfe.WorkspaceAddTagsOptions{Tags: []*tfe.Tag{{Name: "One"}, {Name: "two"}, {Name: "three"}}}); err != nil {
			t.Fatal(err)
		}
		tl, err := c.Workspaces.ListTags(ctx, w.ID, nil)
		if err != nil || len(tl.Items) != 3 || tl.Items[0].Name != "one" {
			t.Fatalf("tags: %+v %v", tl, err)
		}
		// Add an existing tag by ID to another workspace.
		w2, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("ws2")})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Workspaces.AddTags(ctx, w2.ID, tfe.WorkspaceAddTagsOptions{Tags: []*tfe.Tag{{ID: tl.Items[1].ID}}}); err != nil {
			t.Fatal(err)
		}
		got, _ := c.Workspaces.ReadByID(ctx, w2.ID)
		if len(got.TagNames) != 1 || got.TagNames[0] != "two" {
			t.Fatalf("tag by id: %v", got.TagNames)
		}
		if err := c.Workspaces.RemoveTags(ctx, w.ID, tfe.WorkspaceRemoveTagsOptions{Tags: []*tfe.Tag{{Name: "one"}, {Name: "missing"}}}); err != nil {
			t.Fatal(err)
		}
		got, _ = c.Workspaces.ReadByID(ctx, w.ID)
		if strings.Join(got.TagNames, ",") != "two,three" {
			t.Fatalf("after remove: %v", got.TagNames)
		}
		code, out := raw(t, e, "GET", "/api/v2/organizations/acme/tags", "")
		if code != 200 || !strings.Contains(out, `"two"`) || !strings.Contains(out, `"instance-count":2`) {
			t.Fatalf("organization tags: %d %s", code, out)
		}
		// The store filters, excludes and pages the organization's tags.
		tagNames := func(o *tfe.OrganizationTagsListOptions) (string, int) {
			t.Helper()
			l, err := c.OrganizationTags.List(ctx, "acme", o)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, tg := range l.Items {
				out = append(out, fmt.Sprintf("%s:%d", tg.Name, tg.InstanceCount))
			}
			return strings.Join(out, ","), l.TotalCount
		}
		all, total := tagNames(nil)
		if all != "one:0,three:1,two:2" || total != 3 {
			t.Fatalf("organization tags: %s of %d, want one:0,three:1,two:2", all, total)
		}
		for _, tc := range []struct {
			opts  *tfe.OrganizationTagsListOptions
			want  string
			total int
		}{
			{&tfe.OrganizationTagsListOptions{Query: "TW"}, "two:2", 1},
			{&tfe.OrganizationTagsListOptions{Filter: w2.ID}, "one:0,three:1", 2},
			{&tfe.OrganizationTagsListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}}, "two:2", 3},
			{&tfe.OrganizationTagsListOptions{Query: "_"}, "", 0},
		} {
			if got, n := tagNames(tc.opts); got != tc.want || n != tc.total {
				t.Errorf("organization tags %+v: %s of %d, want %s of %d", tc.opts, got, n, tc.want, tc.total)
			}
		}
		// Tag bindings: project bindings are inherited, own ones override.
		p, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "tagged", TagBindings: []*tfe.TagBinding{{Key: "team", Value: "core"}, {Key: "env", Value: "dev"}}})
		if err != nil {
			t.Fatal(err)
		}
		w3, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("ws3"), Project: p, TagBindings: []*tfe.TagBinding{{Key: "env", Value: "prod"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.AddTagBindings(ctx, w3.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "cost", Value: "42"}}}); err != nil {
			t.Fatal(err)
		}
		own, err := c.Workspaces.ListTagBindings(ctx, w3.ID)
		if err != nil || len(own) != 2 {
			t.Fatalf("own bindings: %+v %v", own, err)
		}
		eff, err := c.Workspaces.ListEffectiveTagBindings(ctx, w3.ID)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, b := range eff {
			m[b.Key] = b.Value
			if inherited := b.Key == "team"; inherited != (b.Links["inherited-from"] != nil) || (!inherited && b.Links != nil) {
				t.Errorf("binding %s: links %v", b.Key, b.Links)
			}
		}
		if len(m) != 3 || m["env"] != "prod" || m["team"] != "core" || m["cost"] != "42" {
			t.Fatalf("effective bindings: %v", m)
		}
		l, err := c.Workspaces.List(ctx, "acme", &tfe.WorkspaceListOptions{TagBindings: []*tfe.TagBinding{{Key: "team", Value: "core"}}})
		if err != nil || len(l.Items) != 1 || l.Items[0].ID != w3.ID {
			t.Fatalf("filter by binding: %v", err)
		}
		// search[tags] names single-value tags or binding keys, own or
		// the project's: terraform 1.10+ sends the keys of a cloud block's
		// key/value tags there beside filter[tagged].
		for _, tc := range []struct {
			opts *tfe.WorkspaceListOptions
			want string
		}{
			{&tfe.WorkspaceListOptions{Tags: "cost"}, "ws3"},
			{&tfe.WorkspaceListOptions{Tags: "team"}, "ws3"},
			{&tfe.WorkspaceListOptions{Tags: "two,cost"}, ""},
			{&tfe.WorkspaceListOptions{Tags: "two"}, "ws,ws2"},
			{&tfe.WorkspaceListOptions{TagBindings: []*tfe.TagBinding{{Key: "team", Value: "core"}}, Tags: "team"}, "ws3"},
			{&tfe.WorkspaceListOptions{ExcludeTags: "team"}, "ws,ws2"},
		} {
			l, err := c.Workspaces.List(ctx, "acme", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range l.Items {
				got = append(got, w.Name)
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("list %+v: %v, want %s", tc.opts, got, tc.want)
			}
		}
		if err := c.Workspaces.DeleteAllTagBindings(ctx, w3.ID); err != nil {
			t.Fatal(err)
		}
		if own, _ := c.Workspaces.ListTagBindings(ctx, w3.ID); len(own) != 0 {
			t.Fatalf("bindings after delete all: %+v", own)
		}
	})
}

func TestWorkspaceOtherOrganizationIs404(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		newOrg(t, e.Client, "acme")
		w, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("secret")})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "hidden"})
		if err != nil {
			t.Fatal(err)
		}
		eve := newUserClient(t, e, "eve", false)
		newOrg(t, eve, "evil")
		if _, err := eve.Workspaces.Create(ctx, "evil", tfe.WorkspaceCreateOptions{Name: tfe.String("mine")}); err != nil {
			t.Fatalf("eve cannot use her own organization: %v", err)
		}
		checks := map[string]func() error{
			"read by id":   func() error { _, err := eve.Workspaces.ReadByID(ctx, w.ID); return err },
			"read by name": func() error { _, err := eve.Workspaces.Read(ctx, "acme", "secret"); return err },
			"list":         func() error { _, err := eve.Workspaces.List(ctx, "acme", nil); return err },
			"create": func() error {
				_, err := eve.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("x")})
				return err
			},
			"update": func() error {
				_, err := eve.Workspaces.UpdateByID(ctx, w.ID, tfe.WorkspaceUpdateOptions{AutoApply: tfe.Bool(true)})
				return err
			},
			"delete":         func() error { return eve.Workspaces.DeleteByID(ctx, w.ID) },
			"safe delete":    func() error { return eve.Workspaces.SafeDeleteByID(ctx, w.ID) },
			"lock":           func() error { _, err := eve.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{}); return err },
			"force unlock":   func() error { _, err := eve.Workspaces.ForceUnlock(ctx, w.ID); return err },
			"tags":           func() error { _, err := eve.Workspaces.ListTags(ctx, w.ID, nil); return err },
			"consumers":      func() error { _, err := eve.Workspaces.ListRemoteStateConsumers(ctx, w.ID, nil); return err },
			"project":        func() error { _, err := eve.Projects.Read(ctx, p.ID); return err },
			"projects":       func() error { _, err := eve.Projects.List(ctx, "acme", nil); return err },
			"delete project": func() error { return eve.Projects.Delete(ctx, p.ID) },
			"own ws into foreign project": func() error {
				_, err := eve.Workspaces.Create(ctx, "evil", tfe.WorkspaceCreateOptions{Name: tfe.String("sneaky"), Project: p})
				return err
			},
		}
		for name, fn := range checks {
			if err := fn(); !errors.Is(err, tfe.ErrResourceNotFound) {
				t.Errorf("%s: %v, want not found", name, err)
			}
		}
		if got, err := e.Client.Workspaces.ReadByID(ctx, w.ID); err != nil || got.Locked || got.AutoApply {
			t.Fatalf("workspace changed by an outsider: %+v %v", got, err)
		}
	})
}

func TestProjects(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := newOrg(t, c, "acme")
		p, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "Platform Team", Description: tfe.String("infra")})
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != "Platform Team" || p.Description != "infra" || p.DefaultExecutionMode != "remote" || p.Organization.Name != "acme" {
			t.Fatalf("created: %+v", p)
		}
		if _, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "Platform Team"}); err == nil || !strings.Contains(err.Error(), "already been taken") {
			t.Fatalf("duplicate project: %v", err)
		}
		if code, out := raw(t, e, "POST", "/api/v2/organizations/acme/projects", `{"data":{"type":"projects","attributes":{"name":"bad/name"}}}`); code != 422 || !strings.Contains(out, "Name may only contain") {
			t.Fatalf("bad project name: %d %s", code, out)
		}
		l, err := c.Projects.List(ctx, "acme", &tfe.ProjectListOptions{Name: "Platform Team"})
		if err != nil || len(l.Items) != 1 || l.Items[0].ID != p.ID {
			t.Fatalf("filter[names]: %+v %v", l, err)
		}
		l, err = c.Projects.List(ctx, "acme", &tfe.ProjectListOptions{Query: "default"})
		if err != nil || len(l.Items) != 1 || l.Items[0].ID != org.DefaultProject.ID {
			t.Fatalf("q: %+v %v", l, err)
		}
		// Tag bindings, q's "_" as itself, and the page with its total,
		// newest first: all the store's.
		for _, n := range []string{"a_b", "axb"} {
			if _, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: n, TagBindings: []*tfe.TagBinding{{Key: "env", Value: n}}}); err != nil {
				t.Fatal(err)
			}
		}
		projectNames := func(l *tfe.ProjectList) string {
			var out []string
			for _, p := range l.Items {
				out = append(out, p.Name)
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			opts        *tfe.ProjectListOptions
			want        string
			total, page int
		}{
			{&tfe.ProjectListOptions{Query: "A_B"}, "a_b", 1, 1},
			{&tfe.ProjectListOptions{TagBindings: []*tfe.TagBinding{{Key: "env"}}}, "axb,a_b", 2, 1},
			{&tfe.ProjectListOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "a_b"}}}, "a_b", 1, 1},
			{&tfe.ProjectListOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "nope"}}}, "", 0, 1},
			{&tfe.ProjectListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}}, "Platform Team,Default Project", 4, 2},
		} {
			l, err := c.Projects.List(ctx, "acme", tc.opts)
			if err != nil || projectNames(l) != tc.want || l.TotalCount != tc.total || l.CurrentPage != tc.page {
				t.Errorf("projects %+v: %q of %d on page %d (%v), want %q of %d on page %d", tc.opts, projectNames(l), l.TotalCount, l.CurrentPage, err, tc.want, tc.total, tc.page)
			}
		}
		withTags, err := c.Projects.List(ctx, "acme", &tfe.ProjectListOptions{Query: "b", Include: []tfe.ProjectIncludeOpt{tfe.ProjectEffectiveTagBindings}})
		if err != nil || len(withTags.Items) != 2 {
			t.Fatalf("projects with their tag bindings: %+v %v", withTags, err)
		}
		for _, p := range withTags.Items {
			if len(p.EffectiveTagBindings) != 1 || p.EffectiveTagBindings[0].Key != "env" || p.EffectiveTagBindings[0].Value != p.Name {
				t.Errorf("project %s lists effective tag bindings %+v, want env=%s", p.Name, p.EffectiveTagBindings, p.Name)
			}
		}
		for _, n := range []string{"a_b", "axb"} {
			l, err := c.Projects.List(ctx, "acme", &tfe.ProjectListOptions{Name: n})
			if err != nil || len(l.Items) != 1 {
				t.Fatalf("project %s: %+v %v", n, l, err)
			}
			if err := c.Projects.Delete(ctx, l.Items[0].ID); err != nil {
				t.Fatal(err)
			}
		}
		u, err := c.Projects.Update(ctx, p.ID, tfe.ProjectUpdateOptions{Name: tfe.String("Platform"), DefaultExecutionMode: tfe.String("local")})
		if err != nil || u.Name != "Platform" || u.DefaultExecutionMode != "local" {
			t.Fatalf("update: %+v %v", u, err)
		}
		// Workspaces inherit the project's execution mode unless they overwrite it.
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("inherits"), Project: p})
		if err != nil || w.ExecutionMode != "local" || w.SettingOverwrites == nil || *w.SettingOverwrites.ExecutionMode {
			t.Fatalf("inherited mode: %+v %v", w, err)
		}
		// Neither the default project nor one with workspaces can be deleted.
		err = c.Projects.Delete(ctx, org.DefaultProject.ID)
		if err == nil || !strings.Contains(err.Error(), "default project") {
			t.Fatalf("deleting the default project: %v", err)
		}
		err = c.Projects.Delete(ctx, p.ID)
		if err == nil || !strings.Contains(err.Error(), "workspace") {
			t.Fatalf("deleting a project with workspaces: %v", err)
		}
		// Moving the workspace out lets the project go.
		if _, err := c.Workspaces.UpdateByID(ctx, w.ID, tfe.WorkspaceUpdateOptions{Project: org.DefaultProject}); err != nil {
			t.Fatal(err)
		}
		if err := c.Projects.Delete(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Projects.Read(ctx, p.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleted project: %v", err)
		}
		got, err := c.Workspaces.ReadByID(ctx, w.ID)
		if err != nil || got.Project.ID != org.DefaultProject.ID || got.ExecutionMode != "remote" {
			t.Fatalf("moved workspace: %+v %v", got, err)
		}
	})
}

func TestAgentExecutionMode(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		newOrg(t, c, "other")
		pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("pool-1")})
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := c.AgentPools.Create(ctx, "other", tfe.AgentPoolCreateOptions{Name: tfe.String("pool-2")})
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("agent-ws"), ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
		if err != nil || w.ExecutionMode != "agent" || w.AgentPool == nil || w.AgentPool.ID != pool.ID {
			t.Fatalf("agent workspace: %+v %v", w, err)
		}
		_, err = c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("agent-ws2"), ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(foreign.ID)})
		if err == nil || !strings.Contains(err.Error(), "not found in organization") {
			t.Fatalf("pool of another organization accepted: %v", err)
		}
		// A pool a workspace (or a project's default) names is not
		// deleted under it, as in HCP Terraform: its runs would wait
		// for an agent for good.
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "agents"})
		if err != nil {
			t.Fatal(err)
		}
		body := `{"data":{"type":"projects","attributes":{"default-execution-mode":"agent","default-agent-pool-id":"` + pool.ID + `"}}}`
		if status, raw := e.API(t, "", "PATCH", "/api/v2/projects/"+prj.ID, body); status != 200 {
			t.Fatalf("setting the project's default agent pool: %d %s", status, raw)
		}
		err = c.AgentPools.Delete(ctx, pool.ID)
		testenv.WantStatus(t, "deleting a pool in use", err, "1 workspace(s), 1 project(s)")
		if status, raw := e.API(t, "", "PATCH", "/api/v2/projects/"+prj.ID, `{"data":{"type":"projects","attributes":{"default-execution-mode":"remote"}}}`); status != 200 {
			t.Fatalf("setting the project back to remote: %d %s", status, raw)
		}
		w, err = c.Workspaces.UpdateByID(ctx, w.ID, tfe.WorkspaceUpdateOptions{ExecutionMode: tfe.String("remote")})
		if err != nil || w.ExecutionMode != "remote" || w.AgentPool != nil {
			t.Fatalf("back to remote: %+v %v", w, err)
		}
		if err := c.AgentPools.Delete(ctx, pool.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AgentPools.Read(ctx, pool.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleted pool: %v", err)
		}
	})
}
