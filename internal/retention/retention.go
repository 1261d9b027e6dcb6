// Package retention is Terraform Enterprise's data retention policies:
// how long the backing data of a workspace's state versions and
// configuration versions is kept. A policy belongs to an organization (for
// every workspace of it that has none of its own) or to one workspace, and
// is one of two kinds: delete-older (backing data older than a number of
// days is deleted) or dont-delete (nothing is, whatever the organization
// says). Both are kept in the owner's settings document, so that reading
// an organization or a workspace reads its policy with it.
//
// What is deleted (Enforcer): of each workspace under a delete-older
// policy, the content of every finalized state version created before the
// cutoff but the current one (the version stays, with its outputs, its
// status backing_data_permanently_deleted), and every uploaded
// configuration version created before the cutoff that is neither the
// workspace's current one nor used by a run that has not ended (archived,
// as an archive request would). Downloads of what went answer 404 saying
// why. Nothing else is touched: runs, their plans and logs stay.
package retention

import (
	"math"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Kinds of policy.
const (
	KindDeleteOlder = "delete-older"
	KindDontDelete  = "dont-delete"
)

// MaxDays bounds delete-older-than-n-days (a century).
const MaxDays = 36500

// Policy is a data retention policy as its owner's settings keep it; the
// zero value is none.
type Policy struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Days int    `json:"days,omitempty"`
}

// None says there is no policy.
func (p Policy) None() bool { return p.ID == "" }

// Cutoff is when backing data older than p's days began to be deleted,
// at now; ok is false when p deletes nothing.
func (p Policy) Cutoff(now time.Time) (cutoff time.Time, ok bool) {
	if p.Kind != KindDeleteOlder || p.Days <= 0 {
		return time.Time{}, false
	}
	return now.Add(-time.Duration(p.Days) * 24 * time.Hour), true
}

// Effective is the policy a workspace is under: its own, or its
// organization's.
func Effective(workspace, organization Policy) Policy {
	if !workspace.None() {
		return workspace
	}
	return organization
}

// Wire forms (go-tfe's DataRetentionPolicyDeleteOlder, …DontDelete and
// the legacy DataRetentionPolicy, which is a delete-older policy).
type (
	jsonDeleteOlder struct {
		ID   string `jsonapi:"primary,data-retention-policy-delete-olders"`
		Days int    `jsonapi:"attr,delete-older-than-n-days"`
	}
	jsonDontDelete struct {
		ID string `jsonapi:"primary,data-retention-policy-dont-deletes"`
	}
	jsonLegacy struct {
		ID   string `jsonapi:"primary,data-retention-policies"`
		Days int    `jsonapi:"attr,delete-older-than-n-days"`
	}
)

// Choice is the data-retention-policy relationship of an organization or
// a workspace document (a polyrelation: one of the two kinds, or null).
type Choice struct {
	DeleteOlder *jsonDeleteOlder
	DontDelete  *jsonDontDelete
}

// Relationship returns p as a document's relationship (nil: none).
func Relationship(p Policy) *Choice {
	switch p.Kind {
	case KindDeleteOlder:
		return &Choice{DeleteOlder: &jsonDeleteOlder{ID: p.ID}}
	case KindDontDelete:
		return &Choice{DontDelete: &jsonDontDelete{ID: p.ID}}
	}
	return nil
}

// Respond writes p as the relationship's document: a 404 when there is
// none.
func Respond(w http.ResponseWriter, r *http.Request, status int, p Policy, owner string) {
	switch p.Kind {
	case KindDeleteOlder:
		if r.Method == http.MethodPatch {
			// The legacy PATCH answers in the legacy type.
			tfeapi.Respond(w, r, status, &jsonLegacy{ID: p.ID, Days: p.Days})
			return
		}
		tfeapi.Respond(w, r, status, &jsonDeleteOlder{ID: p.ID, Days: p.Days})
	case KindDontDelete:
		tfeapi.Respond(w, r, status, &jsonDontDelete{ID: p.ID})
	default:
		tfeapi.Error(w, r, core.NotFound("%s has no data retention policy of its own", owner))
	}
}

// decode reads a request setting a policy: type
// data-retention-policy-delete-olders (or the legacy
// data-retention-policies) with delete-older-than-n-days, or
// data-retention-policy-dont-deletes. The policy keeps prev's ID when its
// kind stays.
func decode(w http.ResponseWriter, r *http.Request, prev Policy) (Policy, error) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return Policy{}, err
	}
	var p Policy
	switch doc.Type {
	case "data-retention-policy-delete-olders", "data-retention-policies":
		var attrs struct {
			Days *float64 `json:"delete-older-than-n-days"`
		}
		if err := doc.Attrs(&attrs); err != nil {
			return Policy{}, err
		}
		if d := attrs.Days; d == nil || *d != math.Trunc(*d) || *d < 1 || *d > MaxDays {
			return Policy{}, core.Invalid("delete-older-than-n-days must be a whole number of days from 1 to %d", MaxDays)
		}
		p = Policy{Kind: KindDeleteOlder, Days: int(*attrs.Days)}
	case "data-retention-policy-dont-deletes":
		p = Policy{Kind: KindDontDelete}
	default:
		return Policy{}, core.Invalid("a data retention policy is of type data-retention-policy-delete-olders or data-retention-policy-dont-deletes, not %q", doc.Type)
	}
	p.ID = prev.ID
	if prev.Kind != p.Kind || prev.ID == "" {
		p.ID = core.NewID(core.PrefixRetentionPolicy)
	}
	return p, nil
}

// Set answers a POST (or the legacy PATCH) of an owner's policy: the
// policy the request decodes to (keeping prev's ID when its kind stays)
// is stored by store, which returns the policy in force, and that is the
// answer (201, or 200 to a PATCH).
func Set(w http.ResponseWriter, r *http.Request, prev Policy, owner string, store func(Policy) (Policy, error)) {
	p, err := decode(w, r, prev)
	if err == nil {
		p, err = store(p)
	}
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	status := http.StatusCreated
	if r.Method == http.MethodPatch {
		status = http.StatusOK
	}
	Respond(w, r, status, p, owner)
}
