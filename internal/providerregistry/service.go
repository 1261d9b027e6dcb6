package providerregistry

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	goversion "github.com/hashicorp/go-version"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/store"
)

// Defaults for Options.
const (
	DefaultMaxBinaryBytes    = 512 << 20
	DefaultMaxShasumsBytes   = 1 << 20
	DefaultMaxSignatureBytes = 64 << 10
	DefaultMaxArmorBytes     = 256 << 10
	DefaultUploadURLTTL      = 2 * time.Hour
	DefaultDownloadURLTTL    = 10 * time.Minute
)

// Options configure a Service; zero values take the defaults.
type Options struct {
	MaxBinaryBytes    int64
	MaxShasumsBytes   int64
	MaxSignatureBytes int64
	UploadURLTTL      time.Duration
	DownloadURLTTL    time.Duration
	Logger            *slog.Logger
}

// Service manages registry providers, their versions and platforms, and
// the namespaces' GPG keys.
type Service struct {
	db     *store.DB
	blobs  *blob.Store
	signer *blob.Signer
	orgs   Organizations
	opts   Options
}

// NewService returns a provider registry service.
func NewService(db *store.DB, blobs *blob.Store, signer *blob.Signer, orgs Organizations, opts Options) *Service {
	if opts.MaxBinaryBytes <= 0 {
		opts.MaxBinaryBytes = DefaultMaxBinaryBytes
	}
	if opts.MaxShasumsBytes <= 0 {
		opts.MaxShasumsBytes = DefaultMaxShasumsBytes
	}
	if opts.MaxSignatureBytes <= 0 {
		opts.MaxSignatureBytes = DefaultMaxSignatureBytes
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

// access checks the caller may read the organization's registry: the
// model's OrgRead, as the guard decides the registry-providers routes
// (404 for who may not see the organization). The GPG key routes under
// /api/registry pass no guard, so this is their only decision: the
// organization check alone would let a run's, an agent's or a task
// result's token of the organization read them.
func access(ctx context.Context, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return err
	}
	return authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org})
}

// manage checks the caller may publish to the organization's registry:
// manage-modules ("manage private registry" in HCP Terraform).
func manage(ctx context.Context, org string) error {
	if err := access(ctx, org); err != nil {
		return err
	}
	if authz.Allows(ctx, authz.OrgManageModules, authz.Resource{Organization: org}) != nil {
		return core.Forbidden("you may not manage the private registry of organization %q", org)
	}
	return nil
}

// CanManage reports whether the caller may manage the organization's
// providers and GPG keys.
func CanManage(ctx context.Context, org string) bool { return manage(ctx, org) == nil }

// fetch decides a request of the provider registry protocol: the model's
// OrgReadProviders (as module downloads; callers of other organizations
// when org shares its providers globally), after the organization check
// that every service makes (a disabled organization, or one refusing user
// tokens; that the caller is no member is left to the model).
func fetch(ctx context.Context, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil && core.KindOf(err) != core.KindNotFound {
		return err
	}
	return authz.Allows(ctx, authz.OrgReadProviders, authz.Resource{Organization: org})
}

// CreateOptions are the attributes of a new provider.
type CreateOptions struct {
	Name         *string `json:"name"`
	Namespace    *string `json:"namespace"`
	RegistryName *string `json:"registry-name"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Create adds a provider to the organization's registry: a private one
// (namespace = the organization) or a reference to a public one.
func (s *Service) Create(ctx context.Context, org string, opts CreateOptions) (*Provider, error) {
	if err := manage(ctx, org); err != nil {
		return nil, err
	}
	if err := s.orgs.Exists(ctx, org); err != nil {
		return nil, err
	}
	p := &Provider{ID: core.NewID(PrefixProvider), Organization: org, RegistryName: str(opts.RegistryName), Namespace: str(opts.Namespace), Name: str(opts.Name), TagBindings: []TagBinding{}}
	var errs []error
	switch {
	case p.Name == "":
		errs = append(errs, invalid("Name can't be blank"))
	case !nameRe.MatchString(p.Name):
		errs = append(errs, invalid("Name %q is invalid: use letters, digits, '-' and '_' (at most 64), starting with a letter or digit", p.Name))
	}
	switch p.RegistryName {
	case RegistryPrivate:
		if p.Namespace == "" {
			p.Namespace = org
		}
		if p.Namespace != org {
			errs = append(errs, invalid("Namespace of a private provider must be its organization, %q", org))
		}
	case RegistryPublic:
		switch {
		case p.Namespace == "":
			errs = append(errs, invalid("Namespace can't be blank"))
		case !nameRe.MatchString(p.Namespace):
			errs = append(errs, invalid("Namespace %q is invalid", p.Namespace))
		}
	case "":
		errs = append(errs, invalid("Registry name can't be blank"), invalid("Registry name is not included in the list"))
	default:
		errs = append(errs, invalid("Registry name is not included in the list"))
	}
	if len(errs) > 0 {
		return nil, joinInvalid(errs)
	}
	now := core.Now()
	p.CreatedAt, p.UpdatedAt = now, now
	_, err := s.db.Exec(ctx, `INSERT INTO registry_providers (id, organization_name, registry_name, namespace, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.Organization, p.RegistryName, p.Namespace, p.Name, core.Micros(now), core.Micros(now))
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Conflict("provider %s/%s already exists in the %s registry of %q", p.Namespace, p.Name, p.RegistryName, org)
	}
	if err != nil {
		return nil, fmt.Errorf("creating registry provider: %w", err)
	}
	return p, nil
}

// joinInvalid returns one error, or all of them (errors.Join) for the API
// to answer each as an error object, as HCP Terraform does.
func joinInvalid(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return multiError(errs)
}

// multiError is several errors of one request.
type multiError []error

func (m multiError) Error() string {
	parts := make([]string, len(m))
	for i, e := range m {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

func (m multiError) Unwrap() []error { return m }

const providerCols = `id, organization_name, registry_name, namespace, name, tag_bindings, created_at, updated_at`

func scanProvider(sc store.Scanner) (*Provider, error) {
	var p Provider
	var tags string
	var created, updated int64
	if err := sc.Scan(&p.ID, &p.Organization, &p.RegistryName, &p.Namespace, &p.Name, &tags, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tags), &p.TagBindings); err != nil {
		return nil, fmt.Errorf("decoding tag bindings of provider %s: %w", p.ID, err)
	}
	p.CreatedAt, p.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &p, nil
}

// ListOptions filter List (go-tfe's RegistryProviderListOptions).
type ListOptions struct {
	RegistryName string
	// Namespace filters by namespace (filter[organization_name]).
	Namespace string
	// Search matches name or namespace (case-insensitive substring).
	Search string
}

// List returns at most limit (all when negative) of the organization's
// providers from offset on, and how many match in all.
func (s *Service) List(ctx context.Context, org string, opts ListOptions, offset, limit int) ([]*Provider, int, error) {
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
		where += ` AND (LOWER(name) LIKE ?` + store.LikeEscape + ` OR LOWER(namespace) LIKE ?` + store.LikeEscape + `)`
		args = append(args, pattern, pattern)
	}
	for _, f := range []struct{ col, v string }{{"registry_name", opts.RegistryName}, {"namespace", opts.Namespace}} {
		if f.v != "" {
			where += ` AND ` + f.col + ` = ?`
			args = append(args, f.v)
		}
	}
	return store.Page(ctx, s.db, scanProvider, providerCols, "registry_providers", where, `registry_name, namespace, name, id`, offset, limit, args...)
}

// Get returns a provider by its address in an organization's registry.
func (s *Service) Get(ctx context.Context, ref Ref) (*Provider, error) {
	return s.get(ctx, s.db, ref)
}

func (s *Service) get(ctx context.Context, q store.Q, ref Ref) (*Provider, error) {
	if err := access(ctx, ref.Organization); err != nil {
		return nil, err
	}
	p, err := scanProvider(q.QueryRow(ctx, `SELECT `+providerCols+` FROM registry_providers WHERE organization_name = ? AND registry_name = ? AND namespace = ? AND name = ?`,
		ref.Organization, ref.RegistryName, ref.Namespace, ref.Name))
	if store.IsNoRows(err) {
		return nil, core.NotFound("provider %s/%s not found in the %s registry of %q", ref.Namespace, ref.Name, ref.RegistryName, ref.Organization)
	}
	return p, err
}

// GetByID returns a provider the caller may see.
func (s *Service) GetByID(ctx context.Context, id string) (*Provider, error) {
	notFound := core.NotFound("registry provider %q not found", id)
	if !core.HasPrefix(id, PrefixProvider) {
		return nil, notFound
	}
	p, err := scanProvider(s.db.QueryRow(ctx, `SELECT `+providerCols+` FROM registry_providers WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if access(ctx, p.Organization) != nil {
		return nil, notFound
	}
	return p, nil
}

// SetTagBindings replaces a provider's tag bindings.
func (s *Service) SetTagBindings(ctx context.Context, ref Ref, tags []TagBinding) (*Provider, error) {
	p, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := manage(ctx, ref.Organization); err != nil {
		return nil, err
	}
	out := []TagBinding{}
	seen := map[string]bool{}
	for _, tb := range tags {
		if tb.Key == "" {
			return nil, invalid("tag binding key is required")
		}
		if seen[tb.Key] {
			return nil, invalid("tag binding key %q is given twice", tb.Key)
		}
		seen[tb.Key] = true
		out = append(out, TagBinding{ID: core.NewID(core.PrefixTagBinding), Key: tb.Key, Value: tb.Value})
	}
	b, _ := json.Marshal(out)
	now := core.Now()
	if _, err := s.db.Exec(ctx, `UPDATE registry_providers SET tag_bindings = ?, updated_at = ? WHERE id = ?`, string(b), core.Micros(now), p.ID); err != nil {
		return nil, err
	}
	p.TagBindings, p.UpdatedAt = out, now
	return p, nil
}

// Delete removes a provider with its versions and platforms.
func (s *Service) Delete(ctx context.Context, ref Ref) error {
	p, err := s.Get(ctx, ref)
	if err != nil {
		return err
	}
	if err := manage(ctx, ref.Organization); err != nil {
		return err
	}
	return s.deleteWithZips(ctx, `SELECT pl.blob_key FROM registry_provider_platforms pl JOIN registry_provider_versions v ON v.id = pl.version_id WHERE v.provider_id = ? AND pl.blob_key <> ''`,
		`DELETE FROM registry_providers WHERE id = ?`, p.ID)
}

// deleteWithZips deletes the row id names (the cascade takes what it
// holds) and records the zips zipsQuery finds for it in the ledger, in one
// transaction; the zips are collected after it commits.
func (s *Service) deleteWithZips(ctx context.Context, zipsQuery, deleteStmt, id string) error {
	var keys []string
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if keys, err = store.Strings(ctx, tx, zipsQuery, id); err != nil {
			return err
		}
		for _, k := range keys {
			if err := s.garbage().Add(ctx, tx, k, core.Now()); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, deleteStmt, id)
		return err
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		s.garbage().Collect(ctx, k)
	}
	return nil
}

// DeleteOrganizationProviders records the zips of an organization's
// providers for deletion, inside the transaction that deletes the
// organization (whose providers go by cascade).
func DeleteOrganizationProviders(ctx context.Context, q store.Q, org string) error {
	_, err := q.Exec(ctx, `INSERT INTO registry_provider_garbage (blob_key, not_before) SELECT pl.blob_key, ? FROM registry_provider_platforms pl JOIN registry_provider_versions v ON v.id = pl.version_id JOIN registry_providers p ON p.id = v.provider_id WHERE p.organization_name = ? AND pl.blob_key <> '' ON CONFLICT (blob_key) DO NOTHING`,
		core.Micros(core.Now()), org)
	return err
}

// RenameOrganizationProviders gives an organization's private providers
// its new name as their namespace, inside the transaction that renames it
// (organization_name follows by cascade, and with it the GPG keys'
// namespace): the API finds them under the new namespace, as providers.v1
// does.
func RenameOrganizationProviders(ctx context.Context, q store.Q, from, to string) error {
	_, err := q.Exec(ctx, `UPDATE registry_providers SET namespace = ? WHERE organization_name = ? AND registry_name = ? AND namespace = ?`,
		to, to, RegistryPrivate, from)
	return err
}

// garbage is the ledger of this domain's blobs awaiting deletion.
func (s *Service) garbage() blob.Garbage {
	return blob.Garbage{DB: s.db, Blobs: s.blobs, Table: "registry_provider_garbage", What: "provider zip", Logger: s.opts.Logger}
}

// Ledger is the domain's ledger of zips awaiting deletion, for the
// server's sweep loop (blob.RunAll).
func (s *Service) Ledger() blob.Garbage { return s.garbage() }

// private returns a private provider of ref (versions exist only there).
func (s *Service) private(ctx context.Context, q store.Q, ref Ref) (*Provider, error) {
	if ref.RegistryName != RegistryPrivate {
		return nil, core.NotFound("only private providers have versions")
	}
	return s.get(ctx, q, ref)
}

// VersionOptions are the attributes of a new version.
type VersionOptions struct {
	Version   *string  `json:"version"`
	KeyID     *string  `json:"key-id"`
	Protocols []string `json:"protocols"`
}

// CreateVersion adds a version to a private provider.
func (s *Service) CreateVersion(ctx context.Context, ref Ref, opts VersionOptions) (*Provider, *Version, error) {
	p, err := s.private(ctx, s.db, ref)
	if err != nil {
		return nil, nil, err
	}
	if err := manage(ctx, ref.Organization); err != nil {
		return nil, nil, err
	}
	v := &Version{ID: core.NewID(PrefixVersion), ProviderID: p.ID, Version: str(opts.Version), KeyID: str(opts.KeyID), Protocols: []string{}}
	if err := registry.ValidVersion(v.Version); err != nil {
		return nil, nil, err
	}
	switch {
	case v.KeyID == "":
		return nil, nil, invalid("key-id is required: the ID of the GPG key that signs the version's SHA256SUMS")
	case !keyIDRe.MatchString(v.KeyID):
		return nil, nil, invalid("key-id %q is invalid: give the GPG key's ID (16 hexadecimal digits)", v.KeyID)
	}
	seen := map[string]bool{}
	for _, pr := range opts.Protocols {
		if !protocolRe.MatchString(pr) {
			return nil, nil, invalid("protocol %q is invalid: use plugin protocol versions such as \"5.0\" or \"6.0\"", pr)
		}
		if !seen[pr] {
			seen[pr] = true
			v.Protocols = append(v.Protocols, pr)
		}
	}
	now := core.Now()
	v.CreatedAt, v.UpdatedAt = now, now
	pb, _ := json.Marshal(v.Protocols)
	_, err = s.db.Exec(ctx, `INSERT INTO registry_provider_versions (id, provider_id, version, key_id, protocols, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.ProviderID, v.Version, v.KeyID, string(pb), core.Micros(now), core.Micros(now))
	if store.IsUniqueViolation(s.db, err) {
		return nil, nil, core.Conflict("version %s of provider %s/%s already exists", v.Version, p.Namespace, p.Name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("creating provider version: %w", err)
	}
	return p, v, nil
}

const versionCols = `id, provider_id, version, key_id, protocols, shasums, shasums_sig, created_at, updated_at`

func scanVersion(sc store.Scanner) (*Version, error) {
	var v Version
	var protocols, sig string
	var created, updated int64
	if err := sc.Scan(&v.ID, &v.ProviderID, &v.Version, &v.KeyID, &protocols, &v.Shasums, &sig, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(protocols), &v.Protocols); err != nil {
		return nil, fmt.Errorf("decoding protocols of provider version %s: %w", v.ID, err)
	}
	if sig != "" {
		b, err := decodeBase64(sig)
		if err != nil {
			return nil, fmt.Errorf("decoding signature of provider version %s: %w", v.ID, err)
		}
		v.ShasumsSig = b
	}
	v.CreatedAt, v.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &v, nil
}

func lookupVersion(ctx context.Context, q store.Q, id string, lock bool) (*Version, error) {
	query := `SELECT ` + versionCols + ` FROM registry_provider_versions WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	v, err := scanVersion(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("provider version %q not found", id)
	}
	return v, err
}

// versionsOf returns a provider's versions, newest first.
func versionsOf(ctx context.Context, q store.Q, providerID string) ([]*Version, error) {
	vs, err := store.All(ctx, q, scanVersion, `SELECT `+versionCols+` FROM registry_provider_versions WHERE provider_id = ?`, providerID)
	if err != nil {
		return nil, err
	}
	newestFirst(vs)
	return vs, nil
}

// newestFirst sorts versions newest first.
func newestFirst(vs []*Version) {
	sort.SliceStable(vs, func(i, j int) bool { return versionLess(vs[j].Version, vs[i].Version) })
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

// Versions returns the versions of providers (a list's page, or one) by
// provider ID, each provider's newest first (none for a public provider),
// in one statement.
func (s *Service) Versions(ctx context.Context, ps []*Provider) (map[string][]*Version, error) {
	out := make(map[string][]*Version, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	in, args := store.In(ids)
	vs, err := store.All(ctx, s.db, scanVersion, `SELECT `+versionCols+` FROM registry_provider_versions WHERE provider_id IN (`+in+`)`, args...)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		out[v.ProviderID] = append(out[v.ProviderID], v)
	}
	for _, vs := range out {
		newestFirst(vs)
	}
	return out, nil
}

// ListVersions returns a private provider's versions, newest first.
func (s *Service) ListVersions(ctx context.Context, ref Ref) (*Provider, []*Version, error) {
	p, err := s.private(ctx, s.db, ref)
	if err != nil {
		return nil, nil, err
	}
	vs, err := versionsOf(ctx, s.db, p.ID)
	return p, vs, err
}

// GetVersion returns one version of a private provider.
func (s *Service) GetVersion(ctx context.Context, ref Ref, version string) (*Provider, *Version, error) {
	p, err := s.private(ctx, s.db, ref)
	if err != nil {
		return nil, nil, err
	}
	v, err := scanVersion(s.db.QueryRow(ctx, `SELECT `+versionCols+` FROM registry_provider_versions WHERE provider_id = ? AND version = ?`, p.ID, version))
	if store.IsNoRows(err) {
		return nil, nil, core.NotFound("version %s of provider %s/%s not found", version, p.Namespace, p.Name)
	}
	return p, v, err
}

// PlatformIDs returns the IDs of the platforms of versions (a list's
// page, or one) by version ID, each version's by os and arch, in one
// statement.
func (s *Service) PlatformIDs(ctx context.Context, vs []*Version) (map[string][]string, error) {
	out := make(map[string][]string, len(vs))
	if len(vs) == 0 {
		return out, nil
	}
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	in, args := store.In(ids)
	pairs, err := store.Pairs(ctx, s.db, `SELECT version_id, id FROM registry_provider_platforms WHERE version_id IN (`+in+`) ORDER BY os, arch`, args...)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		out[p[0]] = append(out[p[0]], p[1])
	}
	return out, nil
}

// Platforms returns the platforms of versions (each provider's latest on
// a page of providers, or one provider's versions) by version ID, each
// version's by os and arch, in one statement. The versions come from a
// call that decided the caller may read them.
func (s *Service) Platforms(ctx context.Context, vs []*Version) (map[string][]*Platform, error) {
	out := make(map[string][]*Platform, len(vs))
	if len(vs) == 0 {
		return out, nil
	}
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	in, args := store.In(ids)
	pls, err := store.All(ctx, s.db, scanPlatform, `SELECT `+platformCols+` FROM registry_provider_platforms WHERE version_id IN (`+in+`) ORDER BY os, arch, id`, args...)
	if err != nil {
		return nil, err
	}
	for _, pl := range pls {
		out[pl.VersionID] = append(out[pl.VersionID], pl)
	}
	return out, nil
}

// DeleteVersion removes a version with its platforms.
func (s *Service) DeleteVersion(ctx context.Context, ref Ref, version string) error {
	_, v, err := s.GetVersion(ctx, ref, version)
	if err != nil {
		return err
	}
	if err := manage(ctx, ref.Organization); err != nil {
		return err
	}
	return s.deleteWithZips(ctx, `SELECT blob_key FROM registry_provider_platforms WHERE version_id = ? AND blob_key <> ''`,
		`DELETE FROM registry_provider_versions WHERE id = ?`, v.ID)
}

// PlatformOptions are the attributes of a new platform.
type PlatformOptions struct {
	OS       *string `json:"os"`
	Arch     *string `json:"arch"`
	Shasum   *string `json:"shasum"`
	Filename *string `json:"filename"`
}

// CreatePlatform adds an os/arch build to a version.
func (s *Service) CreatePlatform(ctx context.Context, ref Ref, version string, opts PlatformOptions) (*Platform, error) {
	_, v, err := s.GetVersion(ctx, ref, version)
	if err != nil {
		return nil, err
	}
	if err := manage(ctx, ref.Organization); err != nil {
		return nil, err
	}
	pl := &Platform{ID: core.NewID(PrefixPlatform), VersionID: v.ID, OS: str(opts.OS), Arch: str(opts.Arch), Shasum: str(opts.Shasum), Filename: str(opts.Filename)}
	for _, f := range []struct {
		name, value, hint string
		ok                bool
	}{
		{"os", pl.OS, "lowercase letters, digits and '_', as terraform names platforms (linux, darwin, windows)", platformRe.MatchString(pl.OS)},
		{"arch", pl.Arch, "lowercase letters, digits and '_', as terraform names platforms (amd64, arm64)", platformRe.MatchString(pl.Arch)},
		{"shasum", pl.Shasum, "the SHA-256 of the zip, in hexadecimal", shasumRe.MatchString(pl.Shasum)},
		{"filename", pl.Filename, "the zip's file name as SHA256SUMS lists it, without a folder", filenameRe.MatchString(pl.Filename)},
	} {
		if f.value == "" {
			return nil, invalid("%s is required", f.name)
		}
		if !f.ok {
			return nil, invalid("%s %q is invalid: use %s", f.name, f.value, f.hint)
		}
	}
	now := core.Now()
	pl.CreatedAt, pl.UpdatedAt = now, now
	// The check against SHA256SUMS and the insert are one transaction
	// holding the version's row, as UploadShasums's check of the
	// platforms and its write are: either sees what the other wrote.
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := lookupVersion(ctx, tx, v.ID, true)
		if err != nil {
			return err
		}
		if cur.ShasumsUploaded() {
			sums, err := parseShasums(cur.Shasums)
			if err != nil {
				return err
			}
			if err := checkListed(sums, pl); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO registry_provider_platforms (id, version_id, os, arch, filename, shasum, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			pl.ID, pl.VersionID, pl.OS, pl.Arch, pl.Filename, pl.Shasum, core.Micros(now), core.Micros(now))
		return err
	})
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Conflict("version %s already has a %s_%s platform", v.Version, pl.OS, pl.Arch)
	}
	if err != nil {
		return nil, fmt.Errorf("creating provider platform: %w", err)
	}
	return pl, nil
}

const platformCols = `id, version_id, os, arch, filename, shasum, blob_key, size, created_at, updated_at`

func scanPlatform(sc store.Scanner) (*Platform, error) {
	var p Platform
	var created, updated int64
	if err := sc.Scan(&p.ID, &p.VersionID, &p.OS, &p.Arch, &p.Filename, &p.Shasum, &p.blobKey, &p.Size, &created, &updated); err != nil {
		return nil, err
	}
	p.CreatedAt, p.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &p, nil
}

func platformsOf(ctx context.Context, q store.Q, versionID string) ([]*Platform, error) {
	return store.All(ctx, q, scanPlatform, `SELECT `+platformCols+` FROM registry_provider_platforms WHERE version_id = ? ORDER BY os, arch, id`, versionID)
}

// ListPlatforms returns at most limit of a version's platforms from offset
// on, and how many there are.
func (s *Service) ListPlatforms(ctx context.Context, ref Ref, version string, offset, limit int) (*Version, []*Platform, int, error) {
	_, v, err := s.GetVersion(ctx, ref, version)
	if err != nil {
		return nil, nil, 0, err
	}
	out, total, err := store.Page(ctx, s.db, scanPlatform, platformCols, "registry_provider_platforms", `version_id = ?`, `os, arch, id`, offset, limit, v.ID)
	return v, out, total, err
}

// GetPlatform returns one platform of a version.
func (s *Service) GetPlatform(ctx context.Context, ref Ref, version, os, arch string) (*Version, *Platform, error) {
	_, v, err := s.GetVersion(ctx, ref, version)
	if err != nil {
		return nil, nil, err
	}
	pl, err := scanPlatform(s.db.QueryRow(ctx, `SELECT `+platformCols+` FROM registry_provider_platforms WHERE version_id = ? AND os = ? AND arch = ?`, v.ID, os, arch))
	if store.IsNoRows(err) {
		return nil, nil, core.NotFound("version %s has no %s_%s platform", version, os, arch)
	}
	return v, pl, err
}

// DeletePlatform removes a platform and its zip.
func (s *Service) DeletePlatform(ctx context.Context, ref Ref, version, os, arch string) error {
	_, pl, err := s.GetPlatform(ctx, ref, version, os, arch)
	if err != nil {
		return err
	}
	if err := manage(ctx, ref.Organization); err != nil {
		return err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		var key string
		if err := tx.QueryRow(ctx, `SELECT blob_key FROM registry_provider_platforms WHERE id = ?`+store.ForUpdate(tx), pl.ID).Scan(&key); err != nil {
			if store.IsNoRows(err) {
				return core.NotFound("version %s has no %s_%s platform", version, os, arch)
			}
			return err
		}
		pl.blobKey = key
		if err := s.garbage().Add(ctx, tx, key, core.Now()); err != nil { // nothing for ""
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM registry_provider_platforms WHERE id = ?`, pl.ID)
		return err
	})
	if err != nil {
		return err
	}
	s.garbage().Collect(ctx, pl.blobKey) // nothing for ""
	return nil
}

// Upload and download capability paths.

// CapabilityShasumsUpload is where a version's SHA256SUMS is PUT.
func CapabilityShasumsUpload(versionID string) string {
	return "/object/registry-provider-versions/" + versionID + "/shasums-upload"
}

// CapabilitySigUpload is where a version's signature is PUT.
func CapabilitySigUpload(versionID string) string {
	return "/object/registry-provider-versions/" + versionID + "/shasums-sig-upload"
}

// CapabilityBinaryUpload is where a platform's zip is PUT.
func CapabilityBinaryUpload(platformID string) string {
	return "/object/registry-provider-platforms/" + platformID + "/binary-upload"
}

// ShasumsPath serves a version's SHA256SUMS; it names the file's digest so
// that a link never serves a replaced file.
func ShasumsPath(v *Version) string {
	return "/object/registry-provider-versions/" + v.ID + "/" + digest([]byte(v.Shasums)) + "/SHA256SUMS"
}

// ShasumsSigPath serves a version's signature.
func ShasumsSigPath(v *Version) string {
	return "/object/registry-provider-versions/" + v.ID + "/" + digest(v.ShasumsSig) + "/SHA256SUMS.sig"
}

// BinaryPath serves a platform's zip, named by its SHA-256.
func BinaryPath(p *Platform) string {
	return "/object/registry-provider-platforms/" + p.ID + "/" + strings.ToLower(p.Shasum) + ".zip"
}

func (s *Service) upload(path string) string {
	return s.signer.URL(http.MethodPut, path, s.opts.UploadURLTTL)
}

func (s *Service) download(path string) string {
	return s.signer.URL(http.MethodGet, path, s.opts.DownloadURLTTL)
}
