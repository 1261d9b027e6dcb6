package sshkey_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/sshkey"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

const secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbC14eXo=\n-----END OPENSSH PRIVATE KEY-----\n"

// secretMarker is the part of the value a leak would show even if newlines
// were escaped.
const secretMarker = "c2VjcmV0LWtleS1tYXRlcmlhbC14eXo"

func newOrg(t *testing.T, c *tfe.Client, name string) {
	t.Helper()
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(name), Email: tfe.String("ops@" + name + ".test")}); err != nil {
		t.Fatal(err)
	}
}

func newWorkspace(t *testing.T, c *tfe.Client, org, name string) *tfe.Workspace {
	t.Helper()
	w, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// raw sends a request with token (the site token when "") and returns the
// status and body.
func raw(t *testing.T, e *testenv.Env, token, method, path, body string) (int, string) {
	t.Helper()
	code, b := e.API(t, token, method, "/api/v2/"+path, body)
	return code, string(b)
}

func userToken(t *testing.T, e *testenv.Env, name string) string {
	t.Helper()
	u, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, name, name+"@users.test", false)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSSHKeyCRUD(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		k1, err := c.SSHKeys.Create(ctx, "acme", tfe.SSHKeyCreateOptions{Name: tfe.String("deploy"), Value: tfe.String(secret)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(k1.ID, "sshkey-") || k1.Name != "deploy" {
			t.Fatalf("created %+v", k1)
		}
		k2, err := c.SSHKeys.Create(ctx, "acme", tfe.SSHKeyCreateOptions{Name: tfe.String("modules"), Value: tfe.String(secret)})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.SSHKeys.List(ctx, "acme", nil)
		if err != nil || len(l.Items) != 2 || l.Items[0].ID != k1.ID || l.Items[1].ID != k2.ID {
			t.Fatalf("list: %+v %v", l, err)
		}
		got, err := c.SSHKeys.Read(ctx, k1.ID)
		if err != nil || *got != *k1 {
			t.Fatalf("read: %+v %v", got, err)
		}
		up, err := c.SSHKeys.Update(ctx, k1.ID, tfe.SSHKeyUpdateOptions{Name: tfe.String("deploy-2")})
		if err != nil || up.Name != "deploy-2" || up.ID != k1.ID {
			t.Fatalf("update: %+v %v", up, err)
		}
		// The value is kept across a rename, and can be replaced.
		if v, err := e.Server.SSHKeys.PrivateKey(ctx, k1.ID); err != nil || v != secret {
			t.Fatalf("stored value after rename: %q %v", v, err)
		}
		if st, body := raw(t, e, "", "PATCH", "ssh-keys/"+k1.ID, `{"data":{"type":"ssh-keys","attributes":{"value":"rotated"}}}`); st != 200 || strings.Contains(body, "rotated") {
			t.Fatalf("rotate: %d %s", st, body)
		}
		if v, _ := e.Server.SSHKeys.PrivateKey(ctx, k1.ID); v != "rotated" {
			t.Fatalf("stored value after rotation: %q", v)
		}
		// It survives a restart.
		e = e.Restart(t)
		c = e.Client
		if got, err := c.SSHKeys.Read(ctx, k1.ID); err != nil || got.Name != "deploy-2" {
			t.Fatalf("read after restart: %+v %v", got, err)
		}
		if err := c.SSHKeys.Delete(ctx, k1.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SSHKeys.Read(ctx, k1.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("read deleted: %v", err)
		}
		if err := c.SSHKeys.Delete(ctx, k1.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if l, _ := c.SSHKeys.List(ctx, "acme", nil); len(l.Items) != 1 || l.Items[0].ID != k2.ID {
			t.Fatalf("list after delete: %+v", l.Items)
		}
	})
}

func TestSSHKeyValidation(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		newOrg(t, e.Client, "acme")
		cases := []struct {
			name, body, detail string
			status             int
		}{
			{"missing name", `{"data":{"type":"ssh-keys","attributes":{"value":"v"}}}`, "name is required", 422},
			{"empty name", `{"data":{"type":"ssh-keys","attributes":{"name":"","value":"v"}}}`, "name is required", 422},
			{"missing value", `{"data":{"type":"ssh-keys","attributes":{"name":"n"}}}`, "value is required", 422},
			{"empty value", `{"data":{"type":"ssh-keys","attributes":{"name":"n","value":""}}}`, "value is required", 422},
			{"value of wrong type", `{"data":{"type":"ssh-keys","attributes":{"name":"n","value":7}}}`, `\"value\"`, 422},
			{"long name", `{"data":{"type":"ssh-keys","attributes":{"name":"` + strings.Repeat("n", 256) + `","value":"v"}}}`, "longer than", 422},
			{"huge value", `{"data":{"type":"ssh-keys","attributes":{"name":"n","value":"` + strings.Repeat("v", 70<<10) + `"}}}`, "", 0},
			{"not json", `{`, "JSON", 400},
		}
		for _, tc := range cases {
			st, body := raw(t, e, "", "POST", "organizations/acme/ssh-keys", tc.body)
			if tc.status == 0 {
				if st < 400 || st >= 500 {
					t.Errorf("%s: %d %s", tc.name, st, body)
				}
				continue
			}
			if st != tc.status || !strings.Contains(body, tc.detail) {
				t.Errorf("%s: %d %s, want %d with %q", tc.name, st, body, tc.status, tc.detail)
			}
		}
		if l, err := e.Client.SSHKeys.List(ctx, "acme", nil); err != nil || len(l.Items) != 0 {
			t.Fatalf("after refused creates: %+v %v", l, err)
		}
		for _, id := range []string{"nope", "sshkey-", "ws-abc", "sshkey-doesnotexist1"} {
			for _, m := range []string{"GET", "PATCH", "DELETE"} {
				if st, body := raw(t, e, "", m, "ssh-keys/"+id, `{"data":{"attributes":{"name":"x"}}}`); st != 404 {
					t.Errorf("%s %s: %d %s", m, id, st, body)
				}
			}
		}
		if st, _ := raw(t, e, "", "GET", "organizations/nope/ssh-keys", ""); st != 404 {
			t.Errorf("list in unknown org: %d", st)
		}
		if st, body := raw(t, e, "", "POST", "organizations/nope/ssh-keys", `{"data":{"type":"ssh-keys","attributes":{"name":"n","value":"v"}}}`); st != 404 {
			t.Errorf("create in unknown org: %d %s", st, body)
		}
	})
}

func TestSSHKeyAccess(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		newOrg(t, e.Client, "acme")
		k, err := e.Client.SSHKeys.Create(ctx, "acme", tfe.SSHKeyCreateOptions{Name: tfe.String("deploy"), Value: tfe.String(secret)})
		if err != nil {
			t.Fatal(err)
		}
		// A user outside the organization sees nothing.
		outsider := userToken(t, e, "mallory")
		for _, rq := range [][2]string{{"GET", "ssh-keys/" + k.ID}, {"PATCH", "ssh-keys/" + k.ID}, {"DELETE", "ssh-keys/" + k.ID}, {"GET", "organizations/acme/ssh-keys"}, {"POST", "organizations/acme/ssh-keys"}} {
			if st, body := raw(t, e, outsider, rq[0], rq[1], `{"data":{"attributes":{"name":"x","value":"y"}}}`); st != 404 {
				t.Errorf("outsider %s %s: %d %s", rq[0], rq[1], st, body)
			}
		}
		// A member who neither manages VCS settings nor administers a
		// workspace may not read keys (TestReadingSSHKeysNeedsWhatTheListNeeds)
		// nor manage them.
		member := userToken(t, e, "bob")
		team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
		if err != nil {
			t.Fatal(err)
		}
		// A team takes members of its organization only: bob joins first.
		m, err := e.Client.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("bob@users.test")})
		if err != nil {
			t.Fatal(err)
		}
		e.Accept(t, m.ID)
		if err := e.Client.TeamMembers.Add(ctx, team.ID, tfe.TeamMemberAddOptions{Usernames: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
		if st, body := raw(t, e, member, "GET", "ssh-keys/"+k.ID, ""); st != 403 || strings.Contains(body, "deploy") {
			t.Errorf("member read: %d %s", st, body)
		}
		for _, rq := range [][2]string{{"PATCH", "ssh-keys/" + k.ID}, {"DELETE", "ssh-keys/" + k.ID}, {"POST", "organizations/acme/ssh-keys"}} {
			if st, body := raw(t, e, member, rq[0], rq[1], `{"data":{"attributes":{"name":"x","value":"y"}}}`); st != 403 {
				t.Errorf("member %s %s: %d %s", rq[0], rq[1], st, body)
			}
		}
		if got, err := e.Client.SSHKeys.Read(ctx, k.ID); err != nil || got.Name != "deploy" {
			t.Fatalf("after refused writes: %+v %v", got, err)
		}
	})
}

func TestSSHKeyValueNeverReturned(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		newOrg(t, e.Client, "acme")
		w := newWorkspace(t, e.Client, "acme", "web")
		bodies := map[string]string{}
		check := func(what string, st int, body string) {
			t.Helper()
			if st >= 300 {
				t.Errorf("%s: %d %s", what, st, body)
			}
			bodies[what] = body
		}
		st, body := raw(t, e, "", "POST", "organizations/acme/ssh-keys", fmt.Sprintf(`{"data":{"type":"ssh-keys","attributes":{"name":"deploy","value":%q}}}`, secret))
		check("create", st, body)
		id := body[strings.Index(body, `"id":"`)+6:]
		id = id[:strings.Index(id, `"`)]
		st, body = raw(t, e, "", "PATCH", "ssh-keys/"+id, fmt.Sprintf(`{"data":{"type":"ssh-keys","attributes":{"name":"deploy2","value":%q}}}`, secret))
		check("update", st, body)
		st, body = raw(t, e, "", "GET", "ssh-keys/"+id, "")
		check("read", st, body)
		st, body = raw(t, e, "", "GET", "organizations/acme/ssh-keys", "")
		check("list", st, body)
		st, body = raw(t, e, "", "PATCH", "workspaces/"+w.ID+"/relationships/ssh-key", `{"data":{"type":"workspaces","attributes":{"id":"`+id+`"}}}`)
		check("assign", st, body)
		st, body = raw(t, e, "", "GET", "workspaces/"+w.ID, "")
		check("workspace read", st, body)
		st, body = raw(t, e, "", "GET", "organizations/acme/workspaces", "")
		check("workspace list", st, body)
		for what, b := range bodies {
			if strings.Contains(b, secretMarker) || strings.Contains(b, `"value"`) {
				t.Errorf("%s leaks the value: %s", what, b)
			}
		}
		if !strings.Contains(bodies["read"], `"name":"deploy2"`) || !strings.Contains(bodies["workspace list"], id) {
			t.Errorf("responses lack what they should show: %v", bodies)
		}
	})
}

func TestOptionsStringRedacts(t *testing.T) {
	v := secret
	n := "deploy"
	o := sshkey.Options{Name: &n, Value: &v}
	for _, s := range []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%v", &o)} {
		if strings.Contains(s, secretMarker) || !strings.Contains(s, "deploy") {
			t.Errorf("formatted options: %s", s)
		}
	}
}
