package signin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/mailsink"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestInvitingASuspendedUser: a suspended user invited to an organization
// is a member invited as any other, but gets no email, and an invitation
// link of theirs neither shows nor accepts (no password set, no
// membership activated) until a site admin lifts the suspension; then the
// same link works.
func TestInvitingASuspendedUser(t *testing.T) {
	t.Parallel()
	sink, err := mailsink.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	e := testenv.New(t, testenv.Options{SMTPAddr: sink.Addr})
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	testenv.NewOrg(t, e.Client, "beta")
	first, err := e.Client.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("carol@example.test")})
	if err != nil {
		t.Fatal(err)
	}
	msgs := sink.All()
	if len(msgs) != 1 {
		t.Fatalf("emails after the first invitation: %d, want 1", len(msgs))
	}
	link := linkRE.FindString(string(msgs[0].Data))
	u, err := url.Parse(link)
	if link == "" || err != nil {
		t.Fatalf("the invitation email has no link (%v):\n%s", err, msgs[0].Data)
	}
	if _, err := e.Client.Admin.Users.Suspend(ctx, first.User.ID); err != nil {
		t.Fatal(err)
	}

	second, err := e.Client.OrganizationMemberships.Create(ctx, "beta", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("carol@example.test")})
	if err != nil {
		t.Fatalf("inviting a suspended user: %v", err)
	}
	if second.Status != tfe.OrganizationMembershipInvited || second.User.ID != first.User.ID {
		t.Fatalf("the suspended user's membership: %s of %s, want invited of %s", second.Status, second.User.ID, first.User.ID)
	}
	if msgs := sink.All(); len(msgs) != 1 {
		t.Fatalf("a suspended user was emailed an invitation: %d emails, want 1", len(msgs))
	}

	f := newFormClient(t, e)
	if st, body := f.get(u.Path); st != http.StatusForbidden || !strings.Contains(body, "suspended") {
		t.Fatalf("a suspended user's invitation page: %d %.300s, want 403 saying suspended", st, body)
	}
	if st, _ := f.get("/app/signin"); st != http.StatusOK || f.token == "" {
		t.Fatalf("the sign-in page: %d, token %q", st, f.token)
	}
	accept := url.Values{"password": {goodPassword}, "confirm": {goodPassword}}
	if st, body := f.post(u.Path, cloneValues(accept), true); st != http.StatusForbidden || !strings.Contains(body, "suspended") {
		t.Fatalf("a suspended user's acceptance: %d %.300s, want 403 saying suspended", st, body)
	}
	if m, err := e.Client.OrganizationMemberships.Read(ctx, first.ID); err != nil || m.Status != tfe.OrganizationMembershipInvited {
		t.Fatalf("the membership after a suspended user's acceptance: %+v %v, want invited", m, err)
	}
	if _, err := e.Server.Signin.CheckPassword(ctx, "carol@example.test", goodPassword, "192.0.2.1"); err == nil {
		t.Fatal("a suspended user's acceptance set a password")
	}

	if _, err := e.Client.Admin.Users.Unsuspend(ctx, first.User.ID); err != nil {
		t.Fatal(err)
	}
	if st, body := f.get(u.Path); st != http.StatusOK || f.token == "" {
		t.Fatalf("the invitation page once unsuspended: %d %.300s", st, body)
	}
	if st, body := f.post(u.Path, cloneValues(accept), true); st != http.StatusSeeOther {
		t.Fatalf("accepting once unsuspended: %d %.300s, want a redirect", st, body)
	}
	if m, err := e.Client.OrganizationMemberships.Read(ctx, first.ID); err != nil || m.Status != tfe.OrganizationMembershipActive {
		t.Fatalf("the membership accepted once unsuspended: %+v %v, want active", m, err)
	}
}
