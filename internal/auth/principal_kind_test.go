package auth

import "testing"

func TestKindToken(t *testing.T) {
	for k, want := range map[Kind]string{
		KindUser: "a user token", KindTeam: "a team token", KindRun: "a run token",
		KindAgent: "an agent token", KindOrganization: "an organization token", KindAuditTrails: "an audit-trails token",
	} {
		if got := k.Token(); got != want {
			t.Errorf("%q.Token() = %q, want %q", k, got, want)
		}
	}
}
