// Package vcsrepo is a workspace's or a stack's connection to a
// repository as the domains keep it and a request sends it: the types the
// workspace, stack and VCS domains share (internal/vcs checks and keeps
// the connections; this package has no dependencies of theirs).
package vcsrepo

import (
	"encoding/json"

	"github.com/terracehq/terrace/internal/core"
)

// Repo is a workspace's or a stack's connection to a repository, as it
// keeps and shows it (its settings JSON has these keys). Its secret (the
// webhook's) is the VCS domain's alone.
type Repo struct {
	Identifier        string `json:"identifier"`
	DisplayIdentifier string `json:"display-identifier"`
	// Branch is the branch whose pushes run: the repository's default
	// branch, named, when the connection was made without one.
	Branch            string `json:"branch"`
	OAuthTokenID      string `json:"oauth-token-id"`
	TagsRegex         string `json:"tags-regex,omitempty"`
	IngressSubmodules bool   `json:"ingress-submodules"`
	ServiceProvider   string `json:"service-provider"`
	RepositoryHTTPURL string `json:"repository-http-url"`
	// WebhookURL is where the host delivers the repository's events.
	WebhookURL string `json:"webhook-url"`
	// Tags, SourceDirectory and TagPrefix are a registry module's: it
	// publishes a version for each tag (Tags, Branch empty), from the
	// folder SourceDirectory ("" the root), of tags starting with
	// TagPrefix (a monorepo's modules tag apart).
	Tags            bool   `json:"tags,omitempty"`
	SourceDirectory string `json:"source-directory,omitempty"`
	TagPrefix       string `json:"tag-prefix,omitempty"`
}

// View is a connection as the API shows it (go-tfe's VCSRepo), the same
// for a workspace, a registry module and a policy set.
type View struct {
	Branch            string `json:"branch"`
	DisplayIdentifier string `json:"display-identifier"`
	Identifier        string `json:"identifier"`
	IngressSubmodules bool   `json:"ingress-submodules"`
	OAuthTokenID      string `json:"oauth-token-id"`
	RepositoryHTTPURL string `json:"repository-http-url"`
	ServiceProvider   string `json:"service-provider"`
	// Tags: the connection follows tags (a workspace's tags-regex, a
	// module publishing from tags).
	Tags            bool   `json:"tags"`
	TagsRegex       string `json:"tags-regex"`
	WebhookURL      string `json:"webhook-url"`
	SourceDirectory string `json:"source-directory,omitempty"`
	TagPrefix       string `json:"tag-prefix,omitempty"`
}

// View returns r as the API shows it (nil for none).
func (r *Repo) View() *View {
	if r == nil {
		return nil
	}
	return &View{Branch: r.Branch, DisplayIdentifier: r.DisplayIdentifier, Identifier: r.Identifier, IngressSubmodules: r.IngressSubmodules,
		OAuthTokenID: r.OAuthTokenID, RepositoryHTTPURL: r.RepositoryHTTPURL, ServiceProvider: r.ServiceProvider,
		Tags: r.Tags || r.TagsRegex != "", TagsRegex: r.TagsRegex, WebhookURL: r.WebhookURL, SourceDirectory: r.SourceDirectory, TagPrefix: r.TagPrefix}
}

// Same reports whether two connections (either nil) are the same one.
func Same(a, b *Repo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Options are what a request sends of a connection; nil fields are
// absent.
type Options struct {
	Identifier, Branch, OAuthTokenID, TagsRegex *string
	IngressSubmodules                           *bool
	// A registry module's (Repo's fields of the same names).
	Tags                       *bool
	SourceDirectory, TagPrefix *string
}

// Decode reads a request's vcs-repo attribute (a workspace's or a
// stack's): remove for null, the options for an object, nothing when
// absent.
func Decode(raw json.RawMessage) (o *Options, remove bool, err error) {
	switch {
	case string(raw) == "null":
		return nil, true, nil
	case len(raw) == 0:
		return nil, false, nil
	}
	var v struct {
		Identifier        *string `json:"identifier"`
		Branch            *string `json:"branch"`
		OAuthTokenID      *string `json:"oauth-token-id"`
		TagsRegex         *string `json:"tags-regex"`
		IngressSubmodules *bool   `json:"ingress-submodules"`
		GHAInstallationID *string `json:"github-app-installation-id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, core.Invalid("attribute \"vcs-repo\" must be an object of identifier, branch, oauth-token-id, tags-regex and ingress-submodules: %v", err)
	}
	if v.GHAInstallationID != nil && *v.GHAInstallationID != "" {
		return nil, false, core.Invalid("vcs-repo: GitHub App installations are not supported by this server; connect with an oauth-token-id")
	}
	return &Options{Identifier: v.Identifier, Branch: v.Branch, OAuthTokenID: v.OAuthTokenID, TagsRegex: v.TagsRegex,
		IngressSubmodules: v.IngressSubmodules}, false, nil
}
