// Package idtokentest verifies workload identity tokens as a relying party
// (AWS, Vault, any OIDC federation) does, with go-jose rather than
// Terrace's own code: it reads the issuer's discovery document, fetches
// the key set it names, and checks a token's signature, issuer, audience
// and lifetime.
package idtokentest

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Discovery is what a relying party reads of the discovery document.
type Discovery struct {
	Issuer  string   `json:"issuer"`
	JWKSURI string   `json:"jwks_uri"`
	Algs    []string `json:"id_token_signing_alg_values_supported"`
}

// GetJSON decodes the JSON answer of a GET, failing the test on any other
// status; it returns the response (its body read and closed).
func GetJSON(t testing.TB, c *http.Client, url string, v any) *http.Response {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res
}

// KeySet reads the issuer's discovery document, checks that it names the
// issuer and RS256, and returns the key set it points at.
func KeySet(t testing.TB, c *http.Client, issuer string) jose.JSONWebKeySet {
	t.Helper()
	var disc Discovery
	GetJSON(t, c, issuer+"/.well-known/openid-configuration", &disc)
	if disc.Issuer != issuer || disc.JWKSURI != issuer+"/.well-known/jwks" || len(disc.Algs) != 1 || disc.Algs[0] != "RS256" {
		t.Fatalf("the discovery document of %s: %+v", issuer, disc)
	}
	var set jose.JSONWebKeySet
	GetJSON(t, c, disc.JWKSURI, &set)
	return set
}

// Verify checks tok against issuer's published keys, for audience, now,
// and returns all its claims. The token's kid must be its key's RFC 7638
// thumbprint.
func Verify(t testing.TB, c *http.Client, issuer, tok, audience string) map[string]any {
	t.Helper()
	set := KeySet(t, c, issuer)
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("parsing a token: %v", err)
	}
	kid := parsed.Headers[0].KeyID
	keys := set.Key(kid)
	if len(keys) != 1 {
		t.Fatalf("the key set has %d keys of the token's kid %q, want 1", len(keys), kid)
	}
	thumb, err := keys[0].Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(thumb); got != kid {
		t.Errorf("kid %q is not the key's thumbprint %q", kid, got)
	}
	var std jwt.Claims
	all := map[string]any{}
	if err := parsed.Claims(keys[0].Key, &std, &all); err != nil {
		t.Fatalf("verifying a token: %v", err)
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{audience}, Time: time.Now()}, 0); err != nil {
		t.Fatalf("validating a token's claims: %v", err)
	}
	return all
}

// Claims checks that claims has each of want.
func Claims(t testing.TB, what string, claims, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("%s: claim %s = %v, want %v", what, k, claims[k], v)
		}
	}
}
