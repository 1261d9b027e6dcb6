package vcs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcshost"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// Repo and RepoOptions are a connection as a workspace or stack keeps it
// and a request sends it (package vcsrepo, which the domains import
// without the VCS domain's own dependencies).
type (
	Repo        = vcsrepo.Repo
	RepoOptions = vcsrepo.Options
)

// WebhookPath starts every webhook URL; the connection's webhook ID
// follows.
const WebhookPath = "/webhooks/vcs/"

// The sealed webhook secrets of connections.
var (
	ConnectionSecretColumn      = seal.Column{Table: "vcs_connections", IDColumn: "workspace_id", Column: "secret", Purpose: "vcs_connections.secret"}
	StackConnectionSecretColumn = seal.Column{Table: "vcs_stack_connections", IDColumn: "stack_id", Column: "secret", Purpose: "vcs_stack_connections.secret"}
)

// owner is what a connection connects, each kind in a table of its own:
// a workspace, a stack, a registry module or a policy set.
type owner struct {
	table, column            string
	secret                   seal.Column
	stack, module, policySet bool
}

var (
	workspaceOwner = owner{table: "vcs_connections", column: "workspace_id", secret: ConnectionSecretColumn}
	stackOwner     = owner{table: "vcs_stack_connections", column: "stack_id", secret: StackConnectionSecretColumn, stack: true}
	owners         = []owner{workspaceOwner, stackOwner, moduleOwner, policySetOwner}
)

var identifierRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

func validIdentifier(id string) error {
	if id == "" {
		return core.Invalid("vcs-repo identifier is required (owner/name)")
	}
	owner, name, _ := strings.Cut(id, "/")
	if len(id) > 255 || !identifierRE.MatchString(id) || owner == "." || owner == ".." || name == "." || name == ".." {
		return core.Invalid("vcs-repo identifier %q must be owner/name, each of letters, digits, '.', '-' and '_'", id)
	}
	return nil
}

// checkFields checks what every connection names: the repository, the
// token, and the branch when there is one.
func checkFields(r *Repo) error {
	if err := validIdentifier(r.Identifier); err != nil {
		return err
	}
	if r.OAuthTokenID == "" {
		return core.Invalid("vcs-repo oauth-token-id is required")
	}
	if r.Branch != "" {
		return validBranch(r.Branch)
	}
	return nil
}

func validBranch(b string) error {
	if len(b) > 255 || !utf8.ValidString(b) || strings.ContainsAny(b, " ~^:?*[\\\x00\x7f") || strings.Contains(b, "..") ||
		strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") {
		return core.Invalid("vcs-repo branch %q is not a valid git branch name", b)
	}
	for _, r := range b {
		if r < 0x20 {
			return core.Invalid("vcs-repo branch %q is not a valid git branch name", b)
		}
	}
	return nil
}

// kind is the vcshost kind of a provider Terrace reaches.
func kind(p Provider) (vcshost.Kind, error) {
	if vcshost.Known(string(p)) {
		return vcshost.Kind(p), nil
	}
	return "", core.Invalid("Terrace does not connect workspaces to %s repositories yet (it reaches GitHub, GitHub Enterprise, Gitea and Forgejo)",
		cmpOr(p.DisplayName(), string(p)))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// host returns the repository host of a credential.
func (s *Service) host(c *Credential) (*vcshost.Host, error) {
	k, err := kind(c.Provider)
	if err != nil {
		return nil, err
	}
	return vcshost.New(vcshost.Host{Kind: k, HTTPURL: c.HTTPURL, APIURL: c.APIURL, Token: c.Token, Client: s.client, CA: s.gitCA})
}

// hostError turns a host's refusal into the caller's 422, with the host's
// own words (never the token: vcshost keeps it out of its errors).
func hostError(what string, err error) error {
	if core.KindOf(err) != core.KindInternal {
		return err
	}
	return core.Invalid("%s: %v", what, err)
}

// Resolve checks the connection a caller asks for a workspace of org in
// project, as that caller: the token is one they may read and that the
// project may use, and the host shows the repository's branch with it.
// cur is the workspace's connection (nil for none); o is merged over it.
// A connection to another repository, or through another token, gets a
// new webhook.
func (s *Service) Resolve(ctx context.Context, org, project string, cur *Repo, o RepoOptions) (*Repo, error) {
	var next Repo
	if cur != nil {
		next = *cur
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	set(&next.Identifier, o.Identifier)
	set(&next.OAuthTokenID, o.OAuthTokenID)
	set(&next.TagsRegex, o.TagsRegex)
	if o.Branch != nil {
		next.Branch = strings.TrimSpace(*o.Branch)
	}
	if o.Identifier != nil && o.Branch == nil && cur != nil && cur.Identifier != next.Identifier {
		next.Branch = "" // another repository: its default branch
	}
	if o.IngressSubmodules != nil {
		next.IngressSubmodules = *o.IngressSubmodules
	}
	if err := checkFields(&next); err != nil {
		return nil, err
	}
	if next.TagsRegex != "" {
		if len(next.TagsRegex) > 255 {
			return nil, core.Invalid("vcs-repo tags-regex is longer than 255 characters")
		}
		if _, err := regexp.Compile(next.TagsRegex); err != nil {
			return nil, core.Invalid("vcs-repo tags-regex %q is not a valid regular expression: %v", next.TagsRegex, err)
		}
	}
	tok, err := s.GetToken(ctx, next.OAuthTokenID)
	if err != nil {
		return nil, err
	}
	if tok.Organization != org {
		return nil, core.NotFound("OAuth token %q not found", next.OAuthTokenID)
	}
	cred, err := s.Credential(ctx, s.db, tok.ID)
	if err != nil {
		return nil, err
	}
	if !cred.UsableBy(org, project) {
		return nil, core.Invalid("OAuth token %q belongs to a VCS provider scoped to other projects than this workspace's", tok.ID)
	}
	h, err := s.host(cred)
	if err != nil {
		return nil, err
	}
	if next.Branch == "" {
		if next.Branch, err = h.DefaultBranch(ctx, next.Identifier); err != nil {
			return nil, hostError("vcs-repo: the repository "+next.Identifier, err)
		}
	}
	if _, err := h.Branch(ctx, next.Identifier, next.Branch); err != nil {
		return nil, hostError("vcs-repo: the repository "+next.Identifier, err)
	}
	next.DisplayIdentifier = next.Identifier
	next.ServiceProvider = string(cred.Provider)
	next.RepositoryHTTPURL = cred.HTTPURL + "/" + next.Identifier
	if cur == nil || cur.WebhookURL == "" || cur.Identifier != next.Identifier || cur.OAuthTokenID != next.OAuthTokenID {
		next.WebhookURL = s.baseURL + WebhookPath + core.RandomString(32)
	}
	return &next, nil
}

// CheckScope refuses to let a workspace of project keep a connection
// through a token whose VCS provider is scoped to other projects (a
// workspace moving there). It asks no host and not the caller: moving is
// the workspace domain's decision, the token's scope the provider's.
func (s *Service) CheckScope(ctx context.Context, org, project string, r *Repo) error {
	cred, err := s.Credential(ctx, s.db, r.OAuthTokenID)
	if err != nil {
		return err
	}
	if !cred.UsableBy(org, project) {
		return core.Invalid("the workspace's VCS connection goes through OAuth token %q, whose VCS provider is not scoped to that project: "+
			"add the project to the provider, or disconnect the workspace first", r.OAuthTokenID)
	}
	return nil
}

func webhookID(r *Repo) string {
	_, id, _ := strings.Cut(r.WebhookURL, WebhookPath)
	return id
}

// connection is a connection as the VCS domain keeps it: owner is the
// workspace's or the stack's ID.
type connection struct {
	of                                                                   owner
	owner, webhook, token, identifier, branch, tagsRegex, secret, hookID string
	submodules                                                           bool
}

// archive fetches commit sha of c's repository from h, with its
// submodules when c asks for them (ingress-submodules).
func (s *Service) archive(ctx context.Context, h *vcshost.Host, c *connection, sha string) ([]byte, error) {
	if c.submodules {
		return h.ArchiveWithSubmodules(ctx, c.identifier, sha, s.ingress.MaxArchive)
	}
	return h.Archive(ctx, c.identifier, sha, s.ingress.MaxArchive)
}

func (o owner) cols() string {
	return o.column + `, webhook_id, oauth_token_id, identifier, branch, tags_regex, ingress_submodules, secret, provider_hook_id`
}

// loadConn reads the connection of o matching where, nil when none.
func (s *Service) loadConn(ctx context.Context, q store.Q, o owner, where string, arg any, forUpdate bool) (*connection, error) {
	query := `SELECT ` + o.cols() + ` FROM ` + o.table + ` WHERE ` + where
	if forUpdate {
		query += store.ForUpdate(q)
	}
	c := connection{of: o}
	err := q.QueryRow(ctx, query, arg).Scan(&c.owner, &c.webhook, &c.token, &c.identifier, &c.branch, &c.tagsRegex, &c.submodules, &c.secret, &c.hookID)
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if c.secret, err = s.Keys.OpenString(o.secret.Purpose, c.secret); err != nil {
		return nil, err
	}
	return &c, nil
}

// connByWebhook reads the connection, of whatever owner, whose webhook is
// id (nil when none).
func (s *Service) connByWebhook(ctx context.Context, q store.Q, id string) (*connection, error) {
	for _, o := range owners {
		c, err := s.loadConn(ctx, q, o, `webhook_id = ?`, id, false)
		if err != nil || c != nil {
			return c, err
		}
	}
	return nil, nil
}

// Connect records, inside the workspace's transaction q, that its
// connection is now next (nil: none): a new webhook is registered at the
// host after the commit and the branch's head fetched; a webhook no
// longer used is removed from the host. prev, the connection the
// workspace had, is what the workspace domain knows; the VCS domain reads
// its own row instead.
func (s *Service) Connect(ctx context.Context, q store.Q, workspaceID string, prev, next *Repo) error {
	return s.connect(ctx, q, workspaceOwner, workspaceID, next, "")
}

// ConnectStack is Connect for a stack, inside its transaction.
func (s *Service) ConnectStack(ctx context.Context, q store.Q, stackID string, next *Repo) error {
	return s.connect(ctx, q, stackOwner, stackID, next, "")
}

// connect keeps id's connection next (nil: none); version is the version
// a module's first fetch publishes from a branch.
func (s *Service) connect(ctx context.Context, q store.Q, o owner, id string, next *Repo, version string) error {
	old, err := s.loadConn(ctx, q, o, o.column+` = ?`, id, true)
	if err != nil {
		return err
	}
	if next != nil && old != nil && old.webhook == webhookID(next) {
		if _, err := q.Exec(ctx, `UPDATE `+o.table+` SET branch = ?, tags_regex = ?, ingress_submodules = ? WHERE `+o.column+` = ?`,
			next.Branch, next.TagsRegex, next.IngressSubmodules, id); err != nil {
			return err
		}
		if old.branch != next.Branch || old.tagsRegex != next.TagsRegex && o.module {
			return s.enqueue(ctx, q, ingressMessage(ingress{Workspace: id, Stack: o.stack, Module: o.module, PolicySet: o.policySet, Webhook: old.webhook,
				Connect: true, Version: version}))
		}
		return nil
	}
	if old != nil {
		if err := s.drop(ctx, q, old); err != nil {
			return err
		}
	}
	if next == nil {
		return nil
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	sealed, err := s.Keys.SealString(o.secret.Purpose, hex.EncodeToString(secret))
	if err != nil {
		return err
	}
	hook := webhookID(next)
	if hook == "" {
		return fmt.Errorf("vcs: connection of %s has no webhook URL", id)
	}
	if _, err := q.Exec(ctx, `INSERT INTO `+o.table+` (`+o.column+`, webhook_id, oauth_token_id, identifier, branch, tags_regex,
		ingress_submodules, secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, hook, next.OAuthTokenID, next.Identifier, next.Branch, next.TagsRegex, next.IngressSubmodules, sealed,
		core.Micros(core.Now())); err != nil {
		return err
	}
	return s.enqueue(ctx, q,
		outbox.Message{Key: "hook:" + hook, Lane: id, Payload: hook},
		ingressMessage(ingress{Workspace: id, Stack: o.stack, Module: o.module, PolicySet: o.policySet, Webhook: hook, Connect: true,
			Version: version}))
}

// Fetch queues the fetch of a connected stack's branch head (HCP
// Terraform's fetch-latest-from-vcs); core.Invalid when it has no
// connection.
func (s *Service) Fetch(ctx context.Context, stackID string) error {
	c, err := s.loadConn(ctx, s.db, stackOwner, `stack_id = ?`, stackID, false)
	if err != nil {
		return err
	}
	if c == nil {
		return core.Invalid("stack %s is not connected to a repository: upload configurations instead", stackID)
	}
	return s.enqueue(ctx, s.db, ingressMessage(ingress{Workspace: stackID, Stack: true, Webhook: c.webhook, Connect: true}))
}

// drop deletes a connection's row and, when its webhook was registered,
// queues the webhook's removal from the host.
func (s *Service) drop(ctx context.Context, q store.Q, c *connection) error {
	if _, err := q.Exec(ctx, `DELETE FROM `+c.of.table+` WHERE `+c.of.column+` = ?`, c.owner); err != nil {
		return err
	}
	if c.hookID == "" {
		return nil // not registered (a registration under way removes its own hook: registerHook)
	}
	return s.queueUnhook(ctx, q, c.webhook, c.token, []hookAt{{Identifier: c.identifier, Hook: c.hookID}})
}

// unhookPurpose seals the credential an unhook item carries.
const unhookPurpose = "outbox_items.vcs-unhook"

// queueUnhook queues, in q's transaction, the removal of webhooks from
// the host, all made through token. The item carries the token's
// credential, sealed with the site's keys: the token may be deleted in
// this very transaction (its own deletion, its provider's, its
// organization's), and the host can only be asked with it. For a token
// the host lets expire, that includes what renews it (sealedCredential):
// a token nobody used for a while has expired by the time its provider is
// deleted, and the transaction cannot ask the host. A handled item is
// deleted with its payload; one that failed keeps it, sealed, until the
// outbox prunes failed items.
//
// key names the item: one per webhook when a connection goes, one per
// token when the token goes, so that a refresh token the host replaces on
// use is spent once for all of that token's webhooks.
func (s *Service) queueUnhook(ctx context.Context, q store.Q, key, token string, hooks []hookAt) error {
	u := unhook{Token: token, Hooks: hooks}
	cred, err := s.sealedCredential(ctx, q, token)
	switch {
	case err == nil:
		b, _ := json.Marshal(cred)
		if u.Credential, err = s.Keys.SealString(unhookPurpose, string(b)); err != nil {
			return err
		}
	case core.KindOf(err) != core.KindNotFound:
		return err
	}
	p, _ := json.Marshal(u)
	return s.enqueue(ctx, q, outbox.Message{Key: "unhook:" + key, Payload: string(p)})
}

// sealedCredential is what an unhook item keeps of a token: the
// credential, and for a token that expires its expiry (microseconds), its
// refresh token and its OAuth application's key and secret.
type sealedCredential struct {
	Provider               Provider
	APIURL, HTTPURL, Token string
	Expires                int64  `json:",omitempty"`
	Refresh                string `json:",omitempty"`
	ClientKey              string `json:",omitempty"`
	ClientSecret           string `json:",omitempty"`
}

// sealedCredential reads, in q (the deleting transaction: nothing is
// renewed), what an unhook item keeps of token, in one statement.
func (s *Service) sealedCredential(ctx context.Context, q store.Q, token string) (*sealedCredential, error) {
	var out sealedCredential
	var key, access string
	var refresh, secret *string
	var expires *int64
	err := q.QueryRow(ctx, `SELECT c.service_provider, c.api_url, c.http_url, t.token, c.key, c.secret, t.refresh_token, t.expires_at`+tokenFrom+` WHERE t.id = ?`, token).
		Scan(&out.Provider, &out.APIURL, &out.HTTPURL, &access, &key, &secret, &refresh, &expires)
	if store.IsNoRows(err) {
		return nil, core.NotFound("OAuth token %q not found", token)
	}
	if err != nil {
		return nil, err
	}
	if out.Token, err = s.Keys.OpenString(TokenColumn.Purpose, access); err != nil {
		return nil, err
	}
	if expires == nil || refresh == nil {
		return &out, nil
	}
	out.Expires, out.ClientKey = *expires, key
	if out.Refresh, err = s.Keys.OpenString(RefreshColumn.Purpose, *refresh); err != nil {
		return nil, err
	}
	if secret != nil {
		if out.ClientSecret, err = s.Keys.OpenString(SecretColumn.Purpose, *secret); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// DeleteWorkspace runs inside a workspace's deletion: its connection's
// webhook is removed from the host.
func (s *Service) DeleteWorkspace(ctx context.Context, q store.Q, workspaceID string) error {
	return s.connect(ctx, q, workspaceOwner, workspaceID, nil, "")
}

// DeleteTokens runs inside the deletion of OAuth tokens: what is
// connected through them (workspaces, stacks, modules, policy sets) is
// disconnected, and their webhooks are removed from the host with the
// token's sealed credential (queueUnhook); deliveries meanwhile find
// nothing.
func (s *Service) DeleteTokens(ctx context.Context, q store.Q, tokenIDs []string) error {
	hooks := map[string][]hookAt{}
	for _, o := range owners {
		var ids []string
		for _, t := range tokenIDs {
			conns, err := store.All(ctx, q, func(sc store.Scanner) ([3]string, error) {
				var c [3]string
				return c, sc.Scan(&c[0], &c[1], &c[2])
			}, `SELECT `+o.column+`, identifier, provider_hook_id FROM `+o.table+` WHERE oauth_token_id = ?`, t)
			if err != nil {
				return err
			}
			for _, c := range conns {
				ids = append(ids, c[0])
				if c[2] != "" {
					hooks[t] = append(hooks[t], hookAt{Identifier: c[1], Hook: c[2]})
				}
			}
		}
		if len(ids) == 0 {
			continue
		}
		disconnect := s.ingress.Disconnect
		switch {
		case o.stack:
			disconnect = s.ingress.DisconnectStacks
		case o.module:
			disconnect = s.ingress.Modules.DisconnectVCS
		case o.policySet:
			disconnect = s.ingress.PolicySets.DisconnectVCS
		}
		if err := disconnect(ctx, q, ids); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := q.Exec(ctx, `DELETE FROM `+o.table+` WHERE `+o.column+` = ?`, id); err != nil {
				return err
			}
		}
	}
	for _, t := range tokenIDs {
		if len(hooks[t]) > 0 {
			if err := s.queueUnhook(ctx, q, t, t, hooks[t]); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteOrganization runs inside an organization's deletion: everything
// connected through its tokens is disconnected and its webhooks removed
// from the hosts (DeleteTokens), before the tokens go by cascade.
func (s *Service) DeleteOrganization(ctx context.Context, q store.Q, org string) error {
	ids, err := store.Strings(ctx, q, `SELECT t.id`+tokenFrom+` WHERE c.organization_name = ? ORDER BY t.id`, org)
	if err != nil || len(ids) == 0 {
		return err
	}
	return s.DeleteTokens(ctx, q, ids)
}

type unhook struct {
	Token string
	// Identifier and Hook name the webhook of an item queued by a server
	// that predates Hooks.
	Identifier, Hook string   `json:",omitempty"`
	Hooks            []hookAt `json:",omitempty"`
	// Credential is the token's, sealed (queueUnhook); "" from a server
	// that predates it, or when the token was gone already.
	Credential string `json:",omitempty"`
}

// hookAt is a webhook at the host: its repository and its ID there.
type hookAt struct {
	Identifier, Hook string
}

// hooks are the webhooks u removes.
func (u unhook) hooks() []hookAt {
	if u.Hook != "" {
		return append([]hookAt{{Identifier: u.Identifier, Hook: u.Hook}}, u.Hooks...)
	}
	return u.Hooks
}

func (s *Service) enqueue(ctx context.Context, q store.Q, msgs ...outbox.Message) error {
	if s.queue == nil {
		return errors.New("vcs: the connection queue is not set up (Options.Ingress)")
	}
	if _, err := s.queue.Enqueue(ctx, q, msgs...); err != nil {
		return err
	}
	s.queue.Wake().Signal()
	return nil
}
