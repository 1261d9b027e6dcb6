package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Raw sends one JSON:API request that go-tfe has no method for, to
// base+path (path from the root, "/api/v2/…"; a full URL is sent as it
// is), as token, with body: nil, a string, a []byte, or a value sent as its
// JSON. It returns the status and the body; a request that cannot be sent
// fails the test.
func Raw(t testing.TB, hc *http.Client, base, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encoding the body of %s %s: %v", method, path, err)
		}
		rd = bytes.NewReader(buf)
	}
	url := path
	if !strings.HasPrefix(path, "https://") && !strings.HasPrefix(path, "http://") {
		url = base + path
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/vnd.api+json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// API is Raw against this server as token ("" for the site token).
func (e *Env) API(t testing.TB, token, method, path string, body any) (int, []byte) {
	t.Helper()
	if token == "" {
		token = e.Token
	}
	return Raw(t, e.HTTP, e.URL, token, method, path, body)
}

// IncludedOwners reads an admin list answered with
// include=organization.owners (or workspace.organization.owners): each
// included organization's owners, by organization name, each of whom
// must be included too, as a user.
func IncludedOwners(t testing.TB, code int, body string) map[string][]string {
	t.Helper()
	var doc struct {
		Included []struct {
			Type, ID      string
			Relationships map[string]struct {
				Data json.RawMessage `json:"data"`
			} `json:"relationships"`
		} `json:"included"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil {
		t.Fatalf("a list with its organizations' owners: %d %s", code, body)
	}
	users := map[string]bool{}
	for _, inc := range doc.Included {
		if inc.Type == "users" {
			users[inc.ID] = true
		}
	}
	out := map[string][]string{}
	for _, inc := range doc.Included {
		if inc.Type != "organizations" {
			continue
		}
		rel, ok := inc.Relationships["owners"]
		if !ok {
			t.Fatalf("included organization %s has no owners relationship: %s", inc.ID, body)
		}
		var refs []struct{ Type, ID string }
		if err := json.Unmarshal(rel.Data, &refs); err != nil {
			t.Fatalf("included organization %s's owners: %v: %s", inc.ID, err, body)
		}
		out[inc.ID] = []string{}
		for _, u := range refs {
			if u.Type != "users" || !users[u.ID] {
				t.Fatalf("organization %s's owner %s/%s is not included: %s", inc.ID, u.Type, u.ID, body)
			}
			out[inc.ID] = append(out[inc.ID], u.ID)
		}
	}
	return out
}
