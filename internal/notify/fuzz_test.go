package notify

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// FuzzDecodeConfiguration feeds notification configuration bodies (create
// and update) through the handler's decoding and the validation every
// configuration passes. Nothing panics; a configuration that validates has
// a URL deliveries can be sent to, and its webhook payload is JSON whose
// signature verifies with its token.
func FuzzDecodeConfiguration(f *testing.F) {
	for _, seed := range []string{
		`{"data":{"type":"notification-configurations","attributes":{"name":"n","destination-type":"generic","url":"https://hooks.example/x","token":"t","enabled":true,"triggers":["run:created","run:errored"]}}}`,
		`{"data":{"type":"notification-configurations","attributes":{"name":"s","destination-type":"slack","url":"https://hooks.slack.example/services/T/B/x"}}}`,
		`{"data":{"type":"notification-configurations","attributes":{"name":"e","destination-type":"email","email-addresses":["a@b.c"]},"relationships":{"users":{"data":[{"type":"users","id":"user-1"}]}}}}`,
		`{"data":{"type":"notification-configurations","attributes":{"name":"t","destination-type":"microsoft-teams","url":"http://[::1]:80/"}}}`,
		`{"data":{"type":"notification-configurations","attributes":{"name":"x","destination-type":"generic","url":"ftp://x","triggers":["run:created","run:created"]}}}`,
		`{"data":{"type":"workspaces","attributes":{}}}`,
		`{"data":{"attributes":{"triggers":"run:created"}}}`,
		`{"data":{"attributes":{"name":"x"},"relationships":{"users":{"data":{"id":"user-1"}}}}}`,
		`{}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := tfeapi.DecodeBytes(body)
		if err != nil {
			return
		}
		o, err := decodeChanges(doc)
		if err != nil {
			return
		}
		c := &Configuration{}
		if apply(c, o) != nil {
			return
		}
		if c.Destination != Email {
			u, err := url.Parse(c.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Fatalf("a valid %s configuration has URL %q", c.Destination, c.URL)
			}
		}
		payload, err := Body(c, verificationEvent())
		if err != nil {
			t.Fatalf("payload of a valid configuration: %v", err)
		}
		if !json.Valid(payload) {
			t.Fatalf("payload is not JSON: %s", payload)
		}
		if c.token != "" && !Verify(c.token, payload, Sign(c.token, payload)) {
			t.Fatal("the payload's own signature does not verify")
		}
	})
}
