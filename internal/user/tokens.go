package user

import (
	"context"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// TokenKind is what differs between the kinds of authentication tokens
// (user, team and agent tokens) behind the endpoints they share; the
// handlers themselves are these methods, one copy for every kind.
type TokenKind struct {
	// Check returns nil when the caller may see t, Delete deletes it;
	// both ask the owning domain (which asks internal/authz).
	Check  func(ctx context.Context, t *auth.Token) error
	Delete func(ctx context.Context, t *auth.Token) error
	// JSON shows t; secret is the token itself, only right after it is
	// created ("" otherwise).
	JSON func(ctx context.Context, t *auth.Token, secret string) *TokenJSON
}

// Read serves GET authentication-tokens/{id} for t.
func (k TokenKind) Read(w http.ResponseWriter, r *http.Request, t *auth.Token) {
	if err := k.Check(r.Context(), t); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, k.JSON(r.Context(), t, ""))
}

// Remove serves DELETE authentication-tokens/{id} for t.
func (k TokenKind) Remove(w http.ResponseWriter, r *http.Request, t *auth.Token) {
	if err := k.Delete(r.Context(), t); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// List answers a token list (what list read, or its error) a page at a
// time.
func (k TokenKind) List(w http.ResponseWriter, r *http.Request, list func() ([]*auth.Token, error)) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	toks, err := list()
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(toks, page)
	out := make([]*TokenJSON, len(items))
	for i, t := range items {
		out[i] = k.JSON(r.Context(), t, "")
	}
	tfeapi.RespondList(w, r, out, pg)
}

// Create decodes a token create request and answers what create made of
// it: the new token with its secret, shown this once.
func (k TokenKind) Create(w http.ResponseWriter, r *http.Request, create func(TokenAttrs) (*auth.Token, string, error)) {
	var attrs TokenAttrs
	doc, err := tfeapi.Decode(w, r, 0)
	if err == nil {
		err = doc.Attrs(&attrs)
	}
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	t, secret, err := create(attrs)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusCreated, k.JSON(r.Context(), t, secret))
}

// TokenAttrs are the attributes of a token create request.
type TokenAttrs struct {
	Description *string    `json:"description"`
	ExpiredAt   *time.Time `json:"expired-at"`
}

// Desc is the description given, or "".
func (a TokenAttrs) Desc() string {
	if a.Description == nil {
		return ""
	}
	return *a.Description
}
