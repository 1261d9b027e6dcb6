package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	goversion "github.com/hashicorp/go-version"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// Defaults for Options.
const (
	DefaultMaxUploadBytes = 100 << 20
	DefaultUploadURLTTL   = 2 * time.Hour
	DefaultDownloadURLTTL = 10 * time.Minute
)

// Options configure a Service; zero values take the defaults.
type Options struct {
	MaxUploadBytes   int64
	MaxUnpackedBytes int64
	UploadURLTTL     time.Duration
	DownloadURLTTL   time.Duration
	TempDir          string
	Logger           *slog.Logger
}

// Service manages registry modules and their versions.
type Service struct {
	db     *store.DB
	blobs  *blob.Store
	signer *blob.Signer
	orgs   Organizations
	opts   Options

	// NoCode, when wired, fills the no-code-modules relationship.
	NoCode NoCodeModules
	// OnNoCodeFlag, when wired, runs in the transaction that sets the
	// deprecated no-code attribute (create or update): the no-code domain
	// enables (or disables) the module's no-code module.
	OnNoCodeFlag func(ctx context.Context, q store.Q, m *Module, enabled bool) error
	// OnDelete hooks run in the transaction deleting a module.
	OnDelete []DeleteHook
	// VCS, when wired, publishes modules from repositories (CreateVCS).
	VCS VCS
	// Pools, when wired, checks and keeps the agent pool a module's tests
	// run on (test-config agent-execution-mode "agent"); without it such a
	// test-config is refused.
	Pools Pools
}

// Pools is the agent pool domain as modules see it.
type Pools interface {
	// KeepPool keeps pool id of organization org from being deleted
	// until q's transaction ends; core.Invalid when org has no such pool.
	KeepPool(ctx context.Context, q store.Q, org, id string) error
}

// NewService returns a registry service.
func NewService(db *store.DB, blobs *blob.Store, signer *blob.Signer, orgs Organizations, opts Options) *Service {
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if opts.MaxUnpackedBytes <= 0 {
		opts.MaxUnpackedBytes = slug.DefaultMaxBytes
	}
	if opts.UploadURLTTL <= 0 {
		opts.UploadURLTTL = DefaultUploadURLTTL
	}
	if opts.DownloadURLTTL <= 0 {
		opts.DownloadURLTTL = DefaultDownloadURLTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Service{db: db, blobs: blobs, signer: signer, orgs: orgs, opts: opts}
}

var (
	// The registry protocol's name and provider syntax (terraform's regsrc).
	nameRe      = core.NewPattern(`^[0-9A-Za-z](?:[0-9A-Za-z_-]*[0-9A-Za-z])?$`, 1, 64)
	providerRe  = core.NewPattern(`^[0-9a-z]+$`, 1, 64)
	namespaceRe = core.NewPattern(`^[0-9A-Za-z](?:[0-9A-Za-z_-]*[0-9A-Za-z])?$`, 1, 64)
	// Semantic versioning 2.0.0, without a leading "v".
	semverRe = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
)

// UploadPath is the inner capability path of a version's upload URL
// (go-tfe's tests expect "/object/" in it, as HCP's archivist URLs have).
func UploadPath(versionID string) string {
	return "/object/registry-module-versions/" + versionID + "/upload"
}

// DownloadPath is the inner capability path serving a version's archive.
// It names the archive's digest, so a link never serves a replaced upload,
// and ends in .tar.gz, which tells go-getter how to unpack it.
func DownloadPath(versionID, sha string) string {
	return "/object/registry-module-versions/" + versionID + "/" + sha + ".tar.gz"
}

// UploadURL returns a fresh capability URL to PUT the version's archive to.
func (s *Service) UploadURL(v *Version) string {
	return s.signer.URL(http.MethodPut, UploadPath(v.ID), s.opts.UploadURLTTL)
}

// DownloadURL returns a short-lived capability URL for an ok version's archive.
func (s *Service) DownloadURL(v *Version) string {
	return s.signer.URL(http.MethodGet, DownloadPath(v.ID, v.SHA256), s.opts.DownloadURLTTL)
}

// access checks the caller may see the organization (404 otherwise).
func access(ctx context.Context, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return core.NotFound("organization %q not found", org)
		}
		return err
	}
	return nil
}

// fetch decides a request of the module registry protocol (terraform init
// listing and downloading a private module of org): the model's
// OrgReadModules, which members, organization tokens and run tokens
// (terraform init inside a run) have, and those of the organizations org
// shares its modules with. Every kind of token authenticates on the
// protocol's routes; agent and task result tokens, which reach only their
// job protocol or their run's plan and configuration, are refused. A
// member of a disabled org, or a user token where org refuses them, is
// refused first (the organization check every service makes; that the
// caller is no member is left to the model).
func fetch(ctx context.Context, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil && core.KindOf(err) != core.KindNotFound {
		return err
	}
	return authz.Allows(ctx, authz.OrgReadModules, authz.Resource{Organization: org})
}

// manage checks the caller may publish and delete modules: owners.
func manage(ctx context.Context, org string) error {
	if err := access(ctx, org); err != nil {
		return err
	}
	if authz.Allows(ctx, authz.OrgManageModules, authz.Resource{Organization: org}) != nil {
		return core.Forbidden("you may not manage registry modules of organization %q", org)
	}
	return nil
}

// CanManage reports whether the caller may manage the organization's modules.
func CanManage(ctx context.Context, org string) bool { return manage(ctx, org) == nil }

func validName(name, provider string) error {
	if name == "" {
		return core.Invalid("name is required")
	}
	if !nameRe.MatchString(name) {
		return core.Invalid("name %q is invalid: use letters, digits, '-' and '_' (at most 64), starting and ending with a letter or digit", name)
	}
	if provider == "" {
		return core.Invalid("provider is required")
	}
	if !providerRe.MatchString(provider) {
		return core.Invalid("provider %q is invalid: use lowercase letters and digits (at most 64)", provider)
	}
	return nil
}

// ValidVersion refuses versions that are not semantic versions.
func ValidVersion(v string) error {
	if v == "" {
		return core.Invalid("version is required")
	}
	if !semverRe.MatchString(v) {
		return core.Invalid("version %q is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])", v)
	}
	return nil
}

// Create adds a module to the organization's registry. Private modules
// (the default) take the organization as namespace; public ones reference a
// module of the public registry and need its namespace.
func (s *Service) Create(ctx context.Context, org string, opts CreateOptions) (*Module, error) {
	if err := manage(ctx, org); err != nil {
		return nil, err
	}
	if err := s.orgs.Exists(ctx, org); err != nil {
		return nil, err
	}
	m := &Module{ID: core.NewID(PrefixModule), Organization: org, RegistryName: RegistryPrivate}
	if opts.Name != nil {
		m.Name = *opts.Name
	}
	if opts.Provider != nil {
		m.Provider = *opts.Provider
	}
	if err := validName(m.Name, m.Provider); err != nil {
		return nil, err
	}
	if opts.RegistryName != nil && *opts.RegistryName != "" {
		m.RegistryName = *opts.RegistryName
	}
	ns := ""
	if opts.Namespace != nil {
		ns = *opts.Namespace
	}
	switch m.RegistryName {
	case RegistryPrivate:
		if ns != "" && ns != org {
			return nil, core.Invalid("namespace is only allowed for public modules: a private module's namespace is its organization")
		}
		m.Namespace = org
	case RegistryPublic:
		if ns == "" {
			return nil, core.Invalid("namespace is required for public modules")
		}
		if !namespaceRe.MatchString(ns) {
			return nil, core.Invalid("namespace %q is invalid", ns)
		}
		m.Namespace = ns
	default:
		return nil, core.Invalid("registry-name must be %q or %q, not %q", RegistryPrivate, RegistryPublic, m.RegistryName)
	}
	if opts.NoCode != nil {
		m.NoCode = *opts.NoCode
	}
	tc, err := s.testConfig(opts.TestConfig, m)
	if err != nil {
		return nil, err
	}
	if tc.enable != nil && *tc.enable {
		m.TestsEnabled = true
	}
	if tc.pool != nil {
		m.TestsAgentPoolID = *tc.pool
	}
	now := core.Now()
	m.CreatedAt, m.UpdatedAt = now, now
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if err := s.keepTestPool(ctx, tx, m); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO registry_modules (id, organization_name, registry_name, namespace, name, provider, no_code, tests_enabled, tests_agent_pool_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.Organization, m.RegistryName, m.Namespace, m.Name, m.Provider, m.NoCode, m.TestsEnabled, m.TestsAgentPoolID, core.Micros(now), core.Micros(now))
		if err != nil || !m.NoCode || s.OnNoCodeFlag == nil {
			return err
		}
		return s.OnNoCodeFlag(ctx, tx, m, true)
	})
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Conflict("module %s/%s/%s already exists in the %s registry of %q", m.Namespace, m.Name, m.Provider, m.RegistryName, org)
	}
	if err != nil {
		return nil, fmt.Errorf("creating registry module: %w", err)
	}
	m.Versions = []VersionSummary{}
	return m, nil
}

const moduleCols = `id, organization_name, registry_name, namespace, name, provider, no_code, tests_enabled, tests_agent_pool_id, tag_bindings, vcs_repo, vcs_status, vcs_error, created_at, updated_at`

func scanModule(sc interface{ Scan(...any) error }) (*Module, error) {
	var m Module
	var created, updated int64
	var tags, repo string
	if err := sc.Scan(&m.ID, &m.Organization, &m.RegistryName, &m.Namespace, &m.Name, &m.Provider, &m.NoCode, &m.TestsEnabled, &m.TestsAgentPoolID, &tags, &repo, &m.VCSStatus, &m.VCSError,
		&created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tags), &m.TagBindings); err != nil {
		return nil, fmt.Errorf("decoding tag bindings of module %s: %w", m.ID, err)
	}
	if repo != "" {
		m.VCSRepo = &vcsrepo.Repo{}
		if err := json.Unmarshal([]byte(repo), m.VCSRepo); err != nil {
			return nil, fmt.Errorf("decoding the vcs-repo of module %s: %w", m.ID, err)
		}
	}
	m.CreatedAt, m.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &m, nil
}

func (s *Service) queryModules(ctx context.Context, q store.Q, where string, args ...any) ([]*Module, error) {
	rows, err := q.Query(ctx, `SELECT `+moduleCols+` FROM registry_modules WHERE `+where+` ORDER BY name, provider, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Module{}
	for rows.Next() {
		m, err := scanModule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// fillVersions loads the version statuses of modules, newest first.
func (s *Service) fillVersions(ctx context.Context, q store.Q, mods []*Module) error {
	if len(mods) == 0 {
		return nil
	}
	byID := map[string]*Module{}
	ph := make([]string, len(mods))
	args := make([]any, len(mods))
	for i, m := range mods {
		m.Versions = []VersionSummary{}
		byID[m.ID] = m
		ph[i], args[i] = "?", m.ID
	}
	rows, err := q.Query(ctx, `SELECT module_id, version, status, error FROM registry_module_versions WHERE module_id IN (`+strings.Join(ph, ",")+`)`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v VersionSummary
		var st string
		if err := rows.Scan(&id, &v.Version, &st, &v.Error); err != nil {
			return err
		}
		v.Status = VersionStatus(st)
		byID[id].Versions = append(byID[id].Versions, v)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range mods {
		sort.SliceStable(m.Versions, func(i, j int) bool { return versionLess(m.Versions[j].Version, m.Versions[i].Version) })
	}
	return nil
}

// versionLess orders semantic versions (strings as a fallback).
func versionLess(a, b string) bool {
	va, ea := goversion.NewSemver(a)
	vb, eb := goversion.NewSemver(b)
	if ea != nil || eb != nil {
		return a < b
	}
	if c := va.Compare(vb); c != 0 {
		return c < 0
	}
	return a < b
}

// GetByID returns a module the caller may see.
func (s *Service) GetByID(ctx context.Context, id string) (*Module, error) {
	if !core.HasPrefix(id, PrefixModule) {
		return nil, core.NotFound("registry module %q not found", id)
	}
	m, err := s.SystemModule(ctx, id)
	if err != nil {
		return nil, err
	}
	if access(ctx, m.Organization) != nil {
		return nil, core.NotFound("registry module %q not found", id)
	}
	return m, nil
}

// Get returns a module by its address in an organization's registry.
func (s *Service) Get(ctx context.Context, org, registryName, namespace, name, provider string) (*Module, error) {
	if err := access(ctx, org); err != nil {
		return nil, err
	}
	return s.get(ctx, org, registryName, namespace, name, provider)
}

// get is Get for a caller whose access was decided already (the module
// registry protocol's fetch, which a consumer of the organization's
// modules passes too).
func (s *Service) get(ctx context.Context, org, registryName, namespace, name, provider string) (*Module, error) {
	mods, err := s.queryModules(ctx, s.db, `organization_name = ? AND registry_name = ? AND namespace = ? AND name = ? AND provider = ?`, org, registryName, namespace, name, provider)
	if err != nil {
		return nil, err
	}
	if len(mods) == 0 {
		return nil, core.NotFound("registry module %s/%s/%s not found in the %s registry of %q", namespace, name, provider, registryName, org)
	}
	return mods[0], s.fillVersions(ctx, s.db, mods)
}

// GetPrivate returns a private module of the organization.
func (s *Service) GetPrivate(ctx context.Context, org, name, provider string) (*Module, error) {
	return s.Get(ctx, org, RegistryPrivate, org, name, provider)
}

// ListOptions filter List (go-tfe's RegistryModuleListOptions).
type ListOptions struct {
	// Search matches name, namespace or provider (case-insensitive substring).
	Search       string
	Provider     string
	RegistryName string
	// Namespace filters by namespace (filter[organization_name]).
	Namespace string
}

// List returns the organization's modules matching opts.
func (s *Service) List(ctx context.Context, org string, opts ListOptions) ([]*Module, error) {
	mods, _, err := s.ListPage(ctx, org, opts, 0, -1)
	return mods, err
}

// ListPage returns at most limit (all when negative) of the modules List
// returns, from offset on, and how many match in all: filtered and paged
// in the store, with the page's versions read in one statement.
func (s *Service) ListPage(ctx context.Context, org string, opts ListOptions, offset, limit int) ([]*Module, int, error) {
	if err := access(ctx, org); err != nil {
		return nil, 0, err
	}
	if err := s.orgs.Exists(ctx, org); err != nil {
		return nil, 0, err
	}
	where := `organization_name = ?`
	args := []any{org}
	if q := strings.ToLower(opts.Search); q != "" {
		pattern := "%" + store.EscapeLike(q) + "%"
		where += ` AND (LOWER(name) LIKE ?` + store.LikeEscape + ` OR LOWER(namespace) LIKE ?` + store.LikeEscape + ` OR LOWER(provider) LIKE ?` + store.LikeEscape + `)`
		args = append(args, pattern, pattern, pattern)
	}
	for _, f := range []struct{ col, v string }{{"provider", opts.Provider}, {"registry_name", opts.RegistryName}, {"namespace", opts.Namespace}} {
		if f.v != "" {
			where += ` AND ` + f.col + ` = ?`
			args = append(args, f.v)
		}
	}
	out, total, err := store.Page(ctx, s.db, scanModule, moduleCols, "registry_modules", where, `name, provider, id`, offset, limit, args...)
	if err != nil {
		return nil, 0, err
	}
	return out, total, s.fillVersions(ctx, s.db, out)
}

// Update changes a module's settings (no-code).
func (s *Service) Update(ctx context.Context, org, registryName, namespace, name, provider string, opts UpdateOptions) (*Module, error) {
	m, err := s.Get(ctx, org, registryName, namespace, name, provider)
	if err != nil {
		return nil, err
	}
	if err := manage(ctx, org); err != nil {
		return nil, err
	}
	if len(opts.VCSRepo) > 0 {
		if string(opts.VCSRepo) == "null" {
			return nil, core.Invalid("vcs-repo: a module cannot be disconnected from its repository: delete it and publish it again")
		}
		if err := s.updateVCS(ctx, m, opts.VCSRepo); err != nil {
			return nil, err
		}
	}
	tc, err := s.testConfig(opts.TestConfig, m)
	if err != nil {
		return nil, err
	}
	if tc.changes(m) {
		next := *m
		if tc.enable != nil {
			next.TestsEnabled = *tc.enable
		}
		if tc.pool != nil {
			next.TestsAgentPoolID = *tc.pool
		}
		err := s.db.Tx(ctx, func(tx *store.Tx) error {
			if err := s.keepTestPool(ctx, tx, &next); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE registry_modules SET tests_enabled = ?, tests_agent_pool_id = ?, updated_at = ? WHERE id = ?`,
				next.TestsEnabled, next.TestsAgentPoolID, core.Micros(core.Now()), m.ID)
			return err
		})
		if err != nil {
			return nil, err
		}
		m.TestsEnabled, m.TestsAgentPoolID = next.TestsEnabled, next.TestsAgentPoolID
	}
	if opts.NoCode != nil {
		err := s.db.Tx(ctx, func(tx *store.Tx) error {
			if err := SetNoCode(ctx, tx, m.ID, *opts.NoCode); err != nil {
				return err
			}
			if s.OnNoCodeFlag != nil {
				return s.OnNoCodeFlag(ctx, tx, m, *opts.NoCode)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		m.NoCode = *opts.NoCode
	}
	if opts.TagBindings != nil {
		tags := []TagBinding{}
		seen := map[string]bool{}
		for _, tb := range *opts.TagBindings {
			if tb.Key == "" {
				return nil, core.Invalid("tag binding key is required")
			}
			if seen[tb.Key] {
				return nil, core.Invalid("tag binding key %q is given twice", tb.Key)
			}
			seen[tb.Key] = true
			tags = append(tags, TagBinding{ID: core.NewID(core.PrefixTagBinding), Key: tb.Key, Value: tb.Value})
		}
		b, _ := json.Marshal(tags)
		if _, err := s.db.Exec(ctx, `UPDATE registry_modules SET tag_bindings = ?, updated_at = ? WHERE id = ?`, string(b), core.Micros(core.Now()), m.ID); err != nil {
			return nil, err
		}
		m.TagBindings = tags
	}
	return m, nil
}

// SetNoCode records a module's no-code flag (the no-code domain calls it
// in its own transaction when it enables or deletes a no-code module).
func SetNoCode(ctx context.Context, q store.Q, moduleID string, enabled bool) error {
	_, err := q.Exec(ctx, `UPDATE registry_modules SET no_code = ?, updated_at = ? WHERE id = ?`, enabled, core.Micros(core.Now()), moduleID)
	return err
}

// Selector names what Delete removes. Empty RegistryName and Namespace
// match any (the legacy delete endpoints); Provider narrows to one module
// and Version to one of its versions.
type Selector struct {
	RegistryName, Namespace, Name, Provider, Version string
}

// Delete removes modules, one provider of a module, or one version.
func (s *Service) Delete(ctx context.Context, org string, sel Selector) error {
	// Asked before the transaction: the model may read the caller's
	// teams, which inside it would take a second connection.
	if err := manage(ctx, org); err != nil {
		return err
	}
	if sel.RegistryName != "" && sel.RegistryName != RegistryPrivate && sel.RegistryName != RegistryPublic {
		return core.NotFound("registry %q not found", sel.RegistryName)
	}
	where := []string{"organization_name = ?", "name = ?"}
	args := []any{org, sel.Name}
	if sel.RegistryName != "" {
		where, args = append(where, "registry_name = ?"), append(args, sel.RegistryName)
	}
	if sel.Namespace != "" {
		where, args = append(where, "namespace = ?"), append(args, sel.Namespace)
	}
	if sel.Provider != "" {
		where, args = append(where, "provider = ?"), append(args, sel.Provider)
	}
	var garbage []string
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		mods, err := s.queryModules(ctx, tx, strings.Join(where, " AND "), args...)
		if err != nil {
			return err
		}
		if len(mods) == 0 {
			return core.NotFound("registry module %q not found in %q", sel.Name, org)
		}
		if sel.Version != "" {
			if len(mods) != 1 {
				return core.NotFound("name the module's provider to delete version %s", sel.Version)
			}
			var key string
			err := tx.QueryRow(ctx, `SELECT blob_key FROM registry_module_versions WHERE module_id = ? AND version = ?`, mods[0].ID, sel.Version).Scan(&key)
			if store.IsNoRows(err) {
				return core.NotFound("version %s of registry module %s/%s not found", sel.Version, sel.Name, mods[0].Provider)
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM registry_module_versions WHERE module_id = ? AND version = ?`, mods[0].ID, sel.Version); err != nil {
				return err
			}
			garbage = append(garbage, key)
			return addGarbage(ctx, tx, key, core.Now())
		}
		for _, m := range mods {
			keys, err := store.Strings(ctx, tx, `SELECT blob_key FROM registry_module_versions WHERE module_id = ? AND blob_key <> ''`, m.ID)
			if err != nil {
				return err
			}
			garbage = append(garbage, keys...)
			if _, err := tx.Exec(ctx, `INSERT INTO registry_module_garbage (blob_key, not_before) SELECT blob_key, ? FROM registry_module_versions WHERE module_id = ? AND blob_key <> '' ON CONFLICT (blob_key) DO NOTHING`,
				core.Micros(core.Now()), m.ID); err != nil {
				return err
			}
			for _, h := range s.OnDelete {
				if err := h(ctx, tx, m); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM registry_module_versions WHERE module_id = ?`, m.ID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM registry_modules WHERE id = ?`, m.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range garbage {
		s.deleteBlob(ctx, k)
	}
	return nil
}

// DeleteOrganizationModules records the archives of an organization's
// module versions for deletion, inside the transaction that deletes the
// organization (whose modules go by cascade).
func DeleteOrganizationModules(ctx context.Context, q store.Q, org string) error {
	_, err := q.Exec(ctx, `INSERT INTO registry_module_garbage (blob_key, not_before) SELECT v.blob_key, ? FROM registry_module_versions v JOIN registry_modules m ON m.id = v.module_id WHERE m.organization_name = ? AND v.blob_key <> '' ON CONFLICT (blob_key) DO NOTHING`,
		core.Micros(core.Now()), org)
	return err
}

// RenameOrganizationModules gives an organization's private modules its
// new name as their namespace, inside the transaction that renames it
// (organization_name follows by cascade): terraform then finds them as
// HOST/NEW/NAME/PROVIDER, and the API under the new namespace.
func RenameOrganizationModules(ctx context.Context, q store.Q, from, to string) error {
	_, err := q.Exec(ctx, `UPDATE registry_modules SET namespace = ? WHERE organization_name = ? AND registry_name = ? AND namespace = ?`,
		to, to, RegistryPrivate, from)
	return err
}

// stagingGrace is how long an upload in progress may take before a sweep
// may delete its half-written blob.
const stagingGrace = 24 * time.Hour

func addGarbage(ctx context.Context, q store.Q, key string, notBefore time.Time) error {
	return blob.Garbage{Table: "registry_module_garbage"}.Add(ctx, q, key, notBefore)
}

// deleteBlob deletes an archive no version points at, and its garbage
// row; on failure the row stays for a later Sweep.
func (s *Service) deleteBlob(ctx context.Context, key string) { s.garbage().Collect(ctx, key) }

// Sweep deletes the archives of deleted versions and of uploads abandoned
// by a crash. It returns how many it deleted.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	return s.garbage().Sweep(ctx)
}

// Ledger is the domain's ledger of archives awaiting deletion, for the
// server's sweep loop (blob.RunAll).
func (s *Service) Ledger() blob.Garbage { return s.garbage() }

// CreateVersion adds a pending version to a private module; its archive is
// then PUT to UploadURL. A module publishing from a branch fetches the
// version from commit sha instead ("" the branch's head); one publishing
// from tags takes no version through the API.
func (s *Service) CreateVersion(ctx context.Context, org, name, provider, version, sha string) (*Version, error) {
	if err := ValidVersion(version); err != nil {
		return nil, err
	}
	m, err := s.GetPrivate(ctx, org, name, provider)
	if err != nil {
		return nil, err
	}
	if err := manage(ctx, org); err != nil {
		return nil, err
	}
	now := core.Now()
	v := &Version{ID: core.NewID(PrefixModuleVersion), ModuleID: m.ID, Version: version, Status: VersionPending, Source: SourceAPI,
		CommitSHA: sha, CreatedAt: now, UpdatedAt: now}
	switch {
	case m.VCSRepo != nil && m.VCSRepo.Tags:
		return nil, core.Invalid("module %s/%s publishes a version for each version tag pushed to %s: push a tag (or switch the module to a branch)",
			name, provider, m.VCSRepo.Identifier)
	case m.VCSRepo != nil:
		v.Source = m.VCSRepo.ServiceProvider
	case sha != "":
		return nil, core.Invalid("commit-sha is for modules published from a branch: this module's versions are uploaded")
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO registry_module_versions (id, module_id, version, status, source, commit_sha, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			v.ID, v.ModuleID, v.Version, string(v.Status), v.Source, v.CommitSHA, core.Micros(now), core.Micros(now)); err != nil || m.VCSRepo == nil {
			return err
		}
		return s.VCS.PublishVersion(ctx, tx, m.ID, version, sha)
	})
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Conflict("version %s of module %s/%s/%s already exists", version, org, name, provider)
	}
	if err != nil {
		return nil, fmt.Errorf("creating module version: %w", err)
	}
	return v, nil
}

const versionCols = `id, module_id, version, status, error, blob_key, sha256, size, inspection, source, commit_sha, created_at, updated_at`

// SourceAPI is the source of an uploaded version.
const SourceAPI = "tfe-api"

func scanVersion(sc interface{ Scan(...any) error }) (*Version, error) {
	var v Version
	var st, insp string
	var created, updated int64
	if err := sc.Scan(&v.ID, &v.ModuleID, &v.Version, &st, &v.Error, &v.blobKey, &v.SHA256, &v.Size, &insp, &v.Source, &v.CommitSHA, &created, &updated); err != nil {
		return nil, err
	}
	v.Status = VersionStatus(st)
	if insp != "" {
		v.Inspection = &Inspection{}
		if err := json.Unmarshal([]byte(insp), v.Inspection); err != nil {
			return nil, fmt.Errorf("decoding inspection of module version %s: %w", v.ID, err)
		}
	}
	v.CreatedAt, v.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &v, nil
}

func lookupVersion(ctx context.Context, q store.Q, id string, lock bool) (*Version, error) {
	query := `SELECT ` + versionCols + ` FROM registry_module_versions WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	v, err := scanVersion(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("registry module version %q not found", id)
	}
	return v, err
}

func (s *Service) versions(ctx context.Context, moduleID string) ([]*Version, error) {
	rows, err := s.db.Query(ctx, `SELECT `+versionCols+` FROM registry_module_versions WHERE module_id = ?`, moduleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Version{}
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return versionLess(out[j].Version, out[i].Version) })
	return out, nil
}

// VersionReadme returns the README of version v of private module m (as
// Versions or ReadVersion returned them): "" when it has none.
func (s *Service) VersionReadme(ctx context.Context, m *Module, v *Version) (string, error) {
	if err := access(ctx, m.Organization); err != nil {
		return "", err
	}
	return s.readme(ctx, m, v)
}

// readme is VersionReadme after access was decided.
func (s *Service) readme(ctx context.Context, m *Module, v *Version) (string, error) {
	var readme string
	err := s.db.QueryRow(ctx, `SELECT readme FROM registry_module_versions WHERE id = ? AND module_id = ?`, v.ID, m.ID).Scan(&readme)
	if store.IsNoRows(err) {
		return "", core.NotFound("version %s of module %s/%s/%s not found", v.Version, m.Organization, m.Name, m.Provider)
	}
	return readme, err
}

// Versions returns a private module's versions (newest first) and the module.
func (s *Service) Versions(ctx context.Context, org, name, provider string) (*Module, []*Version, error) {
	if err := access(ctx, org); err != nil {
		return nil, nil, err
	}
	return s.fetchVersions(ctx, org, name, provider)
}

// fetchVersions is Versions after fetch decided access.
func (s *Service) fetchVersions(ctx context.Context, org, name, provider string) (*Module, []*Version, error) {
	m, err := s.get(ctx, org, RegistryPrivate, org, name, provider)
	if err != nil {
		return nil, nil, err
	}
	vs, err := s.versions(ctx, m.ID)
	return m, vs, err
}

// ReadVersion returns one version of a private module. An empty version
// (or "latest") is the newest ok version, preferring releases to
// prereleases.
func (s *Service) ReadVersion(ctx context.Context, org, name, provider, version string) (*Module, *Version, error) {
	if err := access(ctx, org); err != nil {
		return nil, nil, err
	}
	return s.readVersion(ctx, org, name, provider, version)
}

// readVersion is ReadVersion after access was decided.
func (s *Service) readVersion(ctx context.Context, org, name, provider, version string) (*Module, *Version, error) {
	m, vs, err := s.fetchVersions(ctx, org, name, provider)
	if err != nil {
		return nil, nil, err
	}
	v, err := ChooseVersion(m, vs, version)
	if err != nil {
		return nil, nil, err
	}
	return m, v, nil
}

// ChooseVersion picks version of module m from its versions vs (as
// Versions returns them, newest first): "" or "latest" is the newest ok
// release, else the newest ok prerelease.
func ChooseVersion(m *Module, vs []*Version, version string) (*Version, error) {
	if version == "" || version == "latest" {
		var pre *Version
		for _, v := range vs {
			if v.Status != VersionOK {
				continue
			}
			if sv, err := goversion.NewSemver(v.Version); err == nil && sv.Prerelease() != "" {
				if pre == nil {
					pre = v
				}
				continue
			}
			return v, nil
		}
		if pre != nil {
			return pre, nil
		}
		return nil, core.NotFound("module %s/%s/%s has no published version", m.Organization, m.Name, m.Provider)
	}
	for _, v := range vs {
		if v.Version == version {
			return v, nil
		}
	}
	return nil, core.NotFound("version %s of module %s/%s/%s not found", version, m.Organization, m.Name, m.Provider)
}

// published returns an ok version (404 for pending or failed ones).
func (s *Service) published(ctx context.Context, org, name, provider, version string) (*Module, *Version, error) {
	if err := access(ctx, org); err != nil {
		return nil, nil, err
	}
	return s.fetchPublished(ctx, org, name, provider, version)
}

// fetchPublished is published after fetch decided access.
func (s *Service) fetchPublished(ctx context.Context, org, name, provider, version string) (*Module, *Version, error) {
	m, v, err := s.readVersion(ctx, org, name, provider, version)
	if err != nil {
		return nil, nil, err
	}
	if v.Status != VersionOK || v.Inspection == nil {
		return nil, nil, core.NotFound("version %s of module %s/%s/%s is not published (status %s)", v.Version, org, name, provider, v.Status)
	}
	return m, v, nil
}

// VersionVariables returns the input variables of a published version of a
// private module, in declaration order ("" or "latest" = newest).
func (s *Service) VersionVariables(ctx context.Context, org, name, provider, version string) ([]Variable, error) {
	_, v, err := s.published(ctx, org, name, provider, version)
	if err != nil {
		return nil, err
	}
	return v.Inspection.Variables, nil
}

// VersionArchive returns the archive (tar.gz) of a published version of a
// private module, and the version.
func (s *Service) VersionArchive(ctx context.Context, org, name, provider, version string) ([]byte, *Version, error) {
	_, v, err := s.published(ctx, org, name, provider, version)
	if err != nil {
		return nil, nil, err
	}
	b, err := s.blobs.Get(ctx, v.blobKey)
	if err != nil {
		return nil, nil, fmt.Errorf("reading archive of module version %s: %w", v.ID, err)
	}
	return b, v, nil
}

// openArchive streams a version's archive if sha still names it (the
// capability download; no access check).
func (s *Service) openArchive(ctx context.Context, versionID, sha string) (io.ReadCloser, int64, error) {
	v, err := lookupVersion(ctx, s.db, versionID, false)
	if err != nil {
		return nil, 0, err
	}
	if v.Status != VersionOK || v.blobKey == "" || v.SHA256 != sha {
		return nil, 0, core.NotFound("module archive not found")
	}
	return s.blobs.Reader(ctx, v.blobKey)
}

// Upload stores, checks and inspects a version's archive. The caller has
// proved it may (a verified capability URL). A refused archive
// (core.KindInvalid or KindTooLarge) stores nothing; a pending version
// becomes reg_ingress_failed with the reason, an ok one stays as it was.
// Uploading again replaces the archive (and the inspection).
func (s *Service) Upload(ctx context.Context, versionID string, body io.Reader) (*Version, error) {
	v, err := lookupVersion(ctx, s.db, versionID, false)
	if err != nil {
		return nil, err
	}
	if v.Source != SourceAPI {
		return nil, core.Invalid("version %s is published from its module's repository (%s, commit %s): it takes no upload", v.Version, v.Source, v.CommitSHA)
	}
	return s.upload(ctx, v, body)
}

// upload is Upload of version v, whatever its source.
func (s *Service) upload(ctx context.Context, v *Version, body io.Reader) (*Version, error) {
	versionID := v.ID
	key := "registry-module-versions/" + v.ID + "/" + core.RandomString(16) + ".tar.gz"
	// Record the staging blob first so that a crash leaves it to a sweep.
	if err := addGarbage(ctx, s.db, key, core.Now().Add(stagingGrace)); err != nil {
		return nil, err
	}
	sum, size, insp, err := s.stage(ctx, key, body)
	if err != nil {
		s.deleteBlob(ctx, key)
		if k := core.KindOf(err); k == core.KindInvalid || k == core.KindTooLarge {
			s.markFailed(ctx, v.ID, err)
		}
		return nil, err
	}
	ib, _ := json.Marshal(insp)
	var old string
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := lookupVersion(ctx, tx, versionID, true)
		if err != nil {
			return err
		}
		old = cur.blobKey
		now := core.Now()
		if old != "" {
			if err := addGarbage(ctx, tx, old, now); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM registry_module_garbage WHERE blob_key = ?`, key); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE registry_module_versions SET status = ?, error = '', blob_key = ?, sha256 = ?, size = ?, inspection = ?, readme = ?, updated_at = ? WHERE id = ?`,
			string(VersionOK), key, sum, size, string(ib), insp.Readme, core.Micros(now), cur.ID)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE registry_modules SET updated_at = ? WHERE id = ?`, core.Micros(now), cur.ModuleID)
		return err
	})
	if err != nil {
		s.deleteBlob(ctx, key)
		return nil, err
	}
	s.deleteBlob(ctx, old)
	return lookupVersion(ctx, s.db, versionID, false)
}

func (s *Service) stage(ctx context.Context, key string, body io.Reader) (string, int64, *Inspection, error) {
	h := sha256.New()
	br := &bodyReader{r: body}
	size, err := s.blobs.PutReader(ctx, key, io.TeeReader(br, h), s.opts.MaxUploadBytes)
	if err != nil {
		if br.err != nil {
			// The client went away or sent a broken body: not our failure.
			return "", 0, nil, core.BadRequest("reading the upload: %v", br.err)
		}
		if core.KindOf(err) == core.KindTooLarge {
			return "", 0, nil, &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("module archive is larger than the limit of %d bytes", s.opts.MaxUploadBytes)}
		}
		return "", 0, nil, err
	}
	rc, _, err := s.blobs.Reader(ctx, key)
	if err != nil {
		return "", 0, nil, err
	}
	defer rc.Close()
	dir, err := os.MkdirTemp(s.opts.TempDir, "terrace-module-")
	if err != nil {
		return "", 0, nil, fmt.Errorf("creating a folder to check the archive: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := slug.Unpack(rc, dir, slug.Limits{MaxBytes: s.opts.MaxUnpackedBytes}); err != nil {
		if core.KindOf(err) == core.KindInvalid {
			return "", 0, nil, &core.Error{Kind: core.KindInvalid, Title: "invalid module archive", Detail: "module archive is invalid: " + err.Error()}
		}
		return "", 0, nil, fmt.Errorf("checking module archive: %w", err)
	}
	insp, err := inspect(dir)
	if err != nil {
		return "", 0, nil, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, insp, nil
}

func (s *Service) markFailed(ctx context.Context, id string, cause error) {
	msg := cause.Error()
	if ce, ok := cause.(*core.Error); ok && ce.Detail != "" {
		msg = ce.Detail
	}
	ctx = context.WithoutCancel(ctx)
	_, err := s.db.Exec(ctx, `UPDATE registry_module_versions SET status = ?, error = ?, updated_at = ? WHERE id = ? AND status <> ?`,
		string(VersionRegIngressFailed), msg, core.Micros(core.Now()), id, string(VersionOK))
	if err != nil {
		s.opts.Logger.ErrorContext(ctx, "recording a refused module upload", "version", id, "error", err)
	}
}

// bodyReader remembers a read error of the request body.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// garbage is the ledger of this domain's blobs awaiting deletion.
func (s *Service) garbage() blob.Garbage {
	return blob.Garbage{DB: s.db, Blobs: s.blobs, Table: "registry_module_garbage", What: "module archive", Logger: s.opts.Logger}
}
