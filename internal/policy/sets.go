package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// Scope kinds: where a policy set applies, or does not.
const (
	ScopeWorkspace          = "workspace"
	ScopeWorkspaceExclusion = "workspace-exclusion"
	ScopeProject            = "project"
	ScopeProjectExclusion   = "project-exclusion"
)

// Set is a policy set.
type Set struct {
	ID                   string
	Organization         string
	Name                 string
	Description          string
	Kind                 Kind
	Global               bool
	Overridable          bool
	AgentEnabled         bool
	PolicyToolVersion    string
	PoliciesPath         string
	Versioned            bool
	CurrentVersionID     string
	NewestVersionID      string
	PolicyUpdatePatterns []string
	// VCSRepo is the repository whose branch makes the set's versions
	// (nil: versions are uploaded).
	VCSRepo   *vcsrepo.Repo
	CreatedAt time.Time
	UpdatedAt time.Time
	// PolicyIDs, Scopes (kind → IDs) and TagSelectors are filled by the
	// service.
	PolicyIDs    []string
	Scopes       map[string][]string
	TagSelectors []TagSelector
}

// SetChanges are the attributes and relationships of a create or update;
// nil is absent.
type SetChanges struct {
	Name                 *string
	Description          *string
	Kind                 *Kind
	Global               *bool
	Overridable          *bool
	AgentEnabled         *bool
	PolicyToolVersion    *string
	PoliciesPath         *string
	PolicyUpdatePatterns *[]string
	PolicyIDs            []string
	Scopes               map[string][]string
	// TagSelectors, when not nil, are all the set's selectors.
	TagSelectors *[]TagSelector
	// VCSRepo connects the set to a repository; RemoveVCS disconnects it.
	VCSRepo   *vcsrepo.Options
	RemoveVCS bool
}

// VCS is the VCS domain as VCS-backed policy sets need it (internal/vcs's
// Service): it checks a set's connection as the caller and keeps it in
// the set's transaction; after the commit, the branch's commits become
// the set's versions.
type VCS interface {
	ResolvePolicySet(ctx context.Context, org string, cur *vcsrepo.Repo, o vcsrepo.Options) (*vcsrepo.Repo, error)
	ConnectPolicySet(ctx context.Context, q store.Q, setID string, next *vcsrepo.Repo) error
}

const setCols = `id, organization_name, name, description, kind, global, overridable, agent_enabled, policy_tool_version, policies_path, versioned, current_version_id, newest_version_id, policy_update_patterns, vcs_repo, created_at, updated_at`

func scanSet(sc store.Scanner) (*Set, error) {
	var s Set
	var patterns, repo string
	var created, updated int64
	if err := sc.Scan(&s.ID, &s.Organization, &s.Name, &s.Description, &s.Kind, &s.Global, &s.Overridable, &s.AgentEnabled,
		&s.PolicyToolVersion, &s.PoliciesPath, &s.Versioned, &s.CurrentVersionID, &s.NewestVersionID, &patterns, &repo, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(patterns), &s.PolicyUpdatePatterns); err != nil {
		return nil, fmt.Errorf("decoding policy set %s: %w", s.ID, err)
	}
	if repo != "" {
		s.VCSRepo = &vcsrepo.Repo{}
		if err := json.Unmarshal([]byte(repo), s.VCSRepo); err != nil {
			return nil, fmt.Errorf("decoding the vcs-repo of policy set %s: %w", s.ID, err)
		}
	}
	s.CreatedAt, s.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &s, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// fill reads a set's policies, scopes and tag selectors.
func (s *Service) fill(ctx context.Context, q store.Q, set *Set) error {
	return s.fillAll(ctx, q, []*Set{set})
}

// fillAll reads the policies, scopes and tag selectors of sets, three
// statements for all.
func (s *Service) fillAll(ctx context.Context, q store.Q, sets []*Set) error {
	if len(sets) == 0 {
		return nil
	}
	byID := make(map[string]*Set, len(sets))
	ids := make([]string, len(sets))
	for i, set := range sets {
		byID[set.ID] = set
		set.PolicyIDs, set.Scopes, set.TagSelectors = []string{}, map[string][]string{}, []TagSelector{}
		ids[i] = set.ID
	}
	list, args := store.In(ids)
	policies, err := store.Pairs(ctx, q, `SELECT sp.policy_set_id, sp.policy_id FROM policy_set_policies sp JOIN policies p ON p.id = sp.policy_id WHERE sp.policy_set_id IN (`+list+`) ORDER BY p.name, p.id`, args...)
	if err != nil {
		return err
	}
	for _, p := range policies {
		byID[p[0]].PolicyIDs = append(byID[p[0]].PolicyIDs, p[1])
	}
	rows, err := q.Query(ctx, `SELECT policy_set_id, kind, target_id FROM policy_set_scopes WHERE policy_set_id IN (`+list+`) ORDER BY kind, target_id`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var set, kind, id string
		if err := rows.Scan(&set, &kind, &id); err != nil {
			return err
		}
		byID[set].Scopes[kind] = append(byID[set].Scopes[kind], id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return fillSelectors(ctx, q, byID, list, args)
}

// ListSets returns at most limit (all when negative) of an organization's
// policy sets, filtered by a name substring and a kind when given, from
// offset on, and how many match in all.
func (s *Service) ListSets(ctx context.Context, org, search string, kind Kind, offset, limit int) ([]*Set, int, error) {
	if err := readOrg(ctx, org); err != nil {
		return nil, 0, err
	}
	sets, total, err := orgPage(ctx, s.o.DB, "policy_sets", setCols, scanSet, org, search, kind, offset, limit)
	if err != nil {
		return nil, 0, err
	}
	return sets, total, s.fillAll(ctx, s.o.DB, sets)
}

func (s *Service) loadSet(ctx context.Context, q store.Q, id string) (*Set, error) {
	set, err := scanSet(q.QueryRow(ctx, `SELECT `+setCols+` FROM policy_sets WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("policy set %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	return set, s.fill(ctx, q, set)
}

// Set returns a policy set the caller may see.
func (s *Service) Set(ctx context.Context, id string) (*Set, error) {
	set, err := s.loadSet(ctx, s.o.DB, id)
	if err != nil {
		return nil, err
	}
	if err := readOrg(ctx, set.Organization); err != nil {
		return nil, core.NotFound("policy set %q not found", id)
	}
	return set, nil
}

func (s *Service) managedSet(ctx context.Context, id string) (*Set, error) {
	set, err := s.Set(ctx, id)
	if err != nil {
		return nil, err
	}
	return set, manageOrg(ctx, set.Organization)
}

// checkTargets makes sure the workspaces, projects and policies a set is
// given exist in its organization (and that the caller sees them).
func (s *Service) checkTargets(ctx context.Context, set *Set, kind string, ids []string) error {
	for _, id := range ids {
		var org string
		var err error
		switch kind {
		case ScopeWorkspace, ScopeWorkspaceExclusion:
			org, err = s.o.Workspaces.Organization(ctx, id)
		case ScopeProject, ScopeProjectExclusion:
			org, err = s.o.Workspaces.ProjectOrganization(ctx, id)
		case "policy":
			var p *Policy
			p, err = s.Policy(ctx, id)
			if err == nil {
				org = p.Organization
				if p.Kind != set.Kind {
					return core.Invalid("policy %s is a %s policy; policy set %s holds %s policies", p.Name, p.Kind, set.Name, set.Kind)
				}
			}
		}
		if core.KindOf(err) == core.KindNotFound || (err == nil && org != set.Organization) {
			return core.Invalid("%s %q not found in organization %s", strings.ReplaceAll(kind, "-", " "), id, set.Organization)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CreateSet adds a policy set with its policies, scopes and tag selectors.
func (s *Service) CreateSet(ctx context.Context, org string, c SetChanges) (*Set, error) {
	if err := manageOrg(ctx, org); err != nil {
		return nil, err
	}
	set := &Set{ID: core.NewID(PrefixSet), Organization: org, Kind: Sentinel, PolicyUpdatePatterns: []string{}}
	if c.Name != nil {
		set.Name = *c.Name
	}
	if err := checkName("policy set", set.Name); err != nil {
		return nil, err
	}
	if c.Kind != nil && *c.Kind != "" {
		set.Kind = *c.Kind
	}
	if err := checkKind(set.Kind); err != nil {
		return nil, err
	}
	applySetChanges(set, c)
	if err := s.checkAll(ctx, set, c); err != nil {
		return nil, err
	}
	selectors, err := changedSelectors(c)
	if err != nil {
		return nil, err
	}
	if c.VCSRepo != nil {
		if s.VCS == nil {
			return nil, core.Invalid("this server connects no policy sets to repositories")
		}
		if set.VCSRepo, err = s.VCS.ResolvePolicySet(ctx, org, nil, *c.VCSRepo); err != nil {
			return nil, err
		}
	}
	now := core.Now()
	set.CreatedAt, set.UpdatedAt = now, now
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO policy_sets (`+setCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			set.ID, org, set.Name, set.Description, string(set.Kind), set.Global, set.Overridable, set.AgentEnabled, set.PolicyToolVersion,
			set.PoliciesPath, set.VCSRepo != nil, "", "", jsonText(set.PolicyUpdatePatterns), repoText(set.VCSRepo), core.Micros(now), core.Micros(now))
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("a policy set named %q already exists in organization %s", set.Name, org)
		}
		if err != nil {
			return err
		}
		if err := addPolicies(ctx, tx, set.ID, c.PolicyIDs); err != nil {
			return err
		}
		for kind, ids := range c.Scopes {
			if err := addScopes(ctx, tx, set.ID, kind, ids); err != nil {
				return err
			}
		}
		if set.VCSRepo != nil {
			if err := s.VCS.ConnectPolicySet(ctx, tx, set.ID, set.VCSRepo); err != nil {
				return err
			}
		}
		return addSelectors(ctx, tx, set.ID, selectors)
	})
	if err != nil {
		return nil, err
	}
	return s.loadSet(ctx, s.o.DB, set.ID)
}

// repoText is a connection as a set's row keeps it (” for none).
func repoText(r *vcsrepo.Repo) string {
	if r == nil {
		return ""
	}
	return jsonText(r)
}

func applySetChanges(set *Set, c SetChanges) {
	if c.Description != nil {
		set.Description = *c.Description
	}
	if c.Global != nil {
		set.Global = *c.Global
	}
	if c.Overridable != nil {
		set.Overridable = *c.Overridable
	}
	if c.AgentEnabled != nil {
		set.AgentEnabled = *c.AgentEnabled
	}
	if c.PolicyToolVersion != nil {
		set.PolicyToolVersion = *c.PolicyToolVersion
	}
	if c.PoliciesPath != nil {
		set.PoliciesPath = *c.PoliciesPath
	}
	if c.PolicyUpdatePatterns != nil {
		set.PolicyUpdatePatterns = *c.PolicyUpdatePatterns
	}
}

// changedSelectors returns a create's or update's tag selectors, checked
// (none when it has none).
func changedSelectors(c SetChanges) ([]TagSelector, error) {
	if c.TagSelectors == nil {
		return nil, nil
	}
	return checkSelectors(*c.TagSelectors)
}

func (s *Service) checkAll(ctx context.Context, set *Set, c SetChanges) error {
	if set.PoliciesPath != "" && (strings.HasPrefix(set.PoliciesPath, "/") || slices.Contains(strings.Split(set.PoliciesPath, "/"), "..")) {
		return core.Invalid("policies-path %q must be a relative path inside the policy set", set.PoliciesPath)
	}
	if err := s.checkTargets(ctx, set, "policy", c.PolicyIDs); err != nil {
		return err
	}
	for kind, ids := range c.Scopes {
		if err := s.checkTargets(ctx, set, kind, ids); err != nil {
			return err
		}
	}
	return nil
}

func addPolicies(ctx context.Context, q store.Q, setID string, ids []string) error {
	for _, id := range ids {
		if _, err := q.Exec(ctx, `INSERT INTO policy_set_policies (policy_set_id, policy_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, setID, id); err != nil {
			return err
		}
	}
	return nil
}

func addScopes(ctx context.Context, q store.Q, setID, kind string, ids []string) error {
	for _, id := range ids {
		if _, err := q.Exec(ctx, `INSERT INTO policy_set_scopes (policy_set_id, kind, target_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, setID, kind, id); err != nil {
			return err
		}
	}
	return nil
}

// UpdateSet changes a set's attributes (not its kind); tag selectors,
// when given, replace the set's. What it does not name is kept as the set
// has it: the row is read locked, in the transaction that writes it back.
// Before (2026-11-30) it was read with no transaction, and an overridable
// changed beside an update of the description was written back as it was
// (on both stores).
func (s *Service) UpdateSet(ctx context.Context, id string, c SetChanges) (*Set, error) {
	cur, err := s.managedSet(ctx, id)
	if err != nil {
		return nil, err
	}
	selectors, err := changedSelectors(c)
	if err != nil {
		return nil, err
	}
	// A connection is checked with the host before the transaction.
	repo, reconnect := cur.VCSRepo, c.VCSRepo != nil || c.RemoveVCS
	switch {
	case c.RemoveVCS:
		repo = nil
	case c.VCSRepo != nil && s.VCS == nil:
		return nil, core.Invalid("this server connects no policy sets to repositories")
	case c.VCSRepo != nil:
		if repo, err = s.VCS.ResolvePolicySet(ctx, cur.Organization, cur.VCSRepo, *c.VCSRepo); err != nil {
			return nil, err
		}
	}
	var set *Set
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		// The set's row is locked first; its selectors' rows after it.
		var err error
		set, err = scanSet(tx.QueryRow(ctx, `SELECT `+setCols+` FROM policy_sets WHERE id = ?`+store.ForUpdate(tx), id))
		if store.IsNoRows(err) {
			return core.NotFound("policy set %q not found", id)
		}
		if err != nil {
			return err
		}
		if err := s.fill(ctx, tx, set); err != nil {
			return err
		}
		if c.Name != nil {
			if err := checkName("policy set", *c.Name); err != nil {
				return err
			}
			set.Name = *c.Name
		}
		applySetChanges(set, c)
		if err := s.checkAll(ctx, set, SetChanges{}); err != nil {
			return err
		}
		set.UpdatedAt = core.Now()
		_, err = tx.Exec(ctx, `UPDATE policy_sets SET name = ?, description = ?, global = ?, overridable = ?, agent_enabled = ?, policy_tool_version = ?, policies_path = ?, policy_update_patterns = ?, updated_at = ? WHERE id = ?`,
			set.Name, set.Description, set.Global, set.Overridable, set.AgentEnabled, set.PolicyToolVersion, set.PoliciesPath,
			jsonText(set.PolicyUpdatePatterns), core.Micros(set.UpdatedAt), set.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("a policy set named %q already exists in organization %s", set.Name, set.Organization)
		}
		if err != nil {
			return err
		}
		if reconnect && s.VCS != nil {
			if _, err := tx.Exec(ctx, `UPDATE policy_sets SET vcs_repo = ?, versioned = ? WHERE id = ?`, repoText(repo), set.Versioned || repo != nil, set.ID); err != nil {
				return err
			}
			if err := s.VCS.ConnectPolicySet(ctx, tx, set.ID, repo); err != nil {
				return err
			}
			set.VCSRepo, set.Versioned = repo, set.Versioned || repo != nil
		}
		if c.TagSelectors == nil {
			return nil
		}
		return replaceSelectors(ctx, tx, set.ID, selectors)
	})
	if err != nil {
		return nil, err
	}
	if c.TagSelectors != nil {
		return s.loadSet(ctx, s.o.DB, set.ID) // the selectors as stored: in order, once each
	}
	return set, nil
}

// DeleteSet removes a policy set.
func (s *Service) DeleteSet(ctx context.Context, id string) error {
	set, err := s.managedSet(ctx, id)
	if err != nil {
		return err
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if set.VCSRepo != nil && s.VCS != nil {
			// The webhook goes from the host.
			if err := s.VCS.ConnectPolicySet(ctx, tx, set.ID, nil); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM policy_sets WHERE id = ?`, set.ID)
		return err
	})
}

// DisconnectVCS removes the vcs-repo of sets inside another domain's
// transaction q (the VCS domain's, deleting the token they connect
// through), without checking the caller: they keep their versions.
func DisconnectVCS(ctx context.Context, q store.Q, setIDs []string) error {
	for _, id := range setIDs {
		if _, err := q.Exec(ctx, `UPDATE policy_sets SET vcs_repo = '' WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// SystemSet reads a set for the system (the VCS domain making its
// versions), without checking a caller.
func (s *Service) SystemSet(ctx context.Context, id string) (*Set, error) {
	return s.loadSet(ctx, s.o.DB, id)
}

// ChangeRelation adds or removes policies ("policy") or scopes (a Scope
// kind) of a set.
func (s *Service) ChangeRelation(ctx context.Context, id, kind string, ids []string, add bool) error {
	set, err := s.managedSet(ctx, id)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return core.Invalid("at least one %s is required", strings.ReplaceAll(kind, "-", " "))
	}
	if add {
		if err := s.checkTargets(ctx, set, kind, ids); err != nil {
			return err
		}
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		for _, target := range ids {
			var err error
			switch {
			case kind == "policy" && add:
				err = addPolicies(ctx, tx, set.ID, []string{target})
			case kind == "policy":
				_, err = tx.Exec(ctx, `DELETE FROM policy_set_policies WHERE policy_set_id = ? AND policy_id = ?`, set.ID, target)
			case add:
				err = addScopes(ctx, tx, set.ID, kind, []string{target})
			default:
				_, err = tx.Exec(ctx, `DELETE FROM policy_set_scopes WHERE policy_set_id = ? AND kind = ? AND target_id = ?`, set.ID, kind, target)
			}
			if err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE policy_sets SET updated_at = ? WHERE id = ?`, core.Micros(core.Now()), set.ID)
		return err
	})
}

// setsFor returns the policy sets that apply to a workspace: global sets,
// sets naming it, sets naming its project and non-global sets with an
// inclusion tag selector its tags match; minus sets that exclude the
// workspace, whose exclusion tag selectors its tags match, or (for global
// sets) that exclude its project. The workspace's tags are read now: a
// tag added or removed counts from the next decision on.
func (s *Service) setsFor(ctx context.Context, q store.Q, org, workspaceID, projectID string) ([]*Set, error) {
	sets, err := store.All(ctx, q, scanSet, `SELECT `+setCols+` FROM policy_sets WHERE organization_name = ? ORDER BY name, id`, org)
	if err != nil {
		return nil, err
	}
	if err := s.fillAll(ctx, q, sets); err != nil {
		return nil, err
	}
	var tags []Tag
	for _, set := range sets {
		if len(set.TagSelectors) > 0 {
			if tags, err = s.o.Workspaces.Tags(ctx, q, workspaceID); err != nil {
				return nil, err
			}
			break
		}
	}
	var out []*Set
	for _, set := range sets {
		if set.applies(workspaceID, projectID, tags) {
			out = append(out, set)
		}
	}
	return out, nil
}

// applies decides whether set applies to a workspace in a project (""
// for none) with tags. Exclusions win over inclusions.
func (set *Set) applies(workspaceID, projectID string, tags []Tag) bool {
	if slices.Contains(set.Scopes[ScopeWorkspaceExclusion], workspaceID) {
		return false
	}
	if set.Global && projectID != "" && slices.Contains(set.Scopes[ScopeProjectExclusion], projectID) {
		return false
	}
	included := false
	for _, t := range set.TagSelectors {
		switch {
		case t.Exclude && t.matches(tags):
			return false
		case !t.Exclude && !set.Global && !included:
			included = t.matches(tags)
		}
	}
	return included || set.Global || slices.Contains(set.Scopes[ScopeWorkspace], workspaceID) ||
		(projectID != "" && slices.Contains(set.Scopes[ScopeProject], projectID))
}
