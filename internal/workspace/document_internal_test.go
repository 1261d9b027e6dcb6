package workspace

import "testing"

// TestDocumentQueryFollowsItsParts: the statement readByName keeps is
// built again whenever the document's parts differ from those it was
// built of, and only then.
func TestDocumentQueryFollowsItsParts(t *testing.T) {
	var q documentQuery
	builds := 0
	get := func(parts ...string) string {
		return q.get(parts, func() string { builds++; return selectList(parts) })
	}
	if got := get("SELECT 1", "SELECT 2"); got != "(SELECT 1), (SELECT 2)" || builds != 1 {
		t.Fatalf("first statement %q after %d builds", got, builds)
	}
	if got := get("SELECT 1", "SELECT 2"); got != "(SELECT 1), (SELECT 2)" || builds != 1 {
		t.Errorf("the same parts: %q after %d builds, want the kept statement", got, builds)
	}
	if got := get("SELECT 1", "SELECT 3"); got != "(SELECT 1), (SELECT 3)" || builds != 2 {
		t.Errorf("other parts: %q after %d builds, want a new statement", got, builds)
	}
	if got := get("SELECT 1"); got != "(SELECT 1)" || builds != 3 {
		t.Errorf("fewer parts: %q after %d builds, want a new statement", got, builds)
	}
}
