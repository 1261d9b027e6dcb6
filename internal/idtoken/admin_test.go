package idtoken_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/terracehq/terrace/internal/idtoken"
	"github.com/terracehq/terrace/internal/idtoken/idtokentest"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestAdminRotateAndTrim: a site admin's rotate-key adds a signing key,
// which the next token is signed with while the key set still publishes
// the old one (its tokens verify); trim-key leaves the newest key alone in
// the key set; anyone else is refused and changes nothing. Both stores,
// go-tfe's own calls.
func TestAdminRotateAndTrim(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		httpc, issuer := e.HTTP, e.URL
		kids := func() []string {
			t.Helper()
			var out []string
			for _, k := range idtokentest.KeySet(t, httpc, issuer).Keys {
				out = append(out, k.KeyID)
			}
			return out
		}
		mint := func() (string, string) {
			t.Helper()
			tok, err := e.Server.Identity.DeploymentToken(ctx, idtoken.Deployment{OrganizationName: "acme"}, []string{"aud"}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
			if err != nil {
				t.Fatal(err)
			}
			return tok, parsed.Headers[0].KeyID
		}
		oldTok, oldKid := mint()
		before := kids()

		testenv.NewOrg(t, e.Client, "acme")
		member, _ := e.UserClient(t, "acme", "owner@acme.test")
		if err := member.Admin.Settings.OIDC.RotateKey(ctx); err == nil {
			t.Fatal("a user who is no site admin rotated the signing key")
		}
		if err := member.Admin.Settings.OIDC.TrimKey(ctx); err == nil {
			t.Fatal("a user who is no site admin trimmed the signing keys")
		}
		if got := kids(); !slices.Equal(got, before) {
			t.Fatalf("the refused calls changed the key set: %v, was %v", got, before)
		}

		if err := e.Client.Admin.Settings.OIDC.RotateKey(ctx); err != nil {
			t.Fatal(err)
		}
		after := kids()
		newTok, newKid := mint()
		if len(after) != len(before)+1 || newKid == oldKid || !slices.Contains(after, newKid) || !slices.Contains(after, oldKid) {
			t.Fatalf("after rotate-key: key set %v (was %v), signed with %s (was %s)", after, before, newKid, oldKid)
		}
		idtokentest.Verify(t, httpc, issuer, oldTok, "aud")
		idtokentest.Verify(t, httpc, issuer, newTok, "aud")

		if err := e.Client.Admin.Settings.OIDC.TrimKey(ctx); err != nil {
			t.Fatal(err)
		}
		if got := kids(); !slices.Equal(got, []string{newKid}) {
			t.Fatalf("after trim-key: key set %v, want only %s", got, newKid)
		}
		idtokentest.Verify(t, httpc, issuer, newTok, "aud")
		if _, kid := mint(); kid != newKid {
			t.Errorf("after trim-key the issuer signs with %s, want %s", kid, newKid)
		}
		if strings.Contains(strings.Join(kids(), ","), oldKid) {
			t.Error("the trimmed key is still published")
		}
	})
}
