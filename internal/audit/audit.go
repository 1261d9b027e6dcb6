package audit

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/terracehq/terrace/internal/auth"
)

// Event is one record of the audit trail. It never holds a request or
// response body.
type Event struct {
	ID        string
	Timestamp time.Time
	// Organization is the organization the event belongs to (its ID and
	// its name at the time); both are "" for site events.
	OrganizationID   string
	OrganizationName string
	Actor            Actor
	Resource         Resource
	Request          Request
}

// Actor is who did it.
type Actor struct {
	// Kind is the kind of token presented: user, team, organization,
	// audit-trails, run or agent.
	Kind auth.Kind
	// ID is the user, team or run, or for organization and agent tokens
	// the token itself.
	ID string
	// Name is the username, or a description of the token.
	Name string
	// TokenID is the token presented.
	TokenID string
}

// Resource is what was done, to what.
type Resource struct {
	// Type is the resource type in the singular, as the API spells it
	// ("workspace", "run", "authentication-token").
	Type string
	// ID is the resource's ID, or its name where the route names it by
	// name; "" when a create's response named none.
	ID string
	// Action is create, update, delete, read, or the name of an action
	// route (lock, unlock, apply, …).
	Action string
	// Meta holds the route and details such as the parent resource of a
	// create or the relationship changed; never a value from a body.
	Meta map[string]string
}

// Request is where it came from.
type Request struct {
	ID        string
	ClientIP  string
	UserAgent string
}

// actorOf describes a principal.
func actorOf(p *auth.Principal) Actor {
	a := Actor{Kind: p.Kind, TokenID: p.TokenID}
	switch p.Kind {
	case auth.KindUser:
		a.ID, a.Name = p.UserID, p.Username
	case auth.KindTeam:
		a.ID, a.Name = p.TeamID, "team token of "+p.TeamID
	case auth.KindRun:
		a.ID, a.Name = p.RunID, "run token of "+p.RunID+" in "+p.WorkspaceID
	case auth.KindTestRun:
		a.ID, a.Name = p.TestRunID, "test run token of "+p.TestRunID+" in "+p.Organization
	default:
		a.ID, a.Name = p.TokenID, string(p.Kind)+" token of "+p.Organization
	}
	return a
}

// newUUID returns a random (version 4) UUID, the form HCP Terraform gives
// audit event and request IDs.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
