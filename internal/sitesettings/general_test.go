package sitesettings_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/signin"
	"github.com/terracehq/terrace/internal/sitesettings"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// plainUser makes a user who is no site admin and in no organization, and
// returns their user ID and a token of theirs.
func plainUser(t *testing.T, e *testenv.Env, name string) (id, token string) {
	t.Helper()
	ctx := context.Background()
	u, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, name, name+"@example.test", false)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	return u.ID, secret
}

// apiError is a JSON:API error document's details, joined.
func apiError(t *testing.T, body []byte) string {
	t.Helper()
	var doc struct {
		Errors []struct {
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Errors) == 0 {
		t.Fatalf("not a JSON:API error document: %s", body)
	}
	var out []string
	for _, e := range doc.Errors {
		out = append(out, e.Detail)
	}
	return strings.Join(out, " | ")
}

func patch(id string, attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": id, "attributes": attrs}}
}

// TestGeneralSettingsReadAndUpdate: every attribute go-tfe reads is
// there, the ones Terrace implements read what is in force (the flag's
// rate limit, the 2h time limits) and change as go-tfe's own test changes
// them; the others read false, 0 or "" and take only that; bad values are
// a 422 naming each attribute, and nothing changes then.
func TestGeneralSettingsReadAndUpdate(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s, err := e.Client.Admin.Settings.General.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := tfe.AdminGeneralSetting{ID: "general", APIRateLimitingEnabled: true, APIRateLimit: 1000, ApplyTimeout: "2h", PlanTimeout: "2h"}
		if *s != want {
			t.Fatalf("the settings before any change = %+v, want %+v", *s, want)
		}
		// What go-tfe's TestAdminSettings_General_Update sends.
		s, err = e.Client.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{
			LimitUserOrgCreation: tfe.Bool(true), APIRateLimitingEnabled: tfe.Bool(true), APIRateLimit: tfe.Int(50),
			DefaultRemoteStateAccess: tfe.Bool(true), ApplyTimeout: tfe.String("2h"), PlanTimeout: tfe.String("30m"),
		})
		if err != nil {
			t.Fatal(err)
		}
		want = tfe.AdminGeneralSetting{ID: "general", LimitUserOrganizationCreation: true, APIRateLimitingEnabled: true, APIRateLimit: 50,
			DefaultRemoteStateAccess: true, ApplyTimeout: "2h", PlanTimeout: "30m"}
		if *s != want {
			t.Fatalf("the updated settings = %+v, want %+v", *s, want)
		}
		if got, err := e.Client.Admin.Settings.General.Read(ctx); err != nil || *got != want {
			t.Fatalf("read after the update = %+v (%v), want %+v", got, err, want)
		}
		// null (go-tfe sends the timeouts so when unset) changes nothing.
		if s, err = e.Client.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{}); err != nil || *s != want {
			t.Fatalf("an update of nothing = %+v (%v), want %+v", s, err, want)
		}
		// What Terrace has no feature for takes false, 0 or "".
		status, body := e.API(t, "", "PATCH", "/api/v2/admin/general-settings", patch("general-settings", map[string]any{
			"require-two-factor-for-admins": false, "fair-run-queuing-enabled": false, "default-workspaces-per-organization-ceiling": 0,
			"terraform-build-worker-plan-timeout": "", "send-passing-statuses-for-untriggered-speculative-plans": false,
		}))
		if status != http.StatusOK {
			t.Fatalf("setting what Terrace does: %d %s", status, body)
		}
		for _, c := range []struct {
			attrs map[string]any
			want  []string
		}{
			{map[string]any{"require-two-factor-for-admins": true, "fair-run-queuing-enabled": true, "limit-organizations-per-user": true,
				"default-organizations-per-user-ceiling": 3, "limit-workspaces-per-organization": true, "default-workspaces-per-organization-ceiling": 5,
				"terraform-build-worker-apply-timeout": "1h", "terraform-build-worker-plan-timeout": "1h",
				"allow-speculative-plans-on-pull-requests-from-forks": true, "send-passing-statuses-for-untriggered-speculative-plans": true,
				"api-rate-limit": 60},
				[]string{"require-two-factor-for-admins cannot be true (only false): Terrace has no two-factor sign-in",
					"fair-run-queuing-enabled cannot be true", "limit-organizations-per-user cannot be true", "default-organizations-per-user-ceiling cannot be 3 (only 0)",
					"limit-workspaces-per-organization cannot be true", "default-workspaces-per-organization-ceiling cannot be 5",
					`terraform-build-worker-apply-timeout cannot be "1h" (only "")`, `terraform-build-worker-plan-timeout cannot be "1h"`,
					"allow-speculative-plans-on-pull-requests-from-forks cannot be true (only false): Terrace never plans a pull request from a fork",
					"send-passing-statuses-for-untriggered-speculative-plans cannot be true"}},
			{map[string]any{"api-rate-limit": 10}, []string{"api-rate-limit must be at least 30"}},
			{map[string]any{"api-rate-limit": "fast"}, []string{`api-rate-limit must be an integer, not "fast"`}},
			{map[string]any{"api-rate-limiting-enabled": "yes"}, []string{"api-rate-limiting-enabled must be a boolean"}},
			{map[string]any{"plan-timeout": "soon"}, []string{`plan-timeout must be a positive duration such as "2h"`}},
			{map[string]any{"apply-timeout": "-1h"}, []string{"apply-timeout must be a positive duration"}},
			{map[string]any{"apply-timeout": 60}, []string{"apply-timeout must be a string"}},
			{map[string]any{"support-email-address": "x@y.test"}, []string{"support-email-address is not a general setting Terrace has"}},
		} {
			status, body := e.API(t, "", "PATCH", "/api/v2/admin/general-settings", patch("general-settings", c.attrs))
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("PATCH %v: %d %s, want 422", c.attrs, status, body)
			}
			got := apiError(t, body)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("PATCH %v: %q does not say %q", c.attrs, got, w)
				}
			}
		}
		if got, err := e.Client.Admin.Settings.General.Read(ctx); err != nil || *got != want {
			t.Fatalf("refused updates changed the settings: %+v (%v), want %+v", got, err, want)
		}
	})
}

// TestSettingsHiddenFromOthers: to anyone but a site admin, an
// organization's owner too, the settings routes are not found.
func TestSettingsHiddenFromOthers(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	owners, err := e.Client.Teams.List(context.Background(), "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(owners.Items) != 1 {
		t.Fatalf("owners team: %v %v", owners, err)
	}
	_, m := e.UserClient(t, "acme", "owner@acme.test", owners.Items[0])
	_, ownerToken, err := e.Server.Auth.CreateToken(context.Background(), e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	_, plain := plainUser(t, e, "plain")
	for _, token := range []string{plain, ownerToken} {
		for _, route := range []string{"GET /api/v2/admin/general-settings", "PATCH /api/v2/admin/general-settings", "GET /api/v2/admin/smtp-settings", "PATCH /api/v2/admin/smtp-settings"} {
			method, path, _ := strings.Cut(route, " ")
			var body any
			if method == "PATCH" {
				body = patch("settings", map[string]any{"enabled": false, "limit-user-organization-creation": true})
			}
			if status, out := e.API(t, token, method, path, body); status != http.StatusNotFound {
				t.Errorf("%s as a non-admin: %d %s, want 404", route, status, out)
			}
		}
	}
	if s, err := e.Client.Admin.Settings.General.Read(context.Background()); err != nil || s.LimitUserOrganizationCreation {
		t.Fatalf("a refused change changed the settings: %+v (%v)", s, err)
	}
}

// TestLimitUserOrganizationCreation: with the setting on, a user who is
// no site admin cannot create an organization, through the API or the UI,
// and is told so in their account's permissions and on the organizations
// page; site admins still can. Off again, users can again.
func TestLimitUserOrganizationCreation(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		userID, token := plainUser(t, e, "plain")
		session, err := e.Server.Signin.StartSession(ctx, userID)
		if err != nil {
			t.Fatal(err)
		}
		create := func(token, name string) (int, []byte) {
			return e.API(t, token, "POST", "/api/v2/organizations", patch("organizations", map[string]any{"name": name, "email": "ops@" + name + ".test"}))
		}
		canCreate := func(token string) bool {
			t.Helper()
			status, body := e.API(t, token, "GET", "/api/v2/account/details", nil)
			if status != http.StatusOK {
				t.Fatalf("account details: %d %s", status, body)
			}
			var doc struct {
				Data struct {
					Attributes struct {
						Permissions struct {
							CanCreateOrganizations bool `json:"can-create-organizations"`
						} `json:"permissions"`
					} `json:"attributes"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			return doc.Data.Attributes.Permissions.CanCreateOrganizations
		}
		page := func() string {
			t.Helper()
			req, _ := http.NewRequest("GET", e.URL+"/app/organizations", nil)
			req.AddCookie(&http.Cookie{Name: signin.CookieName, Value: session})
			resp, err := e.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("the organizations page: %d %s (%v)", resp.StatusCode, b, err)
			}
			return string(b)
		}
		if status, body := create(token, "mine"); status != http.StatusCreated {
			t.Fatalf("a user creating an organization: %d %s", status, body)
		}
		if !canCreate(token) || !strings.Contains(page(), `id="create-org"`) {
			t.Fatal("before the limit, the user is not shown that they may create organizations")
		}

		if _, err := e.Client.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{LimitUserOrgCreation: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		status, body := create(token, "theirs")
		if status != http.StatusForbidden || !strings.Contains(apiError(t, body), "only site administrators may create organizations") {
			t.Fatalf("a user creating an organization with the limit on: %d %s, want 403 saying why", status, body)
		}
		if canCreate(token) {
			t.Error("with the limit on, the user's account still says can-create-organizations")
		}
		if strings.Contains(page(), `id="create-org"`) {
			t.Error("with the limit on, the organizations page still offers the user a new organization")
		}
		if _, err := e.Client.Organizations.Read(ctx, "theirs"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("the refused organization exists: %v", err)
		}
		// Site admins still create them, and are told so.
		if status, body := create(e.Token, "admins"); status != http.StatusCreated {
			t.Fatalf("a site admin creating an organization with the limit on: %d %s", status, body)
		}
		if !canCreate(e.Token) {
			t.Error("a site admin's account says they cannot create organizations")
		}

		if _, err := e.Client.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{LimitUserOrgCreation: tfe.Bool(false)}); err != nil {
			t.Fatal(err)
		}
		if status, body := create(token, "theirs"); status != http.StatusCreated || !canCreate(token) {
			t.Fatalf("with the limit off again, a user creating an organization: %d %s", status, body)
		}
	})
}

// TestDefaultRemoteStateAccess: a workspace created without
// global-remote-state gets the site's default; one that says gets what it
// says, and asking for project remote state turns the default off.
func TestDefaultRemoteStateAccess(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		create := func(name string, opts tfe.WorkspaceCreateOptions) *tfe.Workspace {
			t.Helper()
			opts.Name = tfe.String(name)
			w, err := c.Workspaces.Create(ctx, "acme", opts)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		if w := create("before", tfe.WorkspaceCreateOptions{}); w.GlobalRemoteState {
			t.Fatal("by default a new workspace shares its state with the whole organization")
		}
		if _, err := c.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{DefaultRemoteStateAccess: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		if w := create("shared", tfe.WorkspaceCreateOptions{}); !w.GlobalRemoteState {
			t.Error("with default-remote-state-access, a new workspace does not share its state")
		}
		if w := create("private", tfe.WorkspaceCreateOptions{GlobalRemoteState: tfe.Bool(false)}); w.GlobalRemoteState {
			t.Error("a workspace created with global-remote-state false shares its state")
		}
		if w := create("project", tfe.WorkspaceCreateOptions{ProjectRemoteState: tfe.Bool(true)}); w.GlobalRemoteState || !w.ProjectRemoteState {
			t.Errorf("a workspace created with project-remote-state: global %t, project %t; want false, true", w.GlobalRemoteState, w.ProjectRemoteState)
		}
		if w, err := c.Workspaces.Read(ctx, "acme", "before"); err != nil || w.GlobalRemoteState {
			t.Errorf("the default changed a workspace that existed: %+v %v", w, err)
		}
		if _, err := c.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{DefaultRemoteStateAccess: tfe.Bool(false)}); err != nil {
			t.Fatal(err)
		}
		if w := create("after", tfe.WorkspaceCreateOptions{}); w.GlobalRemoteState {
			t.Error("with default-remote-state-access off again, a new workspace shares its state")
		}
	})
}

// TestSettingsReachEveryReplica: two replicas on one database. A change
// made through one counts on the other: the organization creation limit
// and the remote state default on its very next request (they are read
// when decided), the rate limit once the change's wake-up reaches it (each
// replica keeps it in memory; on SQLite, which sends no wake-up to another
// process, it reads the settings every second), and the replica that made
// it at once.
func TestSettingsReachEveryReplica(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			a := testenv.New(t, testenv.Options{Store: st})
			b := testenv.New(t, testenv.ReplicaOf(t, a))
			ctx := context.Background()
			_, token := plainUser(t, a, "plain")
			limit := func(e *testenv.Env) string {
				t.Helper()
				resp, err := e.HTTP.Get(e.URL + "/api/v2/ping")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.Header.Get("X-RateLimit-Limit")
			}
			if limit(a) != "1000" || limit(b) != "1000" {
				t.Fatalf("before any change: X-RateLimit-Limit %q and %q, want the flag's 1000", limit(a), limit(b))
			}
			if _, err := a.Client.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{
				LimitUserOrgCreation: tfe.Bool(true), DefaultRemoteStateAccess: tfe.Bool(true), APIRateLimit: tfe.Int(40),
			}); err != nil {
				t.Fatal(err)
			}
			changed := time.Now()
			if got := limit(a); got != "40" {
				t.Errorf("the replica that made the change: X-RateLimit-Limit %q, want 40 at once", got)
			}
			status, body := b.API(t, token, "POST", "/api/v2/organizations", patch("organizations", map[string]any{"name": "theirs", "email": "a@b.test"}))
			if status != http.StatusForbidden {
				t.Errorf("the other replica let a user create an organization after the limit: %d %s", status, body)
			}
			testenv.NewOrg(t, b.Client, "acme")
			if w, err := b.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("w")}); err != nil || !w.GlobalRemoteState {
				t.Errorf("the other replica made a workspace without the new default: %+v %v", w, err)
			}
			for limit(b) != "40" {
				if time.Since(changed) > 10*time.Second {
					t.Fatalf("the other replica's rate limit is %q %s after the change, want 40", limit(b), time.Since(changed))
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("the other replica's rate limit changed %s after the change", time.Since(changed).Round(time.Millisecond))
			// And it limits: a burst past 40 requests is refused in part.
			// The 80 are sent at once: one after another they can take
			// more than two seconds on a busy machine, and so stay under
			// 40 a second.
			var refused atomic.Int32
			var burst sync.WaitGroup
			for range 80 {
				burst.Go(func() {
					req, err := http.NewRequest(http.MethodGet, b.URL+"/api/v2/account/details", nil)
					if err != nil {
						return
					}
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := b.HTTP.Do(req)
					if err != nil {
						return
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						refused.Add(1)
					}
				})
			}
			burst.Wait()
			if refused.Load() == 0 {
				t.Error("80 requests at once passed a limit of 40 a second")
			}

			// Rate limiting off: no token is limited; the limit sent is the
			// per-address one (--rate-limit-per-address), which is no
			// setting.
			if _, err := a.Client.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{APIRateLimitingEnabled: tfe.Bool(false)}); err != nil {
				t.Fatal(err)
			}
			changed = time.Now()
			for limit(b) != "3000" {
				if time.Since(changed) > 10*time.Second {
					t.Fatalf("the other replica still sends X-RateLimit-Limit %q %s after rate limiting was turned off, want the per-address 3000", limit(b), time.Since(changed))
				}
				time.Sleep(20 * time.Millisecond)
			}
			for range 80 {
				if status, body := b.API(t, token, "GET", "/api/v2/account/details", nil); status != http.StatusOK {
					t.Fatalf("with rate limiting off: %d %s", status, body)
				}
			}
		})
	}
}

// TestIdleReplicasReadNoSettings: on PostgreSQL a replica reads the
// general settings when it starts and when another replica tells it of a
// change, not on a clock: idle, it reads nothing (replicas read them once
// a second before). The watcher runs on replica b's store, the change is
// made through replica a's API.
func TestIdleReplicasReadNoSettings(t *testing.T) {
	t.Parallel()
	a := testenv.New(t, testenv.Options{Store: "postgres"})
	b := testenv.New(t, testenv.ReplicaOf(t, a))
	svc, err := sitesettings.NewService(sitesettings.Options{DB: b.Server.DB,
		SendTest: func(context.Context, sitesettings.Mail, string) error { return errors.New("no mail here") }})
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan sitesettings.General, 8)
	svc.OnGeneral(func(g sitesettings.General) { heard <- g })
	ctx, cancel := context.WithCancel(context.Background())
	counted, reads := core.WithStatementCount(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.Watch(counted, 0)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	next := func(what string) sitesettings.General {
		t.Helper()
		select {
		case g := <-heard:
			return g
		case <-time.After(30 * time.Second):
			t.Fatalf("the watcher did not hear %s in 30 s", what)
		}
		return sitesettings.General{}
	}
	if g := next("the settings at its start"); g.APIRateLimit == 45 {
		t.Fatalf("the rate limit is 45 before it was set: %+v", g)
	}
	// Three times as long as a replica used to wait between reads.
	time.Sleep(3 * time.Second)
	if n := reads(); n != 1 {
		t.Errorf("an idle replica ran %d statements reading the settings in 3 s, want 1 (at its start)", n)
	}
	if _, err := a.Client.Admin.Settings.General.Update(context.Background(), tfe.AdminGeneralSettingsUpdateOptions{APIRateLimit: tfe.Int(45)}); err != nil {
		t.Fatal(err)
	}
	if g := next("replica a's change"); g.APIRateLimit != 45 {
		t.Errorf("after replica a set the rate limit to 45, replica b read %+v", g)
	}
	if n := reads(); n != 2 {
		t.Errorf("replica b ran %d statements reading the settings, want 2 (at its start, at the change)", n)
	}
}
