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
