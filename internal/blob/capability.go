package blob

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CapabilityPrefix starts every capability URL path.
const CapabilityPrefix = "/_cap/"

// Signer makes and checks capability URLs: /_cap/<expiry>/<signature><path>
// where the signature is an HMAC-SHA256 over method, path and expiry with
// the server secret. The signature sits in the path, not the query, so
// clients that rewrite the query (log readers add offset and limit) keep it.
type Signer struct {
	secret []byte
	base   string // https://host:port
}

// NewSigner returns a signer for URLs under base (scheme and host).
func NewSigner(secret []byte, base string) *Signer {
	return &Signer{secret: secret, base: strings.TrimSuffix(base, "/")}
}

// URL returns an absolute capability URL granting method on path for ttl.
func (s *Signer) URL(method, path string, ttl time.Duration) string {
	exp := strconv.FormatInt(time.Now().Add(ttl).Unix(), 10)
	return s.base + CapabilityPrefix + exp + "/" + s.sign(method, path, exp) + path
}

func (s *Signer) sign(method, path, exp string) string {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(method + "\n" + path + "\n" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// Handler verifies capability URLs and passes valid requests to next with
// the URL path rewritten to the inner path. Anything else is a 404, so a
// forged, altered or expired URL reveals nothing.
func (s *Signer) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, CapabilityPrefix)
		exp, rest, ok1 := strings.Cut(rest, "/")
		sig, inner, ok2 := strings.Cut(rest, "/")
		inner = "/" + inner
		if !ok1 || !ok2 {
			http.NotFound(w, r)
			return
		}
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > n || !hmac.Equal([]byte(sig), []byte(s.sign(r.Method, inner, exp))) {
			w.Header().Set("Content-Type", "application/vnd.api+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[{"status":"404","title":"not found","detail":"this link is invalid or has expired"}]}`))
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = inner
		r2.URL.RawPath = ""
		next.ServeHTTP(w, r2)
	})
}
