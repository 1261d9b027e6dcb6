package runner

import (
	"slices"
	"testing"

	"github.com/terracehq/terrace/internal/run"
)

// TestRunSecrets: a run's sensitive variables join the workspace's secrets
// (the HCL expression and a string literal's text); plain run variables do
// not.
func TestRunSecrets(t *testing.T) {
	ws := []Variable{{Key: "db", Value: "pw-123", Category: "terraform", Sensitive: true}}
	got := withRunSecrets(ws, []run.RunVar{
		{Key: "token", Value: `"s3cr3t-hunter2"`, Sensitive: true},
		{Key: "size", Value: "3"},
	})
	secrets := sortedSecrets(got)
	for _, want := range []string{"pw-123", `"s3cr3t-hunter2"`, "s3cr3t-hunter2"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("secrets %q lack %q", secrets, want)
		}
	}
	if slices.Contains(secrets, "3") || sensitiveKeys(got)["size"] {
		t.Errorf("a plain run variable is treated as secret: %q", secrets)
	}
	if !sensitiveKeys(got)["token"] {
		t.Error("token is not a sensitive key")
	}
	if len(ws) != 1 {
		t.Error("the workspace's variables were changed")
	}
	// What the server sends as mask-only values of a previous run.
	if got := SensitiveRunValues([]run.RunVar{{Key: "token", Value: `"s3cr3t-hunter2"`, Sensitive: true}, {Key: "size", Value: "300"}}); !slices.Equal(got, []string{`"s3cr3t-hunter2"`, "s3cr3t-hunter2"}) {
		t.Errorf("SensitiveRunValues = %q", got)
	}
	// The API shows sensitive run variables empty.
	shown := run.Redacted([]run.RunVar{{Key: "token", Value: `"x"`, Sensitive: true}, {Key: "size", Value: "3"}})
	if shown[0].Value != "" || shown[1].Value != "3" {
		t.Errorf("redacted = %+v", shown)
	}
}
