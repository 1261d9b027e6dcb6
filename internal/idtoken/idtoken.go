// Package idtoken is Terrace as an OpenID Connect issuer of workload
// identity tokens: JWTs, signed RS256 with a key the store keeps sealed,
// that say which run (or stack deployment) is at work, in which phase, for
// an outside system that trusts Terrace's issuer URL (AWS, GCP, Azure,
// Vault, anything that federates OIDC). Such a system fetches the
// discovery document and the public keys from the two well-known routes
// Register adds, and checks the token's signature, audience and lifetime.
//
// The private key never leaves the server: runners and agents get the
// signed tokens in their job's inputs, never the key.
package idtoken

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// KeyColumn is the column sealed at rest (docs/design/storage.md): the
// signing keys' PKCS#1 DER, base64.
var KeyColumn = seal.Column{Table: "workload_identity_keys", IDColumn: "id", Column: "private_key", Purpose: "workload_identity_keys.private_key"}

// Paths of the discovery document and of the key set, as HCP Terraform
// serves them.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks"
)

// keyBits is the signing key's size: what every relying party accepts.
const keyBits = 2048

// Issuer signs workload identity tokens.
type Issuer struct {
	db   *store.DB
	keys *seal.Keyring
	url  string

	// Refresh is how long this replica signs with the key it read before
	// it looks for a newer one (a rotation by `terrace keys
	// rotate-identity` or the admin API). Defaults to 0: every token
	// checks, with one short statement, that its key is still the newest,
	// so that a rotation, and a trim after it, reach every replica at
	// once (tokens are minted only for runs that ask for them).
	Refresh time.Duration

	mu      sync.Mutex
	key     *signingKey // the key this replica signs with, once read or made
	checked time.Time   // when key was last found to be the newest
	public  sync.Map    // key ID → jwk: a key is unsealed and parsed once per replica
}

type signingKey struct {
	id   string
	priv *rsa.PrivateKey
}

// New returns the issuer whose tokens name url (https://host[:port], no
// trailing slash) as their iss; keys seals the private key (nil: stored
// plain, as everywhere without encryption at rest).
func New(db *store.DB, keys *seal.Keyring, url string) *Issuer {
	return &Issuer{db: db, keys: keys, url: url}
}

// Token is what a token says: the subject, the audiences it is for, how
// long it lives, and the claims beside the standard ones.
type Token struct {
	Subject  string
	Audience []string
	TTL      time.Duration
	Claims   map[string]any
}

// Mint signs a token. It is valid from five seconds before now (clocks
// differ) until TTL after now.
func (i *Issuer) Mint(ctx context.Context, t Token) (string, error) {
	if len(t.Audience) == 0 {
		return "", errors.New("a workload identity token needs an audience")
	}
	if t.TTL <= 0 {
		return "", errors.New("a workload identity token needs a lifetime")
	}
	k, err := i.signingKey(ctx)
	if err != nil {
		return "", err
	}
	now := core.Now()
	claims := make(map[string]any, len(t.Claims)+7)
	for name, v := range t.Claims {
		claims[name] = v
	}
	claims["jti"] = newJTI()
	claims["iss"] = i.url
	claims["sub"] = t.Subject
	if len(t.Audience) == 1 {
		claims["aud"] = t.Audience[0]
	} else {
		claims["aud"] = t.Audience
	}
	claims["iat"] = now.Unix()
	claims["nbf"] = now.Add(-5 * time.Second).Unix()
	claims["exp"] = now.Add(t.TTL).Unix()
	header, err := json.Marshal(map[string]string{"typ": "JWT", "alg": "RS256", "kid": k.id})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encoding the token's claims: %w", err)
	}
	signing := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.priv, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newJTI() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// signingKey returns the key to sign with: the newest in the store, made
// on first use. Two replicas making the first key at once both store
// theirs; each signs with the newest it reads, and the key set publishes
// both, so every token either signed verifies.
func (i *Issuer) signingKey(ctx context.Context) (*signingKey, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.key != nil && core.Now().Sub(i.checked) < i.Refresh {
		return i.key, nil
	}
	if i.key != nil {
		// Still the newest? One short statement; the key is read again
		// only when a rotation made another.
		var id string
		if err := i.db.QueryRow(ctx, newestKeySQL("id")).Scan(&id); err != nil {
			return nil, fmt.Errorf("reading the workload identity signing key: %w", err)
		}
		if id == i.key.id {
			i.checked = core.Now()
			return i.key, nil
		}
	}
	k, err := newest(ctx, i.db, i.keys)
	if err != nil {
		return nil, err
	}
	if k == nil {
		if _, err := addKey(ctx, i.db, i.keys); err != nil {
			return nil, err
		}
		if k, err = newest(ctx, i.db, i.keys); err != nil {
			return nil, err
		}
		if k == nil {
			return nil, errors.New("the workload identity signing key just stored is not there")
		}
	}
	i.key, i.checked = k, core.Now()
	return k, nil
}

func newestKeySQL(cols string) string {
	return `SELECT ` + cols + ` FROM workload_identity_keys ORDER BY created_at DESC, id LIMIT 1`
}

// addKey makes a signing key and stores it (sealed) as the newest.
func addKey(ctx context.Context, db *store.DB, keys *seal.Keyring) (string, error) {
	priv, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return "", err
	}
	id := thumbprint(&priv.PublicKey)
	sealed, err := keys.SealString(KeyColumn.Purpose, base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(priv)))
	if err != nil {
		return "", err
	}
	if _, err := db.Exec(ctx, `INSERT INTO workload_identity_keys (id, private_key, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		id, sealed, core.Micros(core.Now())); err != nil {
		return "", fmt.Errorf("storing the workload identity signing key: %w", err)
	}
	return id, nil
}

func newest(ctx context.Context, db *store.DB, keys *seal.Keyring) (*signingKey, error) {
	var id, sealed string
	err := db.QueryRow(ctx, newestKeySQL("id, private_key")).Scan(&id, &sealed)
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the workload identity signing key: %w", err)
	}
	priv, err := openKey(keys, sealed)
	if err != nil {
		return nil, fmt.Errorf("opening workload identity signing key %s: %w", id, err)
	}
	return &signingKey{id: id, priv: priv}, nil
}

// Rotate makes a new signing key, which every replica signs with within
// its Refresh, and drops the keys that were replaced more than retire
// ago: the key set keeps publishing a replaced key while tokens it signed
// may still be in use (retire should be at least the longest token
// lifetime: the plan and apply time limits together). It returns the new
// key's ID and how many keys were dropped.
func Rotate(ctx context.Context, db *store.DB, keys *seal.Keyring, retire time.Duration) (string, int, error) {
	id, err := addKey(ctx, db, keys)
	if err != nil {
		return "", 0, err
	}
	// A key is dropped when a key after it is older than retire.
	res, err := db.Exec(ctx, `DELETE FROM workload_identity_keys WHERE id <> ? AND EXISTS (
		SELECT 1 FROM workload_identity_keys later WHERE later.created_at > workload_identity_keys.created_at AND later.created_at < ?)`,
		id, core.Micros(core.Now().Add(-retire)))
	if err != nil {
		return id, 0, err
	}
	n, _ := res.RowsAffected()
	return id, int(n), nil
}

// Trim drops every signing key but the newest: tokens the others signed
// no longer verify. It returns how many it dropped.
func Trim(ctx context.Context, db *store.DB) (int, error) {
	var id string
	err := db.QueryRow(ctx, newestKeySQL("id")).Scan(&id)
	if store.IsNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	res, err := db.Exec(ctx, `DELETE FROM workload_identity_keys WHERE id <> ?`, id)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// RegisterAdmin adds Terraform Enterprise's admin OIDC settings actions
// (site admins only): rotate-key makes a new signing key, which every
// replica signs with from then on, while the key set keeps publishing the
// others; trim-key drops every key but the newest (tokens they signed stop
// verifying: trim once they have expired, the plan and apply time limits
// after a rotation).
func (i *Issuer) RegisterAdmin(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v2/admin/oidc-settings/actions/rotate-key", func(w http.ResponseWriter, r *http.Request) {
		if err := authz.RequireSiteAdmin(r.Context()); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		_, err := addKey(r.Context(), i.db, i.keys)
		tfeapi.NoContent(w, r, err)
	})
	mux.HandleFunc("POST /api/v2/admin/oidc-settings/actions/trim-key", func(w http.ResponseWriter, r *http.Request) {
		if err := authz.RequireSiteAdmin(r.Context()); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		_, err := Trim(r.Context(), i.db)
		tfeapi.NoContent(w, r, err)
	})
}

func openKey(keys *seal.Keyring, sealed string) (*rsa.PrivateKey, error) {
	plain, err := keys.OpenString(KeyColumn.Purpose, sealed)
	if err != nil {
		return nil, err
	}
	der, err := base64.StdEncoding.DecodeString(plain)
	if err != nil {
		return nil, err
	}
	return x509.ParsePKCS1PrivateKey(der)
}

// jwk is a public key as RFC 7517 writes it.
type jwk struct {
	Kty string `json:"kty"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
}

func publicJWK(id string, pub *rsa.PublicKey) jwk {
	return jwk{Kty: "RSA", Alg: "RS256", Use: "sig", Kid: id, N: b64(pub.N.Bytes()), E: b64(big.NewInt(int64(pub.E)).Bytes())}
}

// thumbprint is the key's RFC 7638 thumbprint, its kid.
func thumbprint(pub *rsa.PublicKey) string {
	k := publicJWK("", pub)
	// The members the RFC names, in lexicographic order, no spaces.
	canon := `{"e":"` + k.E + `","kty":"RSA","n":"` + k.N + `"}`
	sum := sha256.Sum256([]byte(canon))
	return b64(sum[:])
}

// KeySet returns the public keys of every signing key in the store, made
// first when there is none: a relying party set up before the first run
// finds the key its tokens will be signed with.
func (i *Issuer) KeySet(ctx context.Context) ([]jwk, error) {
	if _, err := i.signingKey(ctx); err != nil {
		return nil, err
	}
	rows, err := i.db.Query(ctx, `SELECT id, private_key FROM workload_identity_keys ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []jwk{}
	for rows.Next() {
		var id, sealed string
		if err := rows.Scan(&id, &sealed); err != nil {
			return nil, err
		}
		if k, ok := i.public.Load(id); ok {
			out = append(out, k.(jwk))
			continue
		}
		priv, err := openKey(i.keys, sealed)
		if err != nil {
			return nil, fmt.Errorf("opening workload identity signing key %s: %w", id, err)
		}
		k := publicJWK(id, &priv.PublicKey)
		i.public.Store(id, k)
		out = append(out, k)
	}
	return out, rows.Err()
}

// Register adds the discovery document and the key set, both public (a
// relying party fetches them without credentials).
func (i *Issuer) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+DiscoveryPath, i.discovery)
	mux.HandleFunc("GET "+JWKSPath, i.jwks)
}

func (i *Issuer) discovery(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", map[string]any{
		"issuer":                                i.url,
		"jwks_uri":                              i.url + JWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported":                      []string{"openid"},
		"claims_supported":                      claimsSupported(),
	})
}

// claimsSupported names the standard claims and those a run's or a
// deployment's tokens carry (their claims' keys), once each.
func claimsSupported() []string {
	out := []string{"sub", "aud", "exp", "iat", "iss", "jti", "nbf"}
	for _, claims := range []map[string]any{Run{}.claims(), Deployment{}.claims()} {
		for name := range claims {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out[7:])
	return out
}

func (i *Issuer) jwks(w http.ResponseWriter, r *http.Request) {
	keys, err := i.KeySet(r.Context())
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	// Short: a key another replica made must show soon.
	w.Header().Set("Cache-Control", "public, max-age=60")
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", map[string]any{"keys": keys})
}
