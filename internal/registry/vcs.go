package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcshost"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// VCS is the VCS domain as VCS-backed modules need it (internal/vcs's
// Service): it checks a module's connection as the caller, keeps it in
// the module's transaction, and fetches the versions.
type VCS interface {
	// TokenOrganization names the organization of an OAuth token the
	// caller may publish modules with.
	TokenOrganization(ctx context.Context, tokenID string) (string, error)
	// ResolveModule checks the connection o (merged over cur) for a
	// module of org.
	ResolveModule(ctx context.Context, org string, cur *vcsrepo.Repo, o vcsrepo.Options) (*vcsrepo.Repo, error)
	// ConnectModule keeps the connection in q's transaction and, after
	// the commit, fetches the module's versions (initialVersion: a branch
	// module's first).
	ConnectModule(ctx context.Context, q store.Q, moduleID string, next *vcsrepo.Repo, initialVersion string) error
	// PublishVersion queues a branch module's version of commit sha (""
	// the branch's head).
	PublishVersion(ctx context.Context, q store.Q, moduleID, version, sha string) error
	// Commits lists the latest commits of the module's branch.
	Commits(ctx context.Context, org string, r *vcsrepo.Repo) ([]vcshost.LogEntry, error)
	// DeleteModule removes the module's webhook, in its deletion.
	DeleteModule(ctx context.Context, q store.Q, moduleID string) error
}

// Publishing mechanisms of a VCS-backed module (go-tfe's).
const (
	PublishingTags   = "git_tag"
	PublishingBranch = "branch"
)

// Module and version statuses of VCS-backed modules.
const (
	ModuleNoVersionTags ModuleStatus  = "no_version_tags"
	VersionCloneFailed  VersionStatus = "clone_failed"
)

// PublishingMechanism is how a VCS-backed module publishes versions ("" for
// a module whose versions are uploaded).
func (m *Module) PublishingMechanism() string {
	switch {
	case m.VCSRepo == nil:
		return ""
	case m.VCSRepo.Tags:
		return PublishingTags
	}
	return PublishingBranch
}

// VCSCreateOptions are a VCS-backed module's (go-tfe's
// RegistryModuleCreateWithVCSConnectionOptions).
type VCSCreateOptions struct {
	// Name and Provider default to the repository's name,
	// terraform-<PROVIDER>-<NAME>.
	Name, Provider *string
	Repo           vcsrepo.Options
	// OrganizationName is the vcs-repo's organization-name (the path's
	// organization when there is one).
	OrganizationName string
	// InitialVersion is a branch module's first version (0.0.0).
	InitialVersion *string
	// TestConfig enables the module's tests.
	TestConfig *TestConfig
}

// DecodeModuleRepo reads a module's vcs-repo attribute.
func DecodeModuleRepo(raw json.RawMessage) (o vcsrepo.Options, org string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return o, "", core.Invalid("vcs-repo is required")
	}
	var v struct {
		Identifier        *string `json:"identifier"`
		OAuthTokenID      *string `json:"oauth-token-id"`
		DisplayIdentifier *string `json:"display-identifier"`
		GHAInstallationID *string `json:"github-app-installation-id"`
		OrganizationName  *string `json:"organization-name"`
		Branch            *string `json:"branch"`
		Tags              *bool   `json:"tags"`
		SourceDirectory   *string `json:"source-directory"`
		TagPrefix         *string `json:"tag-prefix"`
		IngressSubmodules *bool   `json:"ingress-submodules"`
		TagsRegex         *string `json:"tags-regex"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return o, "", core.Invalid("attribute \"vcs-repo\" must be an object of identifier, oauth-token-id, display-identifier, branch, tags, source-directory and tag-prefix: %v", err)
	}
	if v.GHAInstallationID != nil && *v.GHAInstallationID != "" {
		return o, "", core.Invalid("vcs-repo: GitHub App installations are not supported by this server; publish with an oauth-token-id")
	}
	if v.OrganizationName != nil {
		org = *v.OrganizationName
	}
	return vcsrepo.Options{Identifier: v.Identifier, OAuthTokenID: v.OAuthTokenID, Branch: v.Branch, Tags: v.Tags,
		SourceDirectory: v.SourceDirectory, TagPrefix: v.TagPrefix, IngressSubmodules: v.IngressSubmodules, TagsRegex: v.TagsRegex}, org, nil
}

// nameFromRepo reads NAME and PROVIDER from a repository named
// terraform-<PROVIDER>-<NAME> (ok false otherwise).
func nameFromRepo(identifier string) (name, provider string, ok bool) {
	_, repo, _ := strings.Cut(identifier, "/")
	parts := strings.SplitN(repo, "-", 3)
	if len(parts) != 3 || parts[0] != "terraform" || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[2], parts[1], true
}

// CreateVCS adds a module that publishes its versions from a repository:
// from its version tags (v1.2.0 or 1.2.0, after the tag-prefix), or,
// with a branch, versions made through the API from the branch's commits.
// org is the path's organization ("" for the legacy route: the
// organization of the OAuth token). The repository is checked before
// anything is kept; the versions are fetched after the commit.
func (s *Service) CreateVCS(ctx context.Context, org string, opts VCSCreateOptions) (*Module, error) {
	if s.VCS == nil {
		return nil, core.Invalid("this server publishes no modules from VCS")
	}
	switch {
	case org != "" && opts.OrganizationName != "" && opts.OrganizationName != org:
		return nil, core.Invalid("vcs-repo organization-name %q is not the organization %q of the path", opts.OrganizationName, org)
	case org == "" && opts.OrganizationName != "":
		org = opts.OrganizationName
	case org == "":
		if opts.Repo.OAuthTokenID == nil || *opts.Repo.OAuthTokenID == "" {
			return nil, core.Invalid("vcs-repo oauth-token-id is required")
		}
		var err error
		if org, err = s.VCS.TokenOrganization(ctx, *opts.Repo.OAuthTokenID); err != nil {
			return nil, err
		}
	}
	if err := manage(ctx, org); err != nil {
		return nil, err
	}
	if err := s.orgs.Exists(ctx, org); err != nil {
		return nil, err
	}
	initial := ""
	if opts.InitialVersion != nil && *opts.InitialVersion != "" {
		if err := ValidVersion(*opts.InitialVersion); err != nil {
			return nil, core.Invalid("initial-version: %v", err)
		}
		initial = *opts.InitialVersion
	}
	id := ""
	if opts.Repo.Identifier != nil {
		id = strings.TrimSpace(*opts.Repo.Identifier)
	}
	if id == "" {
		return nil, core.Invalid("vcs-repo identifier is required (owner/name)")
	}
	name, provider, fromRepo := nameFromRepo(id)
	if opts.Name != nil && *opts.Name != "" {
		name = *opts.Name
	}
	if opts.Provider != nil && *opts.Provider != "" {
		provider = *opts.Provider
	}
	if !fromRepo && (opts.Name == nil || opts.Provider == nil || *opts.Name == "" || *opts.Provider == "") {
		return nil, core.Invalid("the repository %q is not named terraform-<PROVIDER>-<NAME>: send the module's name and provider", id)
	}
	if err := validName(name, provider); err != nil {
		return nil, err
	}
	probe := &Module{Organization: org, RegistryName: RegistryPrivate}
	tc, err := s.testConfig(opts.TestConfig, probe)
	if err != nil {
		return nil, err
	}
	repo, err := s.VCS.ResolveModule(ctx, org, nil, opts.Repo)
	if err != nil {
		return nil, err
	}
	rb, _ := json.Marshal(repo)
	now := core.Now()
	m := &Module{ID: core.NewID(PrefixModule), Organization: org, RegistryName: RegistryPrivate, Namespace: org, Name: name, Provider: provider,
		VCSRepo: repo, CreatedAt: now, UpdatedAt: now, Versions: []VersionSummary{}, TestsEnabled: tc.enable != nil && *tc.enable}
	if tc.pool != nil {
		m.TestsAgentPoolID = *tc.pool
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if err := s.keepTestPool(ctx, tx, m); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO registry_modules (id, organization_name, registry_name, namespace, name, provider, no_code, tests_enabled, tests_agent_pool_id, vcs_repo, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, m.ID, org, m.RegistryName, m.Namespace, m.Name, m.Provider, false, m.TestsEnabled, m.TestsAgentPoolID, string(rb), core.Micros(now), core.Micros(now)); err != nil {
			return err
		}
		return s.VCS.ConnectModule(ctx, tx, m.ID, repo, initial)
	})
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Conflict("module %s/%s/%s already exists in the %s registry of %q", m.Namespace, m.Name, m.Provider, m.RegistryName, org)
	}
	if err != nil {
		return nil, fmt.Errorf("creating registry module: %w", err)
	}
	return m, nil
}

// updateVCS changes a VCS-backed module's publishing (branch or tags,
// source directory, tag prefix) in its own transaction.
func (s *Service) updateVCS(ctx context.Context, m *Module, raw json.RawMessage) error {
	if m.VCSRepo == nil {
		return core.Invalid("module %s/%s is not connected to a repository: its versions are uploaded", m.Name, m.Provider)
	}
	var o vcsrepo.Options
	if err := json.Unmarshal(raw, &struct {
		Branch          **string `json:"branch"`
		Tags            **bool   `json:"tags"`
		SourceDirectory **string `json:"source-directory"`
		TagPrefix       **string `json:"tag-prefix"`
		Identifier      **string `json:"identifier"`
		OAuthTokenID    **string `json:"oauth-token-id"`
	}{&o.Branch, &o.Tags, &o.SourceDirectory, &o.TagPrefix, &o.Identifier, &o.OAuthTokenID}); err != nil {
		return core.Invalid("attribute \"vcs-repo\" must be an object of branch, tags, source-directory and tag-prefix: %v", err)
	}
	repo, err := s.VCS.ResolveModule(ctx, m.Organization, m.VCSRepo, o)
	if err != nil {
		return err
	}
	rb, _ := json.Marshal(repo)
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE registry_modules SET vcs_repo = ?, vcs_status = '', vcs_error = '', updated_at = ? WHERE id = ?`,
			string(rb), core.Micros(core.Now()), m.ID); err != nil {
			return err
		}
		return s.VCS.ConnectModule(ctx, tx, m.ID, repo, "")
	})
	if err != nil {
		return err
	}
	m.VCSRepo = repo
	return nil
}

// Commits lists the latest commits of a VCS-backed module's branch (its
// repository's default branch for a module publishing from tags).
func (s *Service) Commits(ctx context.Context, org, name, provider string) ([]vcshost.LogEntry, error) {
	m, err := s.GetPrivate(ctx, org, name, provider)
	if err != nil {
		return nil, err
	}
	if m.VCSRepo == nil || s.VCS == nil {
		return nil, core.Invalid("module %s/%s is not connected to a repository", name, provider)
	}
	return s.VCS.Commits(ctx, org, m.VCSRepo)
}

// SystemModule reads a module and its versions for the system (the VCS
// domain publishing into it); core.NotFound when it is gone.
func (s *Service) SystemModule(ctx context.Context, id string) (*Module, error) {
	mods, err := s.queryModules(ctx, s.db, `id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(mods) == 0 {
		return nil, core.NotFound("registry module %q not found", id)
	}
	return mods[0], s.fillVersions(ctx, s.db, mods)
}

// vcsVersion returns version of a module, made pending (from commit sha,
// of source) when it is new or failed before; ok when it is published
// already.
func (s *Service) vcsVersion(ctx context.Context, moduleID, version, sha, source string) (*Version, error) {
	if err := ValidVersion(version); err != nil {
		return nil, err
	}
	now := core.Micros(core.Now())
	var v *Version
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM registry_module_versions WHERE module_id = ? AND version = ?`+store.ForUpdate(tx), moduleID, version).Scan(&id)
		switch {
		case store.IsNoRows(err):
			id = core.NewID(PrefixModuleVersion)
			if _, err := tx.Exec(ctx, `INSERT INTO registry_module_versions (id, module_id, version, status, source, commit_sha, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, moduleID, version, string(VersionPending), source, sha, now, now); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if _, err := tx.Exec(ctx, `UPDATE registry_module_versions SET status = ?, error = '', source = ?, commit_sha = ?, updated_at = ?
				WHERE id = ? AND status <> ?`, string(VersionPending), source, sha, now, id, string(VersionOK)); err != nil {
				return err
			}
		}
		v, err = lookupVersion(ctx, tx, id, false)
		return err
	})
	return v, err
}

// PublishFromVCS publishes version of a module from a commit's archive
// (acting for the system): a version published already stays as it is;
// an archive refused (unsafe, too large) leaves the version
// reg_ingress_failed with the reason.
func (s *Service) PublishFromVCS(ctx context.Context, moduleID, version, sha, source string, archive []byte) error {
	v, err := s.vcsVersion(ctx, moduleID, version, sha, source)
	if err != nil || v.Status == VersionOK {
		return err
	}
	if _, err := s.upload(ctx, v, bytes.NewReader(archive)); err != nil {
		if k := core.KindOf(err); k == core.KindInvalid || k == core.KindTooLarge {
			s.opts.Logger.Warn("a module version from VCS was refused", "module", moduleID, "version", version, "commit", sha, "error", err)
			return nil // recorded on the version
		}
		return err
	}
	return nil
}

// VCSFailed records that a version (or, version "", the module's first
// fetch) could not be fetched from the repository, and why.
func (s *Service) VCSFailed(ctx context.Context, moduleID, version, sha, source string, cause error) error {
	msg := cause.Error()
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	if version == "" {
		_, err := s.db.Exec(ctx, `UPDATE registry_modules SET vcs_status = ?, vcs_error = ? WHERE id = ?`, string(ModuleSetupFailed), msg, moduleID)
		return err
	}
	v, err := s.vcsVersion(ctx, moduleID, version, sha, source)
	if err != nil || v.Status == VersionOK {
		return err
	}
	_, err = s.db.Exec(ctx, `UPDATE registry_module_versions SET status = ?, error = ?, updated_at = ? WHERE id = ?`,
		string(VersionCloneFailed), msg, core.Micros(core.Now()), v.ID)
	return err
}

// NoVersionTags records that a module's repository has no version tag.
func (s *Service) NoVersionTags(ctx context.Context, moduleID string) error {
	_, err := s.db.Exec(ctx, `UPDATE registry_modules SET vcs_status = ?, vcs_error = '' WHERE id = ?`, string(ModuleNoVersionTags), moduleID)
	return err
}

// DisconnectVCS removes the vcs-repo of modules inside another domain's
// transaction q (the VCS domain's, deleting the token they publish
// through): they keep their versions, and new ones are uploaded.
func (s *Service) DisconnectVCS(ctx context.Context, q store.Q, moduleIDs []string) error {
	for _, id := range moduleIDs {
		if _, err := q.Exec(ctx, `UPDATE registry_modules SET vcs_repo = '', vcs_status = '', vcs_error = '' WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}
