package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
)

// NewOrg creates an organization named name through c.
func NewOrg(t testing.TB, c *tfe.Client, name string) *tfe.Organization {
	t.Helper()
	org, err := c.Organizations.Create(context.Background(), tfe.OrganizationCreateOptions{Name: tfe.String(name), Email: tfe.String("ops@" + name + ".test")})
	if err != nil {
		t.Fatalf("creating organization %s: %v", name, err)
	}
	return org
}

// UserClient invites email into org (as the site admin), accepts the
// invitation for them, and returns a client authenticated as the user,
// with the membership as the invitation returned it.
func (e *Env) UserClient(t testing.TB, org, email string, teams ...*tfe.Team) (*tfe.Client, *tfe.OrganizationMembership) {
	t.Helper()
	ctx := context.Background()
	m, err := e.Client.OrganizationMemberships.Create(ctx, org, tfe.OrganizationMembershipCreateOptions{Email: tfe.String(email), Teams: teams})
	if err != nil {
		t.Fatalf("inviting %s: %v", email, err)
	}
	e.Accept(t, m.ID)
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	return e.NewClient(t, secret), m
}

// Accept accepts the invitation of an organization membership, as its
// person does by following the invitation link: until then an invited
// person has no access to the organization.
func (e *Env) Accept(t testing.TB, membershipID string) {
	t.Helper()
	if err := e.Server.Teams.ActivateMembership(context.Background(), e.Server.DB, membershipID); err != nil {
		t.Fatalf("accepting the invitation of %s: %v", membershipID, err)
	}
}

// WantErr fails the test unless errors.Is(err, want).
func WantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// WantStatus checks that err is an error whose text holds text (go-tfe
// names only 401 and 404; other statuses show as their status line).
func WantStatus(t testing.TB, what string, err error, text string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), text) {
		t.Fatalf("%s: got error %v, want one containing %q", what, err, text)
	}
}

// AsSiteAdmin is ctx with a site admin as the caller: for a test that
// reads what the API never returns (a sensitive variable's value) through
// a service, as the server sees it.
func AsSiteAdmin(ctx context.Context) context.Context {
	return auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
}
