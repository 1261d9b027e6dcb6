package vcs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// Service manages VCS providers. Those who manage VCS settings, or
// administer a workspace, see an organization's clients and tokens
// (authz.OrgReadVCS); those who manage VCS settings create, change and
// delete them (authz.OrgManageVCS).
type Service struct {
	db       *store.DB
	orgs     Organizations
	projects Projects
	pools    AgentPools
	// Keys seals secrets at rest (Columns); nil stores them as given.
	Keys *seal.Keyring
	// OnDeleteToken hooks run inside the transaction that deletes tokens.
	OnDeleteToken []OnDeleteToken

	baseURL string
	client  *http.Client
	// gitCA is what git trusts when it fetches (nil: the system's CAs):
	// the system's bundle and Options.CA.
	gitCA   []byte
	ingress Ingress
	queue   *outbox.Queue
	logger  *slog.Logger
	// renewMu makes this replica's token renewals take turns.
	renewMu sync.Mutex
}

// The sealed columns of this domain (seal.Keyring.Reseal re-encrypts
// them when the data key rotates).
var (
	SecretColumn     = seal.Column{Table: "oauth_clients", IDColumn: "id", Column: "secret", Purpose: "oauth_clients.secret"}
	PrivateKeyColumn = seal.Column{Table: "oauth_clients", IDColumn: "id", Column: "private_key", Purpose: "oauth_clients.private_key"}
	TokenColumn      = seal.Column{Table: "oauth_tokens", IDColumn: "id", Column: "token", Purpose: "oauth_tokens.token"}
	SSHKeyColumn     = seal.Column{Table: "oauth_tokens", IDColumn: "id", Column: "ssh_key", Purpose: "oauth_tokens.ssh_key"}
)

// Columns are every sealed column of this domain.
var Columns = []seal.Column{SecretColumn, PrivateKeyColumn, TokenColumn, SSHKeyColumn, RefreshColumn, ConnectionSecretColumn, StackConnectionSecretColumn,
	ModuleConnectionSecretColumn, PolicySetConnectionSecretColumn}

// Organizations checks that an organization exists and that the caller
// may see it (core.NotFound otherwise).
type Organizations interface {
	Check(ctx context.Context, name string) error
}

// Projects returns the organization of a project the caller may see
// (core.NotFound otherwise).
type Projects interface {
	Organization(ctx context.Context, id string) (string, error)
}

// AgentPools returns the organization of an agent pool the caller may see
// (core.NotFound otherwise).
type AgentPools interface {
	Organization(ctx context.Context, id string) (string, error)
}

// Options are what NewService needs.
type Options struct {
	DB            *store.DB
	Organizations Organizations
	Projects      Projects
	AgentPools    AgentPools
	Keys          *seal.Keyring
	// BaseURL is the server's https://host: webhook URLs and the links of
	// commit statuses start with it.
	BaseURL string
	// CA holds PEM certificates trusted, beside the system's, when
	// Terrace reaches a repository host (one whose certificate a private
	// CA signed).
	CA      []byte
	Ingress Ingress
	Logger  *slog.Logger
}

// NewService returns a VCS provider service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Organizations == nil || o.Projects == nil || o.AgentPools == nil || o.BaseURL == "" {
		return nil, errors.New("vcs.NewService: DB, Organizations, Projects, AgentPools and BaseURL are required")
	}
	if in := o.Ingress; in.Workspace == nil || in.Configure == nil || in.Queue == nil || in.Disconnect == nil || in.DisconnectStacks == nil ||
		in.Stack == nil || in.ConfigureStack == nil || in.Modules == nil || in.PolicySets == nil || in.MaxArchive <= 0 {
		return nil, errors.New("vcs.NewService: Ingress needs Workspace, Configure, Queue, Disconnect, DisconnectStacks, Stack, ConfigureStack, Modules, PolicySets and MaxArchive")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if len(o.CA) > 0 && !pool.AppendCertsFromPEM(o.CA) {
		return nil, errors.New("vcs.NewService: the CA holds no PEM certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	s := &Service{db: o.DB, orgs: o.Organizations, projects: o.Projects, pools: o.AgentPools, Keys: o.Keys,
		baseURL: strings.TrimRight(o.BaseURL, "/"), client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		ingress: o.Ingress, logger: o.Logger}
	if len(o.CA) > 0 {
		// git trusts only the file it is given: the system's bundle too.
		for _, f := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"} {
			if b, err := os.ReadFile(f); err == nil {
				s.gitCA = append(b, '\n')
				break
			}
		}
		s.gitCA = append(s.gitCA, o.CA...)
	}
	s.OnDeleteToken = []OnDeleteToken{s.DeleteTokens}
	if s.queue, err = s.newQueue(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Service) checkOrganization(ctx context.Context, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return err
	}
	return s.orgs.Check(ctx, org)
}

func requireManage(ctx context.Context, org string) error {
	if authz.Allows(ctx, authz.OrgManageVCS, authz.Resource{Organization: org}) != nil {
		return core.Forbidden("you may not manage the VCS providers of organization %q", org)
	}
	return nil
}

// redact keeps a driver error from carrying a secret into a log.
func redact(err error) error {
	if err == nil {
		return nil
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	return errors.New("database error (details withheld: the statement carried a secret)")
}

// seal seals v for c, or returns nil (SQL NULL) for nil.
func (s *Service) seal(c seal.Column, v *string) (any, error) {
	if v == nil {
		return nil, nil
	}
	return s.Keys.SealString(c.Purpose, *v)
}

const clientCols = `id, organization_name, name, service_provider, api_url, http_url, key, COALESCE(secret, '') <> '', rsa_public_key, organization_scoped, created_at`

func scanClient(sc store.Scanner) (*Client, error) {
	var c Client
	var name *string
	var created int64
	var provider string
	if err := sc.Scan(&c.ID, &c.Organization, &name, &provider, &c.APIURL, &c.HTTPURL, &c.Key, &c.HasSecret, &c.RSAPublicKey, &c.OrganizationScoped, &created); err != nil {
		return nil, err
	}
	c.Name, c.Provider, c.CreatedAt = name, Provider(provider), core.FromMicros(created)
	return &c, nil
}

// fill reads the tokens and projects of clients: two statements,
// however many clients.
func fill(ctx context.Context, q store.Q, clients []*Client) error {
	if len(clients) == 0 {
		return nil
	}
	byID := make(map[string]*Client, len(clients))
	ids := make([]string, len(clients))
	for i, c := range clients {
		c.Tokens, c.Projects = []string{}, []string{}
		byID[c.ID], ids[i] = c, c.ID
	}
	in, args := store.In(ids)
	tokens, err := store.Pairs(ctx, q, `SELECT oauth_client_id, id FROM oauth_tokens WHERE oauth_client_id IN (`+in+`) ORDER BY created_at, id`, args...)
	if err != nil {
		return err
	}
	for _, p := range tokens {
		byID[p[0]].Tokens = append(byID[p[0]].Tokens, p[1])
	}
	projects, err := store.Pairs(ctx, q, `SELECT oauth_client_id, project_id FROM oauth_client_projects WHERE oauth_client_id IN (`+in+`) ORDER BY project_id`, args...)
	if err != nil {
		return err
	}
	for _, p := range projects {
		byID[p[0]].Projects = append(byID[p[0]].Projects, p[1])
	}
	return nil
}

// ListClients returns an organization's clients, oldest first.
func (s *Service) ListClients(ctx context.Context, org string) ([]*Client, error) {
	if err := s.checkOrganization(ctx, org); err != nil {
		return nil, err
	}
	clients, err := store.All(ctx, s.db, scanClient, `SELECT `+clientCols+` FROM oauth_clients WHERE organization_name = ? ORDER BY created_at, id`, org)
	if err != nil {
		return nil, err
	}
	return clients, fill(ctx, s.db, clients)
}

// projectsOf checks that every project is one of org's that the caller
// may see, and returns them without repeats.
func (s *Service) projectsOf(ctx context.Context, org string, ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		if slices.Contains(out, id) {
			continue
		}
		porg, err := s.projects.Organization(ctx, id)
		if err != nil || porg != org {
			return nil, core.NotFound("project %q not found in organization %q", id, org)
		}
		out = append(out, id)
	}
	return out, nil
}

// checkPool refuses an agent pool: Terrace reaches VCS providers from the
// server, not through agents (HCP Terraform's private VCS).
func (s *Service) checkPool(ctx context.Context, org string, id *string) error {
	if id == nil || *id == "" {
		return nil
	}
	porg, err := s.pools.Organization(ctx, *id)
	if err != nil || porg != org {
		return core.Invalid("the provided agent pool does not exist or you are not authorized to use it")
	}
	return core.Invalid("agent-pool: Terrace reaches VCS providers from its server; it does not reach them through agent pools")
}

// CreateClient adds a client to an organization, and its token when the
// options carry a token string.
func (s *Service) CreateClient(ctx context.Context, org string, o ClientOptions) (*Client, error) {
	if err := s.checkOrganization(ctx, org); err != nil {
		return nil, err
	}
	if err := requireManage(ctx, org); err != nil {
		return nil, err
	}
	if o.Provider == nil || *o.Provider == "" {
		return nil, core.Invalid("service-provider is required")
	}
	p, err := known(*o.Provider)
	if err != nil {
		return nil, err
	}
	c := &Client{ID: core.NewID(PrefixClient), Organization: org, Provider: p, OrganizationScoped: true, CreatedAt: core.Now(),
		Tokens: []string{}, Projects: []string{}}
	for _, u := range []struct {
		attr string
		v    *string
		dst  *string
	}{{"api-url", o.APIURL, &c.APIURL}, {"http-url", o.HTTPURL, &c.HTTPURL}} {
		if u.v == nil {
			return nil, core.Invalid("%s is required", u.attr)
		}
		if err := validURL(u.attr, *u.v); err != nil {
			return nil, err
		}
		*u.dst = strings.TrimRight(*u.v, "/")
	}
	if o.Name != nil {
		if err := validName(*o.Name); err != nil {
			return nil, err
		}
		c.Name = o.Name
	}
	if o.OrganizationScoped != nil {
		c.OrganizationScoped = *o.OrganizationScoped
	}
	if err := s.checkSecrets(c, o); err != nil {
		return nil, err
	}
	if o.Key != nil {
		c.Key = *o.Key
	}
	if o.RSAPublicKey != nil {
		c.RSAPublicKey = *o.RSAPublicKey
	}
	if p.tokenless() && o.Key != nil && *o.Key == "" {
		return nil, core.Invalid("The Consumer Key for %s must be present. Please add a value for `key`.", p.DisplayName())
	}
	hasToken := o.TokenString != nil && *o.TokenString != ""
	if !hasToken && !p.tokenless() {
		// A provider whose flow Terrace runs may be made first, so that
		// its callback URL can be registered with the host's OAuth
		// application; it is connected once it has the application's key
		// and secret (StartConnect).
		if !p.Flows() {
			return nil, core.Invalid("oauth-token-string is required for %s: Terrace connects with a personal access token", p.DisplayName())
		}
	}
	if err := s.checkPool(ctx, org, o.AgentPool); err != nil {
		return nil, err
	}
	if o.Projects != nil {
		if c.Projects, err = s.projectsOf(ctx, org, o.Projects); err != nil {
			return nil, err
		}
	}
	secret, err := s.seal(SecretColumn, o.Secret)
	if err != nil {
		return nil, err
	}
	private, err := s.seal(PrivateKeyColumn, o.PrivateKey)
	if err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO oauth_clients (id, organization_name, name, service_provider, api_url, http_url, key, secret,
			rsa_public_key, private_key, organization_scoped, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, org, c.Name, string(c.Provider), c.APIURL, c.HTTPURL, c.Key, secret, c.RSAPublicKey, private, c.OrganizationScoped,
			core.Micros(c.CreatedAt))
		if err != nil {
			return redact(err)
		}
		for _, p := range c.Projects {
			if _, err := tx.Exec(ctx, `INSERT INTO oauth_client_projects (oauth_client_id, project_id) VALUES (?, ?)`, c.ID, p); err != nil {
				return err
			}
		}
		if hasToken {
			_, err := s.setToken(ctx, tx, c, &oauth2.Token{AccessToken: *o.TokenString}, "")
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating OAuth client: %w", err)
	}
	return c, nil
}

// checkSecrets checks the write-only attributes of a create or an update.
func (s *Service) checkSecrets(c *Client, o ClientOptions) error {
	for _, f := range []struct {
		attr string
		v    *string
	}{{"secret", o.Secret}, {"private-key", o.PrivateKey}, {"oauth-token-string", o.TokenString}, {"key", o.Key}, {"rsa-public-key", o.RSAPublicKey}} {
		if f.v != nil {
			if err := validSecret(f.attr, *f.v); err != nil {
				return err
			}
		}
	}
	if o.PrivateKey != nil && *o.PrivateKey != "" && c.Provider != ADOServer {
		return core.Invalid("private-key is only for %s", ADOServer.DisplayName())
	}
	return nil
}

// loadClient reads a client through q without checking the caller
// (visible does), locking its row for the rest of q's transaction when
// forUpdate.
func (s *Service) loadClient(ctx context.Context, q store.Q, id string, forUpdate bool) (*Client, error) {
	if !core.HasPrefix(id, PrefixClient) {
		return nil, core.NotFound("OAuth client %q not found", id)
	}
	query := `SELECT ` + clientCols + ` FROM oauth_clients WHERE id = ?`
	if forUpdate {
		query += store.ForUpdate(q)
	}
	c, err := scanClient(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("OAuth client %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	return c, fill(ctx, q, []*Client{c})
}

// visible checks that the caller may read the VCS providers of org
// (authz.OrgReadVCS), answering "what not found" to a caller of another
// organization.
func visible(ctx context.Context, org, what string) error {
	if auth.CheckOrganization(ctx, org) != nil {
		return core.NotFound("%s not found", what)
	}
	if err := authz.Allows(ctx, authz.OrgReadVCS, authz.Resource{Organization: org}); err != nil {
		return core.NotFoundAs(err, "%s not found", what)
	}
	return nil
}

// GetClient returns a client the caller may read.
func (s *Service) GetClient(ctx context.Context, id string) (*Client, error) {
	c, err := s.loadClient(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := visible(ctx, c.Organization, fmt.Sprintf("OAuth client %q", id)); err != nil {
		return nil, err
	}
	return c, nil
}

// manageClient checks, before a change's transaction (the authorization
// model reads the store), that the caller may change a client.
func (s *Service) manageClient(ctx context.Context, id string) error {
	c, err := s.GetClient(ctx, id)
	if err != nil {
		return err
	}
	return requireManage(ctx, c.Organization)
}

// UpdateClient changes a client. A token string replaces the client's
// token (or adds one to a client that has none).
func (s *Service) UpdateClient(ctx context.Context, id string, o ClientOptions) (*Client, error) {
	if err := s.manageClient(ctx, id); err != nil {
		return nil, err
	}
	var out *Client
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		c, err := s.loadClient(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if o.Provider != nil || o.APIURL != nil || o.HTTPURL != nil || o.Projects != nil {
			return core.Invalid("service-provider, api-url, http-url and projects do not change on update (projects: use relationships/projects)")
		}
		if o.Name != nil {
			if err := validName(*o.Name); err != nil {
				return err
			}
			c.Name = o.Name
		}
		if err := s.checkSecrets(c, o); err != nil {
			return err
		}
		if o.Key != nil {
			if *o.Key == "" && c.Provider.tokenless() {
				return core.Invalid("The Consumer Key for %s must be present. Please add a value for `key`.", c.Provider.DisplayName())
			}
			c.Key = *o.Key
		}
		if o.RSAPublicKey != nil {
			c.RSAPublicKey = *o.RSAPublicKey
		}
		if o.OrganizationScoped != nil {
			c.OrganizationScoped = *o.OrganizationScoped
		}
		if err := s.checkPool(ctx, c.Organization, o.AgentPool); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_clients SET name = ?, key = ?, rsa_public_key = ?, organization_scoped = ? WHERE id = ?`,
			c.Name, c.Key, c.RSAPublicKey, c.OrganizationScoped, c.ID); err != nil {
			return err
		}
		for _, f := range []struct {
			col seal.Column
			v   *string
		}{{SecretColumn, o.Secret}, {PrivateKeyColumn, o.PrivateKey}} {
			if f.v == nil {
				continue
			}
			v, err := s.seal(f.col, f.v)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE oauth_clients SET `+f.col.Column+` = ? WHERE id = ?`, v, c.ID); err != nil {
				return redact(err)
			}
		}
		if o.TokenString != nil && *o.TokenString != "" {
			if _, err := s.setToken(ctx, tx, c, &oauth2.Token{AccessToken: *o.TokenString}, ""); err != nil {
				return err
			}
		}
		out = c
		return nil
	})
	return out, err
}

// DeleteClient removes a client and its tokens; the OnDeleteToken hooks
// drop every reference to its tokens in the same transaction.
func (s *Service) DeleteClient(ctx context.Context, id string) error {
	if err := s.manageClient(ctx, id); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		c, err := s.loadClient(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if len(c.Tokens) > 0 {
			for _, fn := range s.OnDeleteToken {
				if err := fn(ctx, tx, c.Tokens); err != nil {
					return fmt.Errorf("deleting OAuth client %s: %w", c.ID, err)
				}
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM oauth_clients WHERE id = ?`, c.ID)
		return err
	})
}

// ChangeProjects scopes a client to more projects (add) or fewer.
func (s *Service) ChangeProjects(ctx context.Context, id string, projects []string, add bool) error {
	if len(projects) == 0 {
		return core.Invalid("at least one project is required")
	}
	c, err := s.GetClient(ctx, id)
	if err != nil {
		return err
	}
	if err := requireManage(ctx, c.Organization); err != nil {
		return err
	}
	ids, err := s.projectsOf(ctx, c.Organization, projects)
	if err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := s.loadClient(ctx, tx, id, true); err != nil {
			return err
		}
		for _, p := range ids {
			q := `DELETE FROM oauth_client_projects WHERE oauth_client_id = ? AND project_id = ?`
			if add {
				q = `INSERT INTO oauth_client_projects (oauth_client_id, project_id) VALUES (?, ?) ON CONFLICT DO NOTHING`
			}
			if _, err := tx.Exec(ctx, q, c.ID, p); err != nil {
				return err
			}
		}
		return nil
	})
}
