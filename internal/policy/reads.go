package policy

import (
	"context"
	"fmt"
	"sort"

	"github.com/terracehq/terrace/internal/store"
)

// What the web pages (internal/ui) read of policy sets beyond the API's
// reads: the versions of a page of sets in one statement, what a set's
// page shows of its versions (SetContent), and which of a run's sets
// still exist. All ask what the API's reads ask: that the caller reads
// the set's organization.

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

// SetContent is what a set's page shows beyond the set: the policies it
// evaluates and its versions.
type SetContent struct {
	// Policies are SetPolicies'.
	Policies []SetPolicy
	// Versions are its current and newest versions, by ID (as VersionsOf
	// returns them).
	Versions map[string]*Version
}

// SetContent returns the policies set (read with Set) evaluates and its
// current and newest versions. The versions and the current one's files
// are read in one statement.
func (s *Service) SetContent(ctx context.Context, set *Set) (*SetContent, error) {
	if err := readOrg(ctx, set.Organization); err != nil {
		return nil, err
	}
	out := &SetContent{Policies: []SetPolicy{}, Versions: map[string]*Version{}}
	if ids := versionIDs(set); len(ids) > 0 {
		// The current version's files (the policies it names); the
		// newest's are not read.
		var files string
		list, args := store.In(ids)
		vs, err := store.All(ctx, s.o.DB, func(sc store.Scanner) (*Version, error) {
			var raw string
			v, err := scanVersion(withColumn{sc, &raw})
			if err == nil && v.ID == set.CurrentVersionID {
				files = raw
			}
			return v, err
		}, `SELECT `+versionCols+`, CASE WHEN id = ? THEN files ELSE '' END FROM policy_set_versions WHERE id IN (`+list+`) AND policy_set_id = ?`,
			append(append([]any{set.CurrentVersionID}, args...), set.ID)...)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			out.Versions[v.ID] = v
		}
		if set.CurrentVersionID != "" {
			if out.Versions[set.CurrentVersionID] == nil {
				return nil, fmt.Errorf("reading policy set version %s: not found", set.CurrentVersionID)
			}
			ps, err := filesPolicies(set, files)
			if err != nil {
				return nil, err
			}
			out.Policies = ps
			return out, nil
		}
	}
	if len(set.PolicyIDs) == 0 {
		return out, nil
	}
	list, args := store.In(set.PolicyIDs)
	ps, err := store.All(ctx, s.o.DB, func(sc store.Scanner) (SetPolicy, error) {
		var p SetPolicy
		err := sc.Scan(&p.ID, &p.Name, &p.Description, &p.Query, &p.Level)
		return p, err
	}, `SELECT id, name, description, query, enforcement_level FROM policies WHERE id IN (`+list+`) AND organization_name = ? ORDER BY name, id`,
		append(args, set.Organization)...)
	if err != nil {
		return nil, err
	}
	out.Policies = ps
	return out, nil
}

// SetPolicies returns the policies set (read with Set) evaluates, by
// name, as an evaluation reads them: those its current version's files
// name when it has one, else its own policies. Sources are not returned.
func (s *Service) SetPolicies(ctx context.Context, set *Set) ([]SetPolicy, error) {
	c, err := s.SetContent(ctx, set)
	if err != nil {
		return nil, err
	}
	return c.Policies, nil
}

// filesPolicies are the policies a version's files (as stored) name, by
// name, as versionContent reads them for an evaluation.
func filesPolicies(set *Set, raw string) ([]SetPolicy, error) {
	_, ps, err := decodeVersion(set, raw)
	if err != nil {
		return nil, err
	}
	out := []SetPolicy{}
	for _, p := range ps {
		sp := SetPolicy{Name: p.Name, Description: p.Description, Query: p.Query, Level: p.Level}
		if set.Kind != OPA {
			sp.Level = "" // not read: Terrace does not read sentinel.hcl
		}
		out = append(out, sp)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// versionIDs are the current and newest versions of a set, once each.
func versionIDs(set *Set) []string {
	var ids []string
	for _, id := range []string{set.CurrentVersionID, set.NewestVersionID} {
		if id != "" && (len(ids) == 0 || ids[0] != id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// withColumn scans a row of a query's columns and one more, the last,
// into extra.
type withColumn struct {
	sc    store.Scanner
	extra any
}

func (w withColumn) Scan(dest ...any) error { return w.sc.Scan(append(dest, w.extra)...) }

// ExistingSets says which of ids are policy sets of org, one statement:
// an evaluation's outcome names its set, which may since have been
// deleted. An ID that is not such a set is left out.
func (s *Service) ExistingSets(ctx context.Context, org string, ids []string) (map[string]bool, error) {
	if err := readOrg(ctx, org); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	list, args := store.In(ids)
	found, err := store.Strings(ctx, s.o.DB, `SELECT id FROM policy_sets WHERE id IN (`+list+`) AND organization_name = ?`, append(args, org)...)
	if err != nil {
		return nil, err
	}
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}
