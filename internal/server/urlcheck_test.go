package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestUnprintableInput: a NUL, another control character or bytes that
// are not UTF-8 in a URL's path or query are a 400 that says so, and in a
// request body's IDs and names a 4xx, on both stores: on PostgreSQL, which
// cannot hold such text, each was a 500.
func TestUnprintableInput(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		testenv.NewOrg(t, e.Client, "acme")
		for _, path := range []string{
			"/api/v2/organizations/acme/workspaces/a%00b",
			"/api/v2/workspaces/ws-a%00b",
			"/api/v2/organizations/a%0Ab",
			"/api/v2/runs/run-a%00b",
			"/api/v2/organizations/acme/workspaces?search%5Bname%5D=a%00b",
			"/api/v2/organizations/acme/workspaces/a%ffb",
			"/api/v2/state-versions/sv-%00",
			"/app/organizations/acme%00",
		} {
			code, body := e.API(t, "", "GET", path, nil)
			if code != http.StatusBadRequest || !strings.Contains(string(body), "control character") {
				t.Errorf("GET %s: %d %.200s, want a 400 saying why", path, code, body)
			}
		}
		ws, err := e.Client.Workspaces.Read(t.Context(), "acme", "nope")
		if err == nil || ws != nil {
			t.Fatalf("reading a workspace that does not exist: %v", err)
		}
		for _, b := range []struct{ method, path, body string }{
			{"POST", "/api/v2/runs", `{"data":{"type":"runs","relationships":{"workspace":{"data":{"type":"workspaces","id":"ws-a\u0000b"}}}}}`},
			{"POST", "/api/v2/organizations/acme/workspaces", `{"data":{"type":"workspaces","attributes":{"name":"ok"},"relationships":{"project":{"data":{"type":"projects","id":"prj-\u0000"}}}}}`},
			{"POST", "/api/v2/organizations/acme/teams", `{"data":{"type":"teams","attributes":{"name":"t\u0000"}}}`},
		} {
			code, body := e.API(t, "", b.method, b.path, b.body)
			if code >= 500 || code < 400 {
				t.Errorf("%s %s with a NUL in the body: %d %.200s, want a 4xx", b.method, b.path, code, body)
			}
		}
	})
}
