// Package vcs keeps an organization's VCS providers: OAuth clients, HCP
// Terraform's name for a connection to a repository host (GitHub, GitLab,
// Gitea, …), and the OAuth tokens Terrace reads repositories and
// registers webhooks with.
//
// A provider's secrets (the token string, an OAuth client's secret and
// private key, a token's SSH key) are write-only: accepted on create and
// update, sealed at rest, never returned by the API nor written to a log.
// Only Credential, for the server acting for the system, reads a token
// back. docs/design/vcs.md says what is built and what is not.
package vcs

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ID prefixes: HCP Terraform's.
const (
	PrefixClient = "oc"
	PrefixToken  = "ot"
)

// Provider is a service-provider value of the API.
type Provider string

// The providers HCP Terraform names (go-tfe's ServiceProviderType), and
// Gitea and Forgejo, which Terrace adds.
const (
	ADOServer           Provider = "ado_server"
	ADOServices         Provider = "ado_services"
	BitbucketDataCenter Provider = "bitbucket_data_center"
	BitbucketHosted     Provider = "bitbucket_hosted"
	BitbucketServer     Provider = "bitbucket_server"
	BitbucketLegacy     Provider = "bitbucket_server_legacy"
	GitHub              Provider = "github"
	GitHubEnterprise    Provider = "github_enterprise"
	GitLabHosted        Provider = "gitlab_hosted"
	GitLabCE            Provider = "gitlab_community_edition"
	GitLabEE            Provider = "gitlab_enterprise_edition"
	Gitea               Provider = "gitea"
	Forgejo             Provider = "forgejo"
)

// providers maps each provider to its display name
// (service-provider-display-name).
var providers = map[Provider]string{
	ADOServer:           "Azure DevOps Server",
	ADOServices:         "Azure DevOps Services",
	BitbucketDataCenter: "Bitbucket Data Center",
	BitbucketHosted:     "Bitbucket Cloud",
	BitbucketServer:     "Bitbucket Server",
	BitbucketLegacy:     "Bitbucket Server",
	GitHub:              "GitHub",
	GitHubEnterprise:    "GitHub Enterprise",
	GitLabHosted:        "GitLab.com",
	GitLabCE:            "GitLab Community Edition",
	GitLabEE:            "GitLab Enterprise Edition",
	Gitea:               "Gitea",
	Forgejo:             "Forgejo",
}

// DisplayName is the provider's name for people; "" for an unknown one.
func (p Provider) DisplayName() string { return providers[p] }

// tokenless are the providers a client is created for without a token
// string: Bitbucket Server and Data Center connect through an application
// link (key and RSA key pair) instead.
func (p Provider) tokenless() bool {
	return p == BitbucketServer || p == BitbucketDataCenter || p == BitbucketLegacy
}

// Limits on what a client may send.
const (
	MaxName   = 255
	MaxURL    = 2048
	MaxSecret = 64 << 10
)

// Client is an OAuth client as shown to callers: it carries no secret.
type Client struct {
	ID           string
	Organization string
	Name         *string
	Provider     Provider
	APIURL       string
	HTTPURL      string
	Key          string
	// HasSecret: the client's OAuth application has a secret (with Key,
	// what the host's authorization flow needs); the secret itself is
	// never read out.
	HasSecret          bool
	RSAPublicKey       string
	OrganizationScoped bool
	CreatedAt          time.Time
	// Tokens are the IDs of its OAuth tokens, oldest first.
	Tokens []string
	// Projects are the IDs of the projects it is scoped to, by ID.
	Projects []string
}

// Token is an OAuth token as shown to callers: it carries no secret.
type Token struct {
	ID                  string
	Client              string
	Organization        string
	HasSSHKey           bool
	ServiceProviderUser string
	CreatedAt           time.Time
}

// ClientOptions are the attributes of a new or changed client; nil fields
// are absent.
type ClientOptions struct {
	Name               *string
	Provider           *string
	APIURL             *string
	HTTPURL            *string
	Key                *string
	Secret             *string
	RSAPublicKey       *string
	PrivateKey         *string
	TokenString        *string
	OrganizationScoped *bool
	// Projects (create only): nil when absent.
	Projects []string
	// AgentPool is the agent-pool relationship's ID, nil when absent.
	AgentPool *string
}

// String never shows a secret, so that options printed by mistake leak
// nothing.
func (o ClientOptions) String() string {
	show := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	hidden := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return "[redacted]"
	}
	return "vcs.ClientOptions{Name: " + show(o.Name) + ", Provider: " + show(o.Provider) + ", APIURL: " + show(o.APIURL) +
		", HTTPURL: " + show(o.HTTPURL) + ", Key: " + show(o.Key) + ", Secret: " + hidden(o.Secret) +
		", PrivateKey: " + hidden(o.PrivateKey) + ", TokenString: " + hidden(o.TokenString) + "}"
}

// GoString is String for %#v.
func (o ClientOptions) GoString() string { return o.String() }

// TokenOptions change a token: SSHKey (the ssh-key attribute) is the
// private key git uses over SSH, write-only.
type TokenOptions struct {
	SSHKey *string
}

// String never shows the key.
func (o TokenOptions) String() string {
	if o.SSHKey == nil {
		return "vcs.TokenOptions{SSHKey: <nil>}"
	}
	return "vcs.TokenOptions{SSHKey: [redacted]}"
}

// GoString is String for %#v.
func (o TokenOptions) GoString() string { return o.String() }

func validName(n string) error {
	if strings.TrimSpace(n) == "" {
		return core.Invalid("name must not be blank")
	}
	if utf8.RuneCountInString(n) > MaxName {
		return core.Invalid("name is longer than %d characters", MaxName)
	}
	return nil
}

// validURL accepts an absolute http or https URL with a host and no
// credentials in it.
func validURL(attr, s string) error {
	if s == "" {
		return core.Invalid("%s is required", attr)
	}
	if len(s) > MaxURL {
		return core.Invalid("%s is longer than %d characters", attr, MaxURL)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return core.Invalid("%s must be an absolute http or https URL, not %q", attr, s)
	}
	if u.User != nil {
		return core.Invalid("%s must not hold credentials: give the token as oauth-token-string", attr)
	}
	return nil
}

func validSecret(attr, v string) error {
	if len(v) > MaxSecret {
		return core.Invalid("%s is longer than %d bytes", attr, MaxSecret)
	}
	if !utf8.ValidString(v) {
		return core.Invalid("%s is not valid UTF-8", attr)
	}
	return nil
}

// known returns the provider named by s, or a 422 listing the known ones.
func known(s string) (Provider, error) {
	p := Provider(s)
	if _, ok := providers[p]; ok {
		return p, nil
	}
	names := make([]string, 0, len(providers))
	for k := range providers {
		names = append(names, string(k))
	}
	slices.Sort(names)
	return "", core.Invalid("service-provider %q is not one of %s", s, strings.Join(names, ", "))
}

// validSSHKey accepts a PEM private key, as git's ssh would use it.
func validSSHKey(k string) error {
	if err := validSecret("ssh-key", k); err != nil {
		return err
	}
	t := strings.TrimSpace(k)
	if !strings.HasPrefix(t, "-----BEGIN ") || !strings.Contains(t, "PRIVATE KEY-----") || !strings.HasSuffix(t, "-----") {
		return core.Invalid("Ssh key is invalid: it must be a private key in PEM form (-----BEGIN … PRIVATE KEY-----)")
	}
	return nil
}

// OnDeleteToken runs inside the transaction that deletes tokens (one
// token, or every token of a client being deleted), so that other domains
// drop their references to them: workspaces connected through a token
// lose their connection.
type OnDeleteToken func(ctx context.Context, q store.Q, tokenIDs []string) error
