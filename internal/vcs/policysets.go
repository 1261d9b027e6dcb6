package vcs

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// PolicySetConnectionSecretColumn is the sealed webhook secret of a policy
// set's connection.
var PolicySetConnectionSecretColumn = seal.Column{Table: "vcs_policy_set_connections", IDColumn: "policy_set_id", Column: "secret",
	Purpose: "vcs_policy_set_connections.secret"}

var policySetOwner = owner{table: "vcs_policy_set_connections", column: "policy_set_id", secret: PolicySetConnectionSecretColumn, policySet: true}

// PolicySet is what the VCS domain reads of a policy set it makes versions
// of: which pushes make one (PoliciesPath, the files under it; or
// UpdatePatterns, files matching one).
type PolicySet struct {
	ID, Organization string
	PoliciesPath     string
	UpdatePatterns   []string
}

// PolicySets are the policy sets as the VCS domain makes their versions,
// acting for the system (the set's connection decided it: a policy
// manager made it).
type PolicySets interface {
	// VCSPolicySet reads a set (core.NotFound when it is gone).
	VCSPolicySet(ctx context.Context, id string) (*PolicySet, error)
	// ConfigurePolicySet makes a version of the set from a commit's
	// archive (source: the provider; origin: the commit's SHA, link and
	// repository), which becomes its current version once checked.
	ConfigurePolicySet(ctx context.Context, id string, archive []byte, source string, origin Origin) error
	// DisconnectVCS removes the vcs-repo of sets inside q's transaction
	// (their token is being deleted).
	DisconnectVCS(ctx context.Context, q store.Q, setIDs []string) error
}

// ResolvePolicySet checks the connection a caller who manages org's
// policies asks for a policy set: cur is the set's (nil when none), o is
// merged over it; the branch is the repository's default one when none
// is named. The host must show the repository and the branch.
func (s *Service) ResolvePolicySet(ctx context.Context, org string, cur *Repo, o RepoOptions) (*Repo, error) {
	if err := authz.Allows(ctx, authz.OrgManagePolicies, authz.Resource{Organization: org}); err != nil {
		return nil, core.Forbidden("you may not manage policies of organization %q", org)
	}
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
	set(&next.Branch, o.Branch)
	if cur != nil && (next.Identifier != cur.Identifier || next.OAuthTokenID != cur.OAuthTokenID) {
		next.WebhookURL = "" // another repository or token: a new webhook
		if o.Branch == nil && next.Identifier != cur.Identifier {
			next.Branch = ""
		}
	}
	if o.IngressSubmodules != nil {
		next.IngressSubmodules = *o.IngressSubmodules
	}
	if o.TagsRegex != nil && *o.TagsRegex != "" || o.Tags != nil && *o.Tags {
		return nil, core.Invalid("vcs-repo: a policy set follows a branch, not tags")
	}
	if err := checkFields(&next); err != nil {
		return nil, err
	}
	var prev *Repo
	if next.WebhookURL != "" {
		prev = cur
	}
	return s.resolveOwned(ctx, org, prev, &next)
}

// ConnectPolicySet records, inside the set's transaction q, its
// connection next (nil: none): the webhook is registered after the commit
// and the branch's head made the set's version; a webhook no longer used
// is removed from the host.
func (s *Service) ConnectPolicySet(ctx context.Context, q store.Q, setID string, next *Repo) error {
	return s.connect(ctx, q, policySetOwner, setID, next, "")
}

// fetchPolicySet makes a policy set's version of a commit: its branch's
// head on connecting, a push's when the push changed the set's policies.
func (s *Service) fetchPolicySet(ctx context.Context, c *connection, in ingress) error {
	ps, err := s.ingress.PolicySets.VCSPolicySet(ctx, in.Workspace)
	if core.KindOf(err) == core.KindNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	// HCP Terraform's rule: a push changing a file that matches one of
	// the set's policy-update-patterns, or, without patterns, any file
	// under its policies-path (the whole repository when none).
	w := &Workspace{FileTriggersEnabled: true, WorkingDirectory: ps.PoliciesPath, TriggerPatterns: ps.UpdatePatterns}
	if !in.Connect && !Triggers(w, in.Changed, in.Truncated) {
		s.logger.Info("push changed no file of the policy set", "policy_set", ps.ID, "commit", in.SHA)
		return nil
	}
	h, err := s.hostFor(ctx, c.token)
	if err != nil {
		return permanentHost(err)
	}
	if in.Connect {
		head, err := h.Branch(ctx, c.identifier, c.branch)
		if err != nil {
			return permanentHost(err)
		}
		in.SHA = head.SHA
	}
	archive, err := s.archive(ctx, h, c, in.SHA)
	if err != nil {
		return permanentHost(err)
	}
	origin := Origin{CommitSHA: in.SHA, CommitURL: h.HTTPURL + "/" + c.identifier + "/commit/" + in.SHA, Identifier: c.identifier}
	return permanentHost(s.ingress.PolicySets.ConfigurePolicySet(ctx, ps.ID, archive, string(h.Kind), origin))
}
