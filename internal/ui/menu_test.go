package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/testenv"
)

// The organization's navigation links to the audit trail and the VCS
// providers only for those the pages answer: a plain member, refused
// both, is offered neither; an owner both.
func TestOrganizationMenuByPermission(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	member := userToken(t, e, "acme", "member@acme.test")
	links := map[string]string{"audit": `href="/app/acme/audit"`, "vcs": `href="/app/acme/settings/version-control"`}
	for _, tc := range []struct {
		who, token string
		want       bool
	}{{"a member", member, false}, {"an owner", e.Token, true}} {
		st, body := getPage(t, e, tc.token, "/app/acme/workspaces")
		if st != http.StatusOK {
			t.Fatalf("%s: workspaces page %d", tc.who, st)
		}
		nav := between(body, `<nav aria-label="organization">`, `</nav>`)
		for name, link := range links {
			if strings.Contains(nav, link) != tc.want {
				t.Errorf("%s: the menu's %s link shown %v, want %v: %s", tc.who, name, !tc.want, tc.want, nav)
			}
		}
		for _, p := range []string{"/app/acme/audit", "/app/acme/settings/version-control"} {
			if st, _ := getPage(t, e, tc.token, p); (st == http.StatusOK) != tc.want {
				t.Errorf("%s: %s answers %d while the menu shows its link %v", tc.who, p, st, tc.want)
			}
		}
	}
}
