package authz

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Token types of TTL policies, as the API names them.
var ttlTokenTypes = []string{"organization", "team", "user", "audit_trails"}

// DefaultMaxTTL is a token type's limit until an organization sets one
// (HCP Terraform's two years, 730.5 days).
const DefaultMaxTTL = 63113904000 * time.Millisecond

// TTLPolicy is the longest a token of one type may live in an organization.
type TTLPolicy struct {
	ID        string
	TokenType string
	MaxTTL    time.Duration
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TTLPolicies returns the organization's policy for every token type,
// creating the default ones on first use so that each has an ID.
func (s *Service) TTLPolicies(ctx context.Context, org string) ([]*TTLPolicy, error) {
	if err := s.resolver.OrganizationExists(ctx, org); err != nil {
		return nil, err
	}
	var out []*TTLPolicy
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.ttlPolicies(ctx, tx, org)
		return err
	})
	return out, err
}

func (s *Service) ttlPolicies(ctx context.Context, q store.Q, org string) ([]*TTLPolicy, error) {
	scan := func(sc interface{ Scan(...any) error }) (*TTLPolicy, error) {
		var p TTLPolicy
		var ms, created, updated int64
		if err := sc.Scan(&p.ID, &p.TokenType, &ms, &created, &updated); err != nil {
			return nil, err
		}
		p.MaxTTL = time.Duration(ms) * time.Millisecond
		p.CreatedAt, p.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
		return &p, nil
	}
	const query = `SELECT id, token_type, max_ttl_ms, created_at, updated_at FROM token_ttl_policies WHERE organization_name = ? ORDER BY token_type`
	have, err := store.All(ctx, q, scan, query, org)
	if err != nil {
		return nil, err
	}
	if len(have) == len(ttlTokenTypes) {
		return have, nil
	}
	now := core.Micros(core.Now())
	for _, typ := range ttlTokenTypes {
		if slices.ContainsFunc(have, func(p *TTLPolicy) bool { return p.TokenType == typ }) {
			continue
		}
		_, err := q.Exec(ctx, `INSERT INTO token_ttl_policies (id, organization_name, token_type, max_ttl_ms, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			core.NewID("ttlp"), org, typ, DefaultMaxTTL.Milliseconds(), now, now)
		if err != nil {
			return nil, err
		}
	}
	return store.All(ctx, q, scan, query, org)
}

// SetTTLPolicies changes some of an organization's policies and returns
// all of them.
func (s *Service) SetTTLPolicies(ctx context.Context, org string, set map[string]time.Duration) ([]*TTLPolicy, error) {
	for typ, d := range set {
		if !slices.Contains(ttlTokenTypes, typ) {
			return nil, core.Invalid("token-type %q is not one of %v", typ, ttlTokenTypes)
		}
		if d <= 0 || d > DefaultMaxTTL {
			return nil, core.Invalid("max-ttl-ms for %s must be positive and at most %d", typ, DefaultMaxTTL.Milliseconds())
		}
	}
	if err := s.resolver.OrganizationExists(ctx, org); err != nil {
		return nil, err
	}
	var out []*TTLPolicy
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := s.ttlPolicies(ctx, tx, org); err != nil {
			return err
		}
		for typ, d := range set {
			if _, err := tx.Exec(ctx, `UPDATE token_ttl_policies SET max_ttl_ms = ?, updated_at = ? WHERE organization_name = ? AND token_type = ?`,
				d.Milliseconds(), core.Micros(core.Now()), org, typ); err != nil {
				return err
			}
		}
		var err error
		out, err = s.ttlPolicies(ctx, tx, org)
		return err
	})
	return out, err
}

// TokenTTL returns the longest a token of kind may live in org (auth asks
// it when authenticating organization and team tokens).
func (s *Service) TokenTTL(ctx context.Context, org string, kind auth.Kind) (time.Duration, error) {
	typ := string(kind)
	if kind == auth.KindAuditTrails {
		typ = "audit_trails"
	}
	var ms int64
	err := s.db.QueryRow(ctx, `SELECT max_ttl_ms FROM token_ttl_policies WHERE organization_name = ? AND token_type = ?`, org, typ).Scan(&ms)
	if store.IsNoRows(err) {
		return DefaultMaxTTL, nil
	}
	return time.Duration(ms) * time.Millisecond, err
}

type jsonTTLPolicy struct {
	ID        string    `jsonapi:"primary,organization-token-ttl-policies"`
	TokenType string    `jsonapi:"attr,token-type"`
	MaxTTLMs  int64     `jsonapi:"attr,max-ttl-ms"`
	CreatedAt time.Time `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt time.Time `jsonapi:"attr,updated-at,iso8601"`
}

func respondTTL(w http.ResponseWriter, r *http.Request, ps []*TTLPolicy) {
	out := make([]*jsonTTLPolicy, len(ps))
	for i, p := range ps {
		out[i] = &jsonTTLPolicy{ID: p.ID, TokenType: p.TokenType, MaxTTLMs: p.MaxTTL.Milliseconds(), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: len(out), Total: len(out)})
}

func (a *API) listTTL(w http.ResponseWriter, r *http.Request) {
	ps, err := a.Service.TTLPolicies(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	respondTTL(w, r, ps)
}

func (a *API) updateTTL(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	// Items come as {"token-type","max-ttl-ms"}; go-tfe's nested structs
	// may also arrive keyed by their Go field names.
	var attrs struct {
		Policies []map[string]json.RawMessage `json:"token-ttl-policies"`
	}
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if len(attrs.Policies) == 0 {
		tfeapi.Error(w, r, core.Invalid("token-ttl-policies is required"))
		return
	}
	set := map[string]time.Duration{}
	for _, item := range attrs.Policies {
		var typ string
		var ms int64
		for _, k := range []string{"token-type", "TokenType"} {
			if v, ok := item[k]; ok {
				_ = json.Unmarshal(v, &typ)
			}
		}
		for _, k := range []string{"max-ttl-ms", "MaxTTLMs"} {
			if v, ok := item[k]; ok {
				_ = json.Unmarshal(v, &ms)
			}
		}
		set[typ] = time.Duration(ms) * time.Millisecond
	}
	ps, err := a.Service.SetTTLPolicies(r.Context(), r.PathValue("org"), set)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	respondTTL(w, r, ps)
}
