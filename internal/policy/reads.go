package policy

import (
	"context"
	"sort"

	"github.com/terracehq/terrace/internal/store"
)

// What the web pages (internal/ui) read of policy sets beyond the API's
// reads: the versions of a page of sets in one statement, and the
// policies a set evaluates. Both ask what the API's reads ask: that the
// caller reads the set's organization.

// VersionsOf returns the versions ids names (a page of sets' current and
// newest versions), by ID, that belong to sets of org; one statement. An
// ID that is not such a version is left out.
func (s *Service) VersionsOf(ctx context.Context, org string, ids []string) (map[string]*Version, error) {
	if err := readOrg(ctx, org); err != nil {
		return nil, err
	}
	out := map[string]*Version{}
	if len(ids) == 0 {
		return out, nil
	}
	list, args := store.In(ids)
	vs, err := store.All(ctx, s.o.DB, scanVersion, `SELECT `+versionCols+` FROM policy_set_versions WHERE id IN (`+list+`)
		AND policy_set_id IN (SELECT id FROM policy_sets WHERE organization_name = ?)`, append(args, org)...)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		out[v.ID] = v
	}
	return out, nil
}

// SetPolicy is a policy as a set evaluates it.
type SetPolicy struct {
	// ID is the policy's ("" for one a version's policies.hcl names).
	ID          string
	Name        string
	Description string
	Query       string
	// Level is the enforcement level ("" for the policies of a Sentinel
	// set's version: Terrace does not read sentinel.hcl).
	Level Level
}

// SetPolicies returns the policies set (read with Set) evaluates, by
// name, as an evaluation reads them: those its current version's files
// name when it has one, else its own policies. Sources are not returned.
func (s *Service) SetPolicies(ctx context.Context, set *Set) ([]SetPolicy, error) {
	if err := readOrg(ctx, set.Organization); err != nil {
		return nil, err
	}
	out := []SetPolicy{}
	if set.CurrentVersionID != "" {
		_, ps, err := s.versionContent(ctx, set)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			sp := SetPolicy{Name: p.Name, Description: p.Description, Query: p.Query, Level: p.Level}
			if set.Kind != OPA {
				sp.Level = ""
			}
			out = append(out, sp)
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
	if len(set.PolicyIDs) == 0 {
		return out, nil
	}
	list, args := store.In(set.PolicyIDs)
	return store.All(ctx, s.o.DB, func(sc store.Scanner) (SetPolicy, error) {
		var p SetPolicy
		err := sc.Scan(&p.ID, &p.Name, &p.Description, &p.Query, &p.Level)
		return p, err
	}, `SELECT id, name, description, query, enforcement_level FROM policies WHERE id IN (`+list+`) AND organization_name = ? ORDER BY name, id`,
		append(args, set.Organization)...)
}
