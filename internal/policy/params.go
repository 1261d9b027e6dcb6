package policy

import (
	"context"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// ValueColumn is this domain's column sealed at rest: parameter values,
// like variable values, are stored sealed (docs/design/storage.md).
var ValueColumn = seal.Column{Table: "policy_set_parameters", IDColumn: "id", Column: "value", Purpose: "policy_set_parameters.value"}

// Parameter is a policy set parameter (a key and value Sentinel policies
// read; OPA policies in HCP Terraform get none, and neither do they here).
// A sensitive value is write-only: it is never returned.
type Parameter struct {
	ID        string
	SetID     string
	Key       string
	Value     string
	Sensitive bool
}

// ParameterChanges are the attributes of a create or update.
type ParameterChanges struct {
	Key       *string
	Value     *string
	Category  *string
	Sensitive *bool
}

func (s *Service) paramScanner(sc store.Scanner) (*Parameter, error) {
	var p Parameter
	if err := sc.Scan(&p.ID, &p.SetID, &p.Key, &p.Value, &p.Sensitive); err != nil {
		return nil, err
	}
	v, err := s.o.Keys.OpenString(ValueColumn.Purpose, p.Value)
	if err != nil {
		return nil, fmt.Errorf("policy set parameter %s: %w", p.ID, err)
	}
	p.Value = v
	return &p, nil
}

func (s *Service) seal(v string) (string, error) {
	return s.o.Keys.SealString(ValueColumn.Purpose, v)
}

// Parameters lists a set's parameters.
func (s *Service) Parameters(ctx context.Context, setID string) ([]*Parameter, error) {
	if _, err := s.managedSet(ctx, setID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.o.DB, s.paramScanner, `SELECT id, policy_set_id, key, value, sensitive FROM policy_set_parameters WHERE policy_set_id = ? ORDER BY created_at, id`, setID)
}

// Parameter returns one parameter of a set.
func (s *Service) Parameter(ctx context.Context, setID, id string) (*Parameter, error) {
	if _, err := s.managedSet(ctx, setID); err != nil {
		return nil, err
	}
	p, err := s.paramScanner(s.o.DB.QueryRow(ctx, `SELECT id, policy_set_id, key, value, sensitive FROM policy_set_parameters WHERE policy_set_id = ? AND id = ?`, setID, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("parameter %q not found in policy set %s", id, setID)
	}
	return p, err
}

func checkCategory(c *string) error {
	if c != nil && *c != "policy-set" {
		return core.Invalid("category of a policy set parameter must be policy-set, not %q", *c)
	}
	return nil
}

// CreateParameter adds a parameter to a set.
func (s *Service) CreateParameter(ctx context.Context, setID string, c ParameterChanges) (*Parameter, error) {
	if _, err := s.managedSet(ctx, setID); err != nil {
		return nil, err
	}
	if c.Key == nil || strings.TrimSpace(*c.Key) == "" {
		return nil, core.Invalid("key is required")
	}
	if c.Category == nil {
		return nil, core.Invalid("category is required (policy-set)")
	}
	if err := checkCategory(c.Category); err != nil {
		return nil, err
	}
	p := &Parameter{ID: core.NewID(PrefixParameter), SetID: setID, Key: *c.Key}
	if c.Value != nil {
		p.Value = *c.Value
	}
	if c.Sensitive != nil {
		p.Sensitive = *c.Sensitive
	}
	sealed, err := s.seal(p.Value)
	if err != nil {
		return nil, err
	}
	_, err = s.o.DB.Exec(ctx, `INSERT INTO policy_set_parameters (id, policy_set_id, key, value, sensitive, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		p.ID, setID, p.Key, sealed, p.Sensitive, core.Micros(core.Now()))
	if store.IsUniqueViolation(s.o.DB, err) {
		return nil, core.Invalid("policy set %s already has a parameter %q", setID, p.Key)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// UpdateParameter changes a parameter's key, value or sensitivity; a
// sensitive parameter stays sensitive. What it does not name is kept as
// the parameter has it: the row is read locked, in the transaction that
// writes it back. Before (2026-11-30) it was read with no transaction,
// and a parameter made sensitive beside an update of its value was
// written back not sensitive (on both stores).
func (s *Service) UpdateParameter(ctx context.Context, setID, id string, c ParameterChanges) (*Parameter, error) {
	if _, err := s.Parameter(ctx, setID, id); err != nil {
		return nil, err
	}
	if err := checkCategory(c.Category); err != nil {
		return nil, err
	}
	var p *Parameter
	err := s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		// The parameter's row is the only one locked here: no order to keep.
		var err error
		p, err = s.paramScanner(tx.QueryRow(ctx, `SELECT id, policy_set_id, key, value, sensitive FROM policy_set_parameters WHERE policy_set_id = ? AND id = ?`+store.ForUpdate(tx), setID, id))
		if store.IsNoRows(err) {
			return core.NotFound("parameter %q not found in policy set %s", id, setID)
		}
		if err != nil {
			return err
		}
		if c.Key != nil {
			if strings.TrimSpace(*c.Key) == "" {
				return core.Invalid("key must not be empty")
			}
			p.Key = *c.Key
		}
		if c.Value != nil {
			p.Value = *c.Value
		}
		if c.Sensitive != nil {
			if p.Sensitive && !*c.Sensitive {
				return core.Invalid("a sensitive parameter cannot be made non-sensitive; delete and create it again")
			}
			p.Sensitive = *c.Sensitive
		}
		sealed, err := s.seal(p.Value)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE policy_set_parameters SET key = ?, value = ?, sensitive = ? WHERE id = ?`, p.Key, sealed, p.Sensitive, p.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("policy set %s already has a parameter %q", setID, p.Key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// DeleteParameter removes a parameter.
func (s *Service) DeleteParameter(ctx context.Context, setID, id string) error {
	p, err := s.Parameter(ctx, setID, id)
	if err != nil {
		return err
	}
	_, err = s.o.DB.Exec(ctx, `DELETE FROM policy_set_parameters WHERE id = ?`, p.ID)
	return err
}
