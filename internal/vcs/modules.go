package vcs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcshost"
)

// ModuleConnectionSecretColumn is the sealed webhook secret of a registry
// module's connection.
var ModuleConnectionSecretColumn = seal.Column{Table: "vcs_module_connections", IDColumn: "module_id", Column: "secret",
	Purpose: "vcs_module_connections.secret"}

// Module is what the VCS domain reads of a registry module it publishes
// versions of.
type Module struct {
	ID, Organization string
	// SourceDirectory is the repository's folder the module is in ("" the
	// root); TagPrefix starts its version tags.
	SourceDirectory, TagPrefix string
	// Versions are the module's published versions (a version that
	// failed, or waits, is fetched again).
	Versions []string
	// Name and Provider name the module; TestsEnabled: its commits are
	// tested (a module publishing from a branch: pushes to it and pull
	// requests to it).
	Name, Provider string
	TestsEnabled   bool
}

// Modules is the private registry as the VCS domain publishes into it,
// acting for the system (the module's connection decided it: a registry
// manager made it).
type Modules interface {
	// VCSModule reads a module (core.NotFound when it is gone).
	VCSModule(ctx context.Context, id string) (*Module, error)
	// PublishFromVCS makes version of the module from a commit's archive
	// (source: the provider): a new version, or the pending one the API
	// created. A version already published is left as it is.
	PublishFromVCS(ctx context.Context, moduleID, version, sha, source string, archive []byte) error
	// VCSFailed records why a version could not be fetched (version ""
	// is the module's first fetch, whose tags could not be listed);
	// NoVersionTags that the first fetch found no version tag.
	VCSFailed(ctx context.Context, moduleID, version, sha, source string, cause error) error
	NoVersionTags(ctx context.Context, moduleID string) error
	// DisconnectVCS removes the vcs-repo of modules inside q's
	// transaction (their token is being deleted).
	DisconnectVCS(ctx context.Context, q store.Q, moduleIDs []string) error
	// TestFromVCS queues a test run of the module's folder at a commit
	// (archive), origin recording in the run's transaction where it
	// reports; nothing when the module's tests are off.
	TestFromVCS(ctx context.Context, moduleID string, archive []byte, origin func(ctx context.Context, q store.Q, testRunID string) error) error
}

var moduleOwner = owner{table: "vcs_module_connections", column: "module_id", secret: ModuleConnectionSecretColumn, module: true}

// DefaultInitialVersion is a branch-based module's first version when its
// creation names none (HCP Terraform's).
const DefaultInitialVersion = "0.0.0"

// semverTag is the version part of a module's version tag: a semantic
// version, with or without a leading "v".
const semverTag = `v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?`

var tagPrefixRE = core.NewPattern(`^[A-Za-z0-9._/-]*$`, 0, 64)

// moduleTagsRegex matches the tags a module of prefix publishes.
func moduleTagsRegex(prefix string) string {
	return "^" + regexp.QuoteMeta(prefix) + semverTag + "$"
}

// TagVersion is the version a tag publishes for a module whose tags start
// with prefix, ok false for any other tag ("v1.2.0" and "1.2.0" both
// publish 1.2.0).
func TagVersion(prefix, tag string) (string, bool) {
	rest, ok := strings.CutPrefix(tag, prefix)
	if !ok || !versionTagRE.MatchString(rest) {
		return "", false
	}
	return strings.TrimPrefix(rest, "v"), true
}

// versionTagRE is a version tag after its prefix (compiled once: a
// module's first fetch reads up to vcshost.MaxTags tags).
var versionTagRE = regexp.MustCompile("^" + semverTag + "$")

// TokenOrganization names the organization of an OAuth token, for a
// module created without one (HCP Terraform's POST registry-modules,
// whose organization is the token's): not found unless the caller may
// manage that organization's modules.
func (s *Service) TokenOrganization(ctx context.Context, tokenID string) (string, error) {
	t, err := s.loadToken(ctx, s.db, tokenID, false)
	if err != nil {
		return "", err
	}
	if err := authz.Allows(ctx, authz.OrgManageModules, authz.Resource{Organization: t.Organization}); err != nil {
		return "", core.NotFoundAs(err, "OAuth token %q not found", tokenID)
	}
	return t.Organization, nil
}

// ResolveModule checks the connection a caller who manages org's
// registry asks for a module: cur is the module's (nil when new), o is
// merged over it. A module publishes from tags (Tags, no Branch: the
// default when o names neither) or from a branch (versions made through
// the API); it may sit in a folder of the repository (SourceDirectory)
// and tag its versions with a prefix (TagPrefix). The host must show the
// repository (and the branch) with the token.
func (s *Service) ResolveModule(ctx context.Context, org string, cur *Repo, o RepoOptions) (*Repo, error) {
	if err := authz.Allows(ctx, authz.OrgManageModules, authz.Resource{Organization: org}); err != nil {
		return nil, core.Forbidden("you may not manage registry modules of organization %q", org)
	}
	var next Repo
	if cur != nil {
		next = *cur
	}
	trim := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	if cur == nil {
		trim(&next.Identifier, o.Identifier)
		trim(&next.OAuthTokenID, o.OAuthTokenID)
	} else if (o.Identifier != nil && strings.TrimSpace(*o.Identifier) != cur.Identifier) ||
		(o.OAuthTokenID != nil && strings.TrimSpace(*o.OAuthTokenID) != cur.OAuthTokenID) {
		return nil, core.Invalid("vcs-repo: a module's repository and OAuth token cannot change: delete the module and publish it again")
	}
	branch := o.Branch != nil && strings.TrimSpace(*o.Branch) != ""
	tags := o.Tags != nil && *o.Tags
	switch {
	case branch && tags:
		return nil, core.Invalid("vcs-repo: a module publishes from tags or from a branch, not both: send tags true without a branch, or a branch")
	case branch:
		next.Branch, next.Tags = strings.TrimSpace(*o.Branch), false
	case tags || cur == nil:
		next.Branch, next.Tags = "", true
	}
	trim(&next.SourceDirectory, o.SourceDirectory)
	trim(&next.TagPrefix, o.TagPrefix)
	if o.IngressSubmodules != nil && *o.IngressSubmodules {
		return nil, core.Invalid("vcs-repo ingress-submodules: Terrace does not fetch submodules yet; connect with ingress-submodules false")
	}
	if o.TagsRegex != nil && *o.TagsRegex != "" {
		return nil, core.Invalid("vcs-repo tags-regex is a workspace's: a module publishes tags that are semantic versions (with tag-prefix before them)")
	}
	if err := checkFields(&next); err != nil {
		return nil, err
	}
	dir, err := vcshost.CleanDir(next.SourceDirectory)
	if err != nil {
		return nil, core.Invalid("vcs-repo source-directory: %v", err)
	}
	next.SourceDirectory = dir
	if !tagPrefixRE.MatchString(next.TagPrefix) || strings.Contains(next.TagPrefix, "..") {
		return nil, core.Invalid("vcs-repo tag-prefix %q must be at most 64 letters, digits, '.', '_', '-' and '/'", next.TagPrefix)
	}
	return s.resolveOwned(ctx, org, cur, &next)
}

// resolveOwned finishes the connection next of something of org that
// belongs to no project (a registry module, a policy set): the token is
// the organization's, through an organization-scoped provider, and the
// host shows the repository and next's branch (the default branch, named,
// when next has none and publishes no tags). Who may use the token was
// decided by the caller (the owner's managers).
func (s *Service) resolveOwned(ctx context.Context, org string, cur, next *Repo) (*Repo, error) {
	t, err := s.loadToken(ctx, s.db, next.OAuthTokenID, false)
	if core.KindOf(err) == core.KindNotFound || (err == nil && t.Organization != org) {
		return nil, core.NotFound("OAuth token %q not found", next.OAuthTokenID)
	}
	if err != nil {
		return nil, err
	}
	cred, err := s.Credential(ctx, s.db, t.ID)
	if err != nil {
		return nil, err
	}
	if !cred.OrganizationScoped {
		return nil, core.Invalid("OAuth token %q belongs to a VCS provider scoped to projects: registry modules and policy sets connect through organization-scoped providers", t.ID)
	}
	h, err := s.host(cred)
	if err != nil {
		return nil, err
	}
	def, err := h.DefaultBranch(ctx, next.Identifier)
	if err != nil {
		return nil, hostError("vcs-repo: the repository "+next.Identifier, err)
	}
	if next.Branch == "" && !next.Tags {
		next.Branch = def
	}
	if next.Branch != "" {
		if _, err := h.Branch(ctx, next.Identifier, next.Branch); err != nil {
			return nil, hostError("vcs-repo: the repository "+next.Identifier, err)
		}
	}
	next.DisplayIdentifier = next.Identifier
	next.ServiceProvider = string(cred.Provider)
	next.RepositoryHTTPURL = cred.HTTPURL + "/" + next.Identifier
	next.TagsRegex = "" // modules refuse ingress-submodules before, policy sets keep it
	if cur == nil || cur.WebhookURL == "" {
		next.WebhookURL = s.baseURL + WebhookPath + core.RandomString(32)
	}
	return next, nil
}

// ConnectModule records, inside the module's transaction q, its
// connection next (nil: none): the webhook is registered at the host
// after the commit, and the module's versions fetched: a version for each
// version tag, or, publishing from a branch, initialVersion of its head
// when the module has no version yet.
func (s *Service) ConnectModule(ctx context.Context, q store.Q, moduleID string, next *Repo, initialVersion string) error {
	if next == nil {
		return s.DeleteModule(ctx, q, moduleID)
	}
	row := *next
	if row.Tags {
		row.TagsRegex = moduleTagsRegex(row.TagPrefix)
	}
	if initialVersion == "" {
		initialVersion = DefaultInitialVersion
	}
	return s.connect(ctx, q, moduleOwner, moduleID, &row, initialVersion)
}

// PublishVersion queues, inside q's transaction, the fetch of version of
// a module publishing from a branch: commit sha, or the branch's head
// when sha is "".
func (s *Service) PublishVersion(ctx context.Context, q store.Q, moduleID, version, sha string) error {
	c, err := s.loadConn(ctx, q, moduleOwner, `module_id = ?`, moduleID, false)
	if err != nil {
		return err
	}
	if c == nil {
		return core.Invalid("registry module %s is not connected to a repository", moduleID)
	}
	if sha != "" && !vcshost.IsSHA(sha) {
		return core.Invalid("commit-sha %q is not a full commit SHA (40 or 64 lowercase hexadecimal digits)", sha)
	}
	return s.enqueue(ctx, q, ingressMessage(ingress{Workspace: moduleID, Module: true, Webhook: c.webhook, SHA: sha, Version: version}))
}

// DeleteModule runs inside a module's deletion: its webhook is removed
// from the host.
func (s *Service) DeleteModule(ctx context.Context, q store.Q, moduleID string) error {
	return s.connect(ctx, q, moduleOwner, moduleID, nil, "")
}

// Commits lists the latest commits (at most 20) of a module's branch
// (its repository's default branch when it publishes from tags), for a
// caller who manages the organization's modules.
func (s *Service) Commits(ctx context.Context, org string, r *Repo) ([]vcshost.LogEntry, error) {
	if err := authz.Allows(ctx, authz.OrgManageModules, authz.Resource{Organization: org}); err != nil {
		return nil, core.Forbidden("you may not manage registry modules of organization %q", org)
	}
	cred, err := s.Credential(ctx, s.db, r.OAuthTokenID)
	if err != nil {
		return nil, err
	}
	if cred.Organization != org {
		return nil, core.NotFound("OAuth token %q not found", r.OAuthTokenID)
	}
	h, err := s.host(cred)
	if err != nil {
		return nil, err
	}
	out, err := h.Commits(ctx, r.Identifier, r.Branch, 20)
	if err != nil {
		return nil, hostError("listing the commits of "+r.Identifier, err)
	}
	return out, nil
}

// fetchModule publishes a module's versions: every version tag on
// connecting (initial, a branch's head, for a module publishing from a
// branch), a pushed tag's, or the version the API asked for.
func (s *Service) fetchModule(ctx context.Context, c *connection, in ingress) error {
	mods := s.ingress.Modules
	m, err := mods.VCSModule(ctx, in.Workspace)
	if core.KindOf(err) == core.KindNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	h, err := s.hostFor(ctx, c.token)
	if err != nil {
		return permanentHost(err)
	}
	source := string(h.Kind)
	have := map[string]bool{}
	for _, v := range m.Versions {
		have[v] = true
	}
	if in.Test {
		return s.testModule(ctx, c, in, m, h)
	}
	type want struct{ version, sha string }
	var todo []want
	switch {
	case in.Connect && c.branch == "":
		tags, err := h.Tags(ctx, c.identifier)
		if err != nil {
			if final(err) {
				return errors.Join(outbox.Permanent(err), mods.VCSFailed(ctx, m.ID, "", "", source, err))
			}
			return err
		}
		for _, t := range tags {
			if v, ok := TagVersion(m.TagPrefix, t.Name); ok && !have[v] {
				have[v] = true
				todo = append(todo, want{v, t.SHA})
			}
		}
		if len(todo) == 0 && len(m.Versions) == 0 {
			return mods.NoVersionTags(ctx, m.ID)
		}
	case in.Connect:
		if len(m.Versions) > 0 {
			return nil // a module switching to its branch keeps its versions
		}
		head, err := h.Branch(ctx, c.identifier, c.branch)
		if err != nil {
			return permanentHost(err)
		}
		todo = append(todo, want{in.Version, head.SHA})
	case in.Tag != "":
		v, ok := TagVersion(m.TagPrefix, in.Tag)
		if !ok || have[v] {
			return nil
		}
		todo = append(todo, want{v, in.SHA})
	case in.Version != "":
		sha := in.SHA
		if sha == "" {
			head, err := h.Branch(ctx, c.identifier, c.branch)
			if err != nil {
				if final(err) {
					return errors.Join(outbox.Permanent(err), mods.VCSFailed(ctx, m.ID, in.Version, "", source, err))
				}
				return err
			}
			sha = head.SHA
		}
		todo = append(todo, want{in.Version, sha})
	default:
		return nil
	}
	for _, w := range todo {
		archive, err := h.ArchiveDir(ctx, c.identifier, w.sha, m.SourceDirectory, s.ingress.MaxArchive)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// The version records why; the other versions go on.
			if ferr := mods.VCSFailed(ctx, m.ID, w.version, w.sha, source, err); ferr != nil {
				return ferr
			}
			continue
		}
		if err := mods.PublishFromVCS(ctx, m.ID, w.version, w.sha, source, archive); err != nil {
			return fmt.Errorf("publishing version %s of module %s: %w", w.version, m.ID, err)
		}
	}
	return nil
}

// testModule queues a test run of a commit of a module publishing from a
// branch (a push to it, or a pull request's head): its folder at the
// commit, whose statuses go to the commit (ModuleTestStatus).
func (s *Service) testModule(ctx context.Context, c *connection, in ingress, m *Module, h *vcshost.Host) error {
	if !m.TestsEnabled {
		return nil
	}
	archive, err := h.ArchiveDir(ctx, c.identifier, in.SHA, m.SourceDirectory, s.ingress.MaxArchive)
	if err != nil {
		if final(err) {
			return outbox.Permanent(fmt.Errorf("fetching commit %s of module %s to test it: %w", in.SHA, m.ID, err))
		}
		return err
	}
	return s.ingress.Modules.TestFromVCS(ctx, m.ID, archive, func(ctx context.Context, q store.Q, testRunID string) error {
		_, err := q.Exec(ctx, `INSERT INTO vcs_module_test_runs (test_run_id, organization_name, module_name, provider, oauth_token_id, identifier, sha, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, testRunID, m.Organization, m.Name, m.Provider, c.token, c.identifier, in.SHA, core.Micros(core.Now()))
		return err
	})
}

// ModuleTestRun is a module's test run as its commit status tells it.
type ModuleTestRun struct {
	ID, Status, TestStatus           string
	Passed, Failed, Errored, Skipped int
}

// moduleTestStatusOf is the commit status of a test run's status (and
// its tests' verdict when it finished).
func moduleTestStatusOf(r ModuleTestRun) (state, description string) {
	switch r.Status {
	case "queued":
		return "pending", "Tests queued"
	case "running":
		return "pending", "Tests running"
	case "finished":
		counts := fmt.Sprintf("%d passed, %d failed, %d errored, %d skipped", r.Passed, r.Failed, r.Errored, r.Skipped)
		switch r.TestStatus {
		case "pass", "skip":
			return "success", "Tests passed: " + counts
		case "fail":
			return "failure", "Tests failed: " + counts
		}
		return "failure", "Tests errored: " + counts
	case "canceled":
		// The commit's code did not fail: the run was stopped (as a
		// canceled run reports).
		return "error", "Test run canceled"
	}
	return "error", "Test run errored"
}

// ModuleTestStatus queues, inside q's transaction, the commit status of
// a test run's new status, when a commit made the run (vcs_module_test_runs):
// context Terrace/<org>/<module>/<provider>/tests. As for stacks, an
// unsent older status of the run is dropped first.
func (s *Service) ModuleTestStatus(ctx context.Context, q store.Q, r ModuleTestRun) error {
	var org, name, provider, token, identifier, sha string
	err := q.QueryRow(ctx, `SELECT organization_name, module_name, provider, oauth_token_id, identifier, sha FROM vcs_module_test_runs WHERE test_run_id = ?`,
		r.ID).Scan(&org, &name, &provider, &token, &identifier, &sha)
	if store.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	state, desc := moduleTestStatusOf(r)
	// The link is the run's page (its log), as a workspace run's is.
	return s.queueStatus(ctx, q, r.ID, r.Status, true, status{Token: token, Identifier: identifier, SHA: sha, Status: vcshost.Status{
		State: state, Description: desc, Context: "Terrace/" + org + "/" + name + "/" + provider + "/tests",
		TargetURL: s.baseURL + "/app/" + org + "/registry/modules/private/" + org + "/" + name + "/" + provider + "/tests/" + r.ID}})
}
