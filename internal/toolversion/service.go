package toolversion

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	goversion "github.com/hashicorp/go-version"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/store"
)

// Usage counts the workspaces of the site that use each of versions,
// reading through q (a version none uses may be left out); the workspace
// domain provides it (workspace.TerraformVersionUsage).
type Usage func(ctx context.Context, q store.Q, versions []string) (map[string]int, error)

// Config is what a Service is built from.
type Config struct {
	DB    *store.DB
	Usage Usage
	// Runs, when set, counts the unfinished runs on a version (through
	// q): a version such a run was pinned to is neither deleted nor
	// renamed until they end.
	Runs func(ctx context.Context, q store.Q, version string) (int, error)
}

// Service keeps the registered terraform versions. Its API methods are
// the SiteAdmin action (the guard hides the routes from everyone else;
// the service asks again); CheckSelectable and Release serve other
// domains and ask nothing of the caller.
type Service struct {
	db    *store.DB
	usage Usage
	runs  func(ctx context.Context, q store.Q, version string) (int, error)
}

// NewService returns a terraform version service.
func NewService(c Config) (*Service, error) {
	if c.DB == nil || c.Usage == nil {
		return nil, errors.New("toolversion: a database and a usage count are required")
	}
	return &Service{db: c.DB, usage: c.Usage, runs: c.Runs}, nil
}

const cols = `id, version, official, enabled, beta, deprecated, deprecated_reason, archs, created_at, updated_at`

func scan(sc store.Scanner) (*Version, error) {
	var v Version
	var reason sql.NullString
	var archs string
	var created, updated int64
	if err := sc.Scan(&v.ID, &v.Version, &v.Official, &v.Enabled, &v.Beta, &v.Deprecated, &reason, &archs, &created, &updated); err != nil {
		return nil, err
	}
	if reason.Valid {
		v.DeprecatedReason = &reason.String
	}
	if err := json.Unmarshal([]byte(archs), &v.Archs); err != nil {
		return nil, fmt.Errorf("decoding the builds of terraform version %s: %w", v.ID, err)
	}
	v.CreatedAt, v.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &v, nil
}

// withUsage fills the usage of vs, in one statement.
func (s *Service) withUsage(ctx context.Context, q store.Q, vs ...*Version) error {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Version
	}
	n, err := s.usage(ctx, q, names)
	if err != nil {
		return err
	}
	for _, v := range vs {
		v.Usage = n[v.Version]
	}
	return nil
}

// Filter selects versions in a list.
type Filter struct {
	// Version is exactly this version (filter[version]).
	Version string
	// Search is part of the version (search[version]).
	Search string
}

// List returns a page of the versions f selects, newest registration
// first, and how many it selects in all.
func (s *Service) List(ctx context.Context, f Filter, offset, limit int) ([]*Version, int, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, 0, err
	}
	where, args := "1 = 1", []any{}
	if f.Version != "" {
		where, args = where+" AND version = ?", append(args, f.Version)
	}
	if f.Search != "" {
		where, args = where+" AND version LIKE ?"+store.LikeEscape, append(args, "%"+store.EscapeLike(f.Search)+"%")
	}
	vs, total, err := store.Page(ctx, s.db, scan, cols, "terraform_versions", where, "created_at DESC, id DESC", offset, limit, args...)
	if err != nil {
		return nil, 0, err
	}
	if err := s.withUsage(ctx, s.db, vs...); err != nil {
		return nil, 0, err
	}
	return vs, total, nil
}

// load reads a version through q (locking its row inside a
// transaction); a 404 for what does not exist.
func load(ctx context.Context, q store.Q, id string, lock bool) (*Version, error) {
	if !core.HasPrefix(id, core.PrefixToolVersion) {
		return nil, core.NotFound("terraform version %q not found", id)
	}
	query := `SELECT ` + cols + ` FROM terraform_versions WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	v, err := scan(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("terraform version %q not found", id)
	}
	return v, err
}

// Get returns a version with its usage.
func (s *Service) Get(ctx context.Context, id string) (*Version, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	v, err := load(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	return v, s.withUsage(ctx, s.db, v)
}

// taken is the refusal of a version registered twice.
func taken(version string) error {
	return core.Invalid("version %s is registered already: change that registration instead", version)
}

// Create registers a version: enabled, not official, beta or deprecated
// unless o says so.
func (s *Service) Create(ctx context.Context, o Options) (*Version, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	if o.Version == nil || *o.Version == "" {
		return nil, core.Invalid("version is required")
	}
	now := core.Now()
	v := &Version{ID: core.NewID(core.PrefixToolVersion), Enabled: true, CreatedAt: now, UpdatedAt: now}
	if err := o.apply(v); err != nil {
		return nil, err
	}
	archs, _ := json.Marshal(v.Archs)
	_, err := s.db.Exec(ctx, `INSERT INTO terraform_versions (id, version, official, enabled, beta, deprecated, deprecated_reason, archs, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.Version, v.Official, v.Enabled, v.Beta, v.Deprecated, v.DeprecatedReason, string(archs), core.Micros(now), core.Micros(now))
	if store.IsUniqueViolation(s.db, err) {
		return nil, taken(v.Version)
	}
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, v.ID)
}

// inUse refuses a change that would take version away from the
// workspaces that use it (counted through tx, under the version's row
// lock: a workspace set to it meanwhile waits for the lock and then
// counts).
func (s *Service) inUse(ctx context.Context, tx store.Q, version, change string) error {
	n, err := s.usage(ctx, tx, []string{version})
	if err != nil {
		return err
	}
	if n[version] == 0 {
		return s.runsOn(ctx, tx, version, change)
	}
	noun := "workspaces use"
	if n[version] == 1 {
		noun = "workspace uses"
	}
	return core.Invalid("terraform %s cannot be %s: %d %s it; set them to another version first (or disable it: workspaces on it keep it, and no other may choose it)", version, change, n[version], noun)
}

// runsOn refuses a change that would take version away from a run that
// has not ended: its plan ran with it, and its apply may need to install
// it on another runner.
func (s *Service) runsOn(ctx context.Context, tx store.Q, version, change string) error {
	if s.runs == nil {
		return nil
	}
	n, err := s.runs(ctx, tx, version)
	if err != nil || n == 0 {
		return err
	}
	noun := "runs that have not ended use"
	if n == 1 {
		noun = "run that has not ended uses"
	}
	return core.Invalid("terraform %s cannot be %s: %d %s it (its apply may still need to install it); try again when they have ended", version, change, n, noun)
}

// Update changes a version. A version in use keeps its version number.
func (s *Service) Update(ctx context.Context, id string, o Options) (*Version, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		v, err := load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		was := v.Version
		if err := o.apply(v); err != nil {
			return err
		}
		if v.Version != was {
			if err := s.inUse(ctx, tx, was, "renamed"); err != nil {
				return err
			}
		}
		archs, _ := json.Marshal(v.Archs)
		_, err = tx.Exec(ctx, `UPDATE terraform_versions SET version = ?, official = ?, enabled = ?, beta = ?, deprecated = ?, deprecated_reason = ?, archs = ?, updated_at = ? WHERE id = ?`,
			v.Version, v.Official, v.Enabled, v.Beta, v.Deprecated, v.DeprecatedReason, string(archs), core.Micros(core.Now()), id)
		if store.IsUniqueViolation(tx, err) {
			return taken(v.Version)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// Delete removes a version no workspace uses.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		v, err := load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := s.inUse(ctx, tx, v.Version, "deleted"); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM terraform_versions WHERE id = ?`, id)
		return err
	})
}

// CheckSelectable refuses a version registered but disabled, or marked
// beta when beta is false (the workspace's organization has no access to
// beta tools), for a workspace about to be set to it
// (workspace.TerraformVersions). Inside q's transaction the version's row
// stays as read until it ends.
func (s *Service) CheckSelectable(ctx context.Context, q store.Q, version string, beta bool) error {
	version = asRegistered(version)
	if !versionRE.MatchString(version) {
		return nil // "latest", a constraint: nothing registered is named so
	}
	var enabled, isBeta bool
	err := q.QueryRow(ctx, `SELECT enabled, beta FROM terraform_versions WHERE version = ?`+store.ForShare(q), version).Scan(&enabled, &isBeta)
	if store.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if enabled && isBeta && !beta {
		return betaRefused(version)
	}
	if enabled {
		return nil
	}
	return core.Invalid("terraform %s is disabled on this site: a site admin has turned it off, so no workspace may choose it; choose another version", version)
}

// Selectable lists the registered versions a workspace may be set to
// (CheckSelectable's rule: enabled, and not beta unless beta), newest
// first, deprecated ones last: the choices a workspace's settings offer.
// Version names are no secret: anyone who may change a workspace's
// version is told them, as HCP Terraform's settings list them.
func (s *Service) Selectable(ctx context.Context, beta bool) ([]*Version, error) {
	vs, err := s.enabled(ctx, beta)
	if err != nil {
		return nil, err
	}
	parsed := map[*Version]*goversion.Version{}
	for _, v := range vs {
		parsed[v], _ = goversion.NewVersion(v.Version) // nil for a row written around the API
	}
	slices.SortStableFunc(vs, func(a, b *Version) int {
		if a.Deprecated != b.Deprecated {
			if a.Deprecated {
				return 1
			}
			return -1
		}
		pa, pb := parsed[a], parsed[b]
		if pa == nil || pb == nil {
			return strings.Compare(b.Version, a.Version)
		}
		return pb.Compare(pa)
	})
	return vs, nil
}

// enabled lists the enabled versions (and, unless withBeta, not those
// marked beta), in no order.
func (s *Service) enabled(ctx context.Context, withBeta bool) ([]*Version, error) {
	query, args := `SELECT `+cols+` FROM terraform_versions WHERE enabled = ?`, []any{true}
	if !withBeta {
		query, args = query+` AND beta = ?`, append(args, false)
	}
	return store.All(ctx, s.db, scan, query, args...)
}

// Release returns what a runner needs to install version when it lacks
// it: the builds of the version, registered and enabled (nil otherwise).
//
// For a version constraint ("~> 1.9.0") it is the newest registered and
// enabled version the constraint allows, as HCP Terraform runs the newest
// version a workspace's constraint allows: the runner finds or installs
// that one (engine.FindOrInstall), and with none registered the newest
// it has that the constraint allows.
//
// For "latest" (and no version) it is the newest registered, enabled
// release that is neither a prerelease nor marked beta, as HCP Terraform's
// "latest" is the newest version on its list; the runner uses the
// terraform on its PATH instead when that is as new.
//
// beta says the run's organization has access to beta tools: without it
// a constraint picks no version registered as beta, and a beta version
// named is refused (the organization lost the access after a workspace
// chose it: CheckSelectable refuses it to a workspace).
func (s *Service) Release(ctx context.Context, version string, beta bool) (*engine.Release, error) {
	if strings.HasPrefix(strings.TrimSpace(version), "tofu") {
		return nil, nil // only terraform is registered
	}
	if c := engine.Constraint(version); c != nil {
		return s.newestAllowed(ctx, c, beta)
	}
	if v := strings.TrimSpace(version); v == "" || v == "latest" {
		return s.newestAllowed(ctx, anyRelease, false)
	}
	version = asRegistered(version)
	if !versionRE.MatchString(version) {
		return nil, nil
	}
	v, err := scan(s.db.QueryRow(ctx, `SELECT `+cols+` FROM terraform_versions WHERE version = ? AND enabled = ?`, version, true))
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if v.Beta && !beta {
		return nil, betaRefused(v.Version)
	}
	return release(v), nil
}

// betaRefused is the error of a beta version asked for by an organization
// without access to beta tools.
func betaRefused(version string) error {
	return core.Invalid("terraform %s is a beta version, and this organization has no access to beta tools: a site admin gives it (access-beta-tools), or choose another version", version)
}

// anyRelease allows every version but prereleases (go-version's rule for
// a constraint that names none).
var anyRelease = goversion.MustConstraints(goversion.NewConstraint(">= 0.0.0"))

// newestAllowed is the release of the newest enabled version c allows
// (and, unless withBeta, not marked beta), nil for none.
func (s *Service) newestAllowed(ctx context.Context, c goversion.Constraints, withBeta bool) (*engine.Release, error) {
	vs, err := s.enabled(ctx, withBeta)
	if err != nil {
		return nil, err
	}
	var best *Version
	var bestV *goversion.Version
	for _, v := range vs {
		pv, err := goversion.NewVersion(v.Version)
		if err != nil || !c.Check(pv) || (bestV != nil && !pv.GreaterThan(bestV)) {
			continue
		}
		best, bestV = v, pv
	}
	if best == nil {
		return nil, nil
	}
	return release(best), nil
}

// release is what a runner needs of a registered version to install it.
func release(v *Version) *engine.Release {
	rel := &engine.Release{Name: "terraform", Version: v.Version}
	for _, a := range v.Archs {
		rel.Builds = append(rel.Builds, engine.Build{OS: a.OS, Arch: a.Arch, URL: a.URL, SHA256: a.SHA})
	}
	return rel
}

// asRegistered is a version as a workspace names it, as the registered
// versions are named: a leading "v" dropped (workspace.UsedVersion, which
// the usage counts by).
func asRegistered(v string) string { return strings.TrimPrefix(strings.TrimSpace(v), "v") }
