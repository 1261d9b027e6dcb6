package idtoken_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/terracehq/terrace/internal/idtoken"
	"github.com/terracehq/terrace/internal/idtoken/idtokentest"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestTokensVerifyWithThePublishedKeys(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		iss, keys, srv := serve(t, db, true)
		verify := func(tok, audience string) map[string]any {
			return idtokentest.Verify(t, srv.Client(), srv.URL, tok, audience)
		}

		run := idtoken.Run{OrganizationID: "org-1", OrganizationName: "acme", ProjectID: "prj-1", ProjectName: "Default Project",
			WorkspaceID: "ws-1", WorkspaceName: "network", RunID: "run-1", Phase: "plan"}
		minted, err := iss.RunTokens(ctx, run, idtoken.Audiences(map[string]string{
			"TFC_WORKLOAD_IDENTITY_AUDIENCE":       "aws.workload.identity",
			"TFC_WORKLOAD_IDENTITY_AUDIENCE_VAULT": "vault.example.test",
			"TFC_WORKLOAD_IDENTITY_AUDIENCE_EMPTY": "",
			"TFC_WORKLOAD_IDENTITY_AUDIENCE_":      "nameless",
			"AWS_REGION":                           "eu-west-1",
		}), 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(minted) != 2 || minted[0].Name != "TFC_WORKLOAD_IDENTITY_TOKEN" || minted[1].Name != "TFC_WORKLOAD_IDENTITY_TOKEN_VAULT" {
			t.Fatalf("minted %+v, want TFC_WORKLOAD_IDENTITY_TOKEN and TFC_WORKLOAD_IDENTITY_TOKEN_VAULT", minted)
		}
		claims := verify(minted[0].Token, "aws.workload.identity")
		runClaims := claims
		want := map[string]any{
			"sub":                         "organization:acme:project:Default Project:workspace:network:run_phase:plan",
			"aud":                         "aws.workload.identity",
			"terraform_organization_id":   "org-1",
			"terraform_organization_name": "acme",
			"terraform_project_id":        "prj-1",
			"terraform_project_name":      "Default Project",
			"terraform_workspace_id":      "ws-1",
			"terraform_workspace_name":    "network",
			"terraform_full_workspace":    "organization:acme:project:Default Project:workspace:network",
			"terraform_run_id":            "run-1",
			"terraform_run_phase":         "plan",
		}
		idtokentest.Claims(t, "the plan's token", claims, want)
		exp, iat, nbf := claims["exp"].(float64), claims["iat"].(float64), claims["nbf"].(float64)
		if exp-iat != 600 || iat-nbf != 5 {
			t.Errorf("iat %v, nbf %v, exp %v: want a 10-minute lifetime from 5 s before issue", iat, nbf, exp)
		}
		if claims["jti"] == "" || claims["jti"] == verify(minted[1].Token, "vault.example.test")["jti"] {
			t.Errorf("each token needs its own jti")
		}
		// A token is for its audience only.
		var std jwt.Claims
		parsed, _ := jwt.ParseSigned(minted[1].Token, []jose.SignatureAlgorithm{jose.RS256})
		if err := parsed.UnsafeClaimsWithoutVerification(&std); err != nil {
			t.Fatal(err)
		}
		if err := std.Validate(jwt.Expected{AnyAudience: jwt.Audience{"aws.workload.identity"}}); err == nil {
			t.Error("the Vault token validates for the AWS audience")
		}
		// A tampered token does not verify.
		parts := strings.Split(minted[0].Token, ".")
		forged, _ := json.Marshal(map[string]any{"sub": "organization:acme:project:Default Project:workspace:prod:run_phase:apply", "iss": srv.URL, "aud": "aws.workload.identity"})
		tampered, err := jwt.ParseSigned(parts[0]+"."+base64.RawURLEncoding.EncodeToString(forged)+"."+parts[2], []jose.SignatureAlgorithm{jose.RS256})
		if err != nil {
			t.Fatal(err)
		}
		set := idtokentest.KeySet(t, srv.Client(), srv.URL)
		if err := tampered.Claims(set.Keys[0].Key, &std); err == nil {
			t.Error("a token with a changed payload verifies")
		}

		// The private key is sealed at rest; a second replica on the
		// same store signs with the same key, and the set publishes one.
		var stored string
		if err := db.QueryRow(ctx, `SELECT private_key FROM workload_identity_keys`).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !keys.IsSealed(idtoken.KeyColumn.Purpose, stored) {
			t.Errorf("the signing key is stored unsealed: %.20s…", stored)
		}
		other := idtoken.New(db, keys, srv.URL)
		tok, err := other.DeploymentToken(ctx, idtoken.Deployment{OrganizationID: "org-1", OrganizationName: "acme", ProjectID: "prj-1",
			ProjectName: "Default Project", StackID: "st-1", StackName: "net", Deployment: "prod", Operation: "apply", PlanID: "sdr-1"},
			[]string{"a.example.test", "b.example.test"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		claims = verify(tok, "b.example.test")
		if claims["sub"] != "organization:acme:project:Default Project:stack:net:deployment:prod:operation:apply" ||
			claims["terraform_stack_deployment_name"] != "prod" || claims["terraform_operation"] != "apply" || claims["terraform_plan_id"] != "sdr-1" {
			t.Errorf("deployment token claims: %v", claims)
		}
		// The discovery document names every claim the two kinds of
		// token carry.
		var disc struct {
			Claims []string `json:"claims_supported"`
		}
		idtokentest.GetJSON(t, srv.Client(), srv.URL+idtoken.DiscoveryPath, &disc)
		for name := range runClaims {
			if !slices.Contains(disc.Claims, name) {
				t.Errorf("claims_supported %v lacks the run token's %s", disc.Claims, name)
			}
		}
		for name := range claims {
			if !slices.Contains(disc.Claims, name) {
				t.Errorf("claims_supported %v lacks the deployment token's %s", disc.Claims, name)
			}
		}
		if exp, iat := claims["exp"].(float64), claims["iat"].(float64); exp-iat != idtoken.DefaultTTL.Seconds() {
			t.Errorf("a token without a lifetime lives %v s, want the default %v", exp-iat, idtoken.DefaultTTL)
		}
		if set = idtokentest.KeySet(t, srv.Client(), srv.URL); len(set.Keys) != 1 {
			t.Errorf("the key set has %d keys after two replicas signed, want 1", len(set.Keys))
		}
	})
}

// A relying party set up before the first run finds a key.
func TestKeySetBeforeAnyToken(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		_, _, srv := serve(t, db, false)
		var set jose.JSONWebKeySet
		res := idtokentest.GetJSON(t, srv.Client(), srv.URL+idtoken.JWKSPath, &set)
		if len(set.Keys) != 1 || !set.Keys[0].Valid() || !set.Keys[0].IsPublic() || set.Keys[0].Algorithm != "RS256" || set.Keys[0].Use != "sig" {
			t.Fatalf("key set: %+v", set)
		}
		if !strings.Contains(res.Header.Get("Cache-Control"), "max-age") {
			t.Errorf("the key set's Cache-Control is %q", res.Header.Get("Cache-Control"))
		}
	})
}

// A rotation makes a new key: every replica signs with it once its
// Refresh has passed, the key set publishes both while tokens of the old
// one may be in use, and a later rotation past the retirement drops it.
func TestRotation(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		iss, keys, srv := serve(t, db, true)
		iss.Refresh = 0 // look for a newer key at every token
		kidOf := func(tok string) string {
			t.Helper()
			parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
			if err != nil {
				t.Fatal(err)
			}
			return parsed.Headers[0].KeyID
		}
		mint := func() string {
			t.Helper()
			tok, err := iss.DeploymentToken(ctx, idtoken.Deployment{OrganizationName: "acme", Deployment: "prod", Operation: "plan"}, []string{"aud"}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		before := mint()
		// A replica that read its key a moment ago keeps it until its
		// Refresh has passed.
		lazy := idtoken.New(db, keys, srv.URL)
		lazy.Refresh = time.Hour
		mintLazy := func() string {
			t.Helper()
			tok, err := lazy.DeploymentToken(ctx, idtoken.Deployment{}, []string{"aud"}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		lazyKey := kidOf(mintLazy())
		id, dropped, err := idtoken.Rotate(ctx, db, keys, time.Hour)
		if err != nil || dropped != 0 {
			t.Fatalf("rotate: %s, %d dropped, %v", id, dropped, err)
		}
		after := mint()
		if kidOf(after) != id || kidOf(before) == id {
			t.Fatalf("signed with %s before and %s after rotating to %s", kidOf(before), kidOf(after), id)
		}
		// Both verify: the old key is still published.
		idtokentest.Verify(t, srv.Client(), srv.URL, before, "aud")
		idtokentest.Verify(t, srv.Client(), srv.URL, after, "aud")
		if got := kidOf(mintLazy()); got != lazyKey || got == id {
			t.Errorf("a replica within its Refresh signed with %s, want the key it had, %s", got, lazyKey)
		}
		// Retired: a rotation with no retirement drops every replaced key.
		third, dropped, err := idtoken.Rotate(ctx, db, keys, 0)
		if err != nil || dropped != 2 {
			t.Fatalf("second rotation: %s, %d dropped (want the first two), %v", third, dropped, err)
		}
		if set := idtokentest.KeySet(t, srv.Client(), srv.URL); len(set.Keys) != 1 || set.Keys[0].KeyID != third {
			t.Fatalf("the key set after retiring: %+v", set.Keys)
		}
		if kidOf(mint()) != third {
			t.Error("the issuer does not sign with the newest key")
		}
	})
}

// serve starts an issuer on a test HTTPS server; sealed seals its key
// with a keyring of its own (else the key is stored plain).
func serve(t *testing.T, db *store.DB, sealed bool) (*idtoken.Issuer, *seal.Keyring, *httptest.Server) {
	t.Helper()
	var keys *seal.Keyring
	if sealed {
		var err error
		if keys, err = seal.Open(context.Background(), db, seal.Source{DataDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	iss := idtoken.New(db, keys, srv.URL)
	iss.Register(mux)
	return iss, keys, srv
}
