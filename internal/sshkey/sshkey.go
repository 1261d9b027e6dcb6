// Package sshkey keeps an organization's SSH keys: private keys that runs
// use to fetch Terraform modules from private git repositories.
//
// A key's value is write-only: it is accepted on create and update, stored,
// and never returned by the API nor written to a log. Only PrivateKey, for
// the runner, reads it back.
package sshkey

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Limits on what a client may send.
const (
	MaxName  = 255
	MaxValue = 64 << 10
)

// Key is an SSH key as shown to callers: it carries no value.
type Key struct {
	ID           string
	Organization string
	Name         string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Options are the attributes of a new or changed key; nil fields are absent.
type Options struct {
	Name  *string
	Value *string
}

// String never shows the value, so that an Options printed by mistake
// leaks nothing.
func (o Options) String() string {
	name := "<nil>"
	if o.Name != nil {
		name = *o.Name
	}
	return "sshkey.Options{Name: " + name + ", Value: [redacted]}"
}

// GoString is String for %#v.
func (o Options) GoString() string { return o.String() }

func validName(n string) error {
	if n == "" {
		return core.Invalid("name is required")
	}
	if utf8.RuneCountInString(n) > MaxName {
		return core.Invalid("name is longer than %d characters", MaxName)
	}
	return nil
}

func validValue(v string) error {
	if v == "" {
		return core.Invalid("value is required")
	}
	if len(v) > MaxValue {
		return core.Invalid("value is longer than %d bytes", MaxValue)
	}
	return nil
}

// OnDelete runs inside the transaction that deletes a key, so that other
// domains drop their references to it (workspaces unassign it).
type OnDelete func(ctx context.Context, q store.Q, keyID string) error
