package testenv

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/auth"
)

// AuditTrail returns every audit event of the server, site events
// included, oldest first (read as a site admin, as GET
// /api/v2/admin/audit-trail does).
func (e *Env) AuditTrail(t testing.TB) []*audit.Event {
	t.Helper()
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
	events, _, err := e.Server.Audit.ListAll(ctx, audit.Filter{Page: 1, Size: 1000})
	if err != nil {
		t.Fatalf("reading the audit trail: %v", err)
	}
	return events
}
