package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// CSRF protects the unsafe requests of /app pages twice over: Go's
// http.CrossOriginProtection refuses cross-origin requests (by
// Sec-Fetch-Site, or Origin against Host), and every form carries a token
// that must match a cookie: the token is the HMAC of the cookie's random
// value under the server's key, so another site can neither read nor forge
// it (a double-submit cookie bound to the server).
type CSRF struct {
	key []byte
	cop *http.CrossOriginProtection
}

const (
	csrfCookie = "terrace_csrf"
	// CSRFField is the form field (or X-CSRF-Token header) holding the
	// token.
	CSRFField = "csrf_token"
)

// NewCSRF returns the protection keyed by key (the server's secret).
func NewCSRF(key []byte) *CSRF {
	return &CSRF{key: key, cop: http.NewCrossOriginProtection()}
}

type csrfKey struct{}

// CSRFToken is the token forms of this request must carry ("" outside the
// middleware).
func CSRFToken(ctx context.Context) string {
	v, _ := ctx.Value(csrfKey{}).(string)
	return v
}

func (c *CSRF) token(cookie string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("terrace-csrf:" + cookie))
	return hex.EncodeToString(m.Sum(nil))
}

// Middleware gives every request a token (setting the cookie when it is
// missing) and refuses unsafe requests that are cross-origin or whose
// form token does not match the cookie, with 403.
func (c *CSRF) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		value := ""
		if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 64 {
			value = ck.Value
		}
		if value == "" {
			buf := make([]byte, 32)
			_, _ = rand.Read(buf)
			value = hex.EncodeToString(buf)
			http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: value, Path: "/app/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
			// A request without the cookie cannot carry a matching token.
			if !safeMethod(r.Method) {
				http.Error(w, "refused: the form is missing its CSRF cookie; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		want := c.token(value)
		if !safeMethod(r.Method) {
			if err := c.cop.Check(r); err != nil {
				http.Error(w, "refused: cross-origin request", http.StatusForbidden)
				return
			}
			got := r.Header.Get("X-CSRF-Token")
			if got == "" {
				got = r.PostFormValue(CSRFField)
			}
			if !hmac.Equal([]byte(got), []byte(want)) {
				http.Error(w, "refused: the form's CSRF token does not match; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), csrfKey{}, want)))
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}
