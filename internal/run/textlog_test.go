package run

import (
	"net/http"
	"testing"
)

// TestTextLogFor: a run logs text for the clients that print its log as
// it is (the remote backend, the cloud backend before terraform 1.4),
// and follows the workspace's structured run output otherwise.
func TestTextLogFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version, integration string
		want                 bool
	}{
		{"", "", false},            // the API, the UI
		{"1.11.4", "cloud", false}, // the cloud backend
		{"1.4.0", "cloud", false},
		{"1.12.6", "cloud", false}, // OpenTofu's
		{"1.3.9", "cloud", true},   // before it rendered JSON log lines
		{"1.11.4", "", true},       // the remote backend
		{"0.14.11", "", true},
	} {
		h := http.Header{}
		if c.version != "" {
			h.Set("Terraform-Version", c.version)
		}
		if c.integration != "" {
			h.Set("X-Terraform-Integration", c.integration)
		}
		if got := TextLogFor(h); got != c.want {
			t.Errorf("Terraform-Version %q, X-Terraform-Integration %q: TextLogFor = %v, want %v", c.version, c.integration, got, c.want)
		}
	}
}
