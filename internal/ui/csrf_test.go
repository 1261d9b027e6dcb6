package ui_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/testenv"
)

// Unsafe /app requests must be same-origin and carry the form's token:
// a cross-site POST is refused even with the victim's credentials, and so
// is a same-origin one without the token.
func TestCrossSitePostIsRefused(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")

	// Without credentials a page sends the browser to sign in.
	noRedirect := *e.HTTP
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Get(e.URL + "/app/acme/workspaces?search=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/app/signin?next="+url.QueryEscape("/app/acme/workspaces?search=x") {
		t.Fatalf("a page without credentials: %d to %q", resp.StatusCode, loc)
	}

	// A page gives the CSRF cookie and the token its forms carry.
	req, _ := http.NewRequest("GET", e.URL+"/app/acme/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err = e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("workspace list: %d, no CSRF token in its form", resp.StatusCode)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "terrace_csrf" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || !cookie.Secure {
		t.Fatalf("CSRF cookie: %+v", cookie)
	}
	post := func(name string, form url.Values, headers map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", e.URL+"/app/acme/workspaces", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+e.Token)
		req.AddCookie(cookie)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good := url.Values{"csrf_token": {string(m[1])}, "name": {"created"}}
	if st := post("cross-site", good, map[string]string{"Sec-Fetch-Site": "cross-site"}); st != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", st)
	}
	if st := post("foreign origin", good, map[string]string{"Origin": "https://evil.test"}); st != http.StatusForbidden {
		t.Errorf("POST from another origin: %d, want 403", st)
	}
	if st := post("no token", url.Values{"name": {"created"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}); st != http.StatusForbidden {
		t.Errorf("POST without the form token: %d, want 403", st)
	}
	if _, err := e.Client.Workspaces.Read(t.Context(), "acme", "created"); err == nil {
		t.Fatal("a refused POST created the workspace")
	}
	if st := post("same origin", good, map[string]string{"Sec-Fetch-Site": "same-origin"}); st != http.StatusOK && st != http.StatusSeeOther {
		t.Fatalf("same-origin POST with the token: %d", st)
	}
	if _, err := e.Client.Workspaces.Read(t.Context(), "acme", "created"); err != nil {
		t.Fatalf("the accepted POST did not create the workspace: %v", err)
	}
}
