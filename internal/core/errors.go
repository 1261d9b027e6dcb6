package core

import (
	"errors"
	"fmt"
)

// Kind classifies an error so the HTTP edge can map it to a status code in
// one place. The set is closed; add a kind only with its mapping.
type Kind int

const (
	KindInternal        Kind = iota // anything unexpected: 500
	KindNotFound                    // missing, or not visible to the caller: 404
	KindConflict                    // the state of the resource forbids it: 409
	KindInvalid                     // the request is malformed or breaks a rule: 422
	KindBadRequest                  // the request cannot be understood: 400
	KindUnauthorized                // no or bad credentials: 401
	KindForbidden                   // known caller, not allowed: 403
	KindTooLarge                    // body over the limit: 413
	KindTooManyRequests             // over a rate limit: 429
)

// Error is a classified error with a message meant for the API caller.
type Error struct {
	Kind   Kind
	Title  string // short, e.g. "not found"; defaults from Kind
	Detail string // a sentence the caller can act on
	Err    error  // optional cause (never shown to callers when Kind is Internal)
}

func (e *Error) Error() string {
	if e.Err != nil && e.Detail == "" {
		return e.Err.Error()
	}
	if e.Err != nil {
		return e.Detail + ": " + e.Err.Error()
	}
	return e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) and friends match any Error of the same kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Detail == "" && t.Err == nil && t.Kind == e.Kind
}

// Sentinels for errors.Is comparisons.
var (
	ErrNotFound     = &Error{Kind: KindNotFound}
	ErrConflict     = &Error{Kind: KindConflict}
	ErrInvalid      = &Error{Kind: KindInvalid}
	ErrUnauthorized = &Error{Kind: KindUnauthorized}
	ErrForbidden    = &Error{Kind: KindForbidden}
)

func newErr(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Detail: fmt.Sprintf(format, args...)}
}

// NotFound returns a KindNotFound error.
func NotFound(format string, args ...any) error { return newErr(KindNotFound, format, args...) }

// Conflict returns a KindConflict error.
func Conflict(format string, args ...any) error { return newErr(KindConflict, format, args...) }

// Invalid returns a KindInvalid error.
func Invalid(format string, args ...any) error { return newErr(KindInvalid, format, args...) }

// BadRequest returns a KindBadRequest error.
func BadRequest(format string, args ...any) error { return newErr(KindBadRequest, format, args...) }

// Unauthorized returns a KindUnauthorized error.
func Unauthorized(format string, args ...any) error {
	return newErr(KindUnauthorized, format, args...)
}

// Forbidden returns a KindForbidden error.
func Forbidden(format string, args ...any) error { return newErr(KindForbidden, format, args...) }

// NotFoundAs is err, but a not-found err is worded as format says: the
// authorization model's refusal names the resource it decided on (a
// comment's run, a key's organization), where the caller named another
// thing by its own ID, which is what the answer must say is not found.
func NotFoundAs(err error, format string, args ...any) error {
	if KindOf(err) == KindNotFound {
		return NotFound(format, args...)
	}
	return err
}

// KindOf returns the kind of err, KindInternal when it carries none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
