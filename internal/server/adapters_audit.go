package server

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
)

// locateForAudit tells the audit Recorder which organization a resource
// named by ID belongs to, through the domain services (so with the
// caller's own visibility: a resource the caller cannot see is not found,
// and such a request is not recorded since it fails).
func (s *Server) locateForAudit(ctx context.Context, collection, id string) (string, error) {
	workspaceOrg := func(wsID string, err error) (string, error) {
		if err != nil {
			return "", err
		}
		w, err := s.Workspaces.Get(ctx, wsID)
		if err != nil {
			return "", err
		}
		return w.Organization, nil
	}
	runOrg := func(runID string) (string, error) {
		r, err := s.Runs.Get(ctx, runID)
		if err != nil {
			return "", err
		}
		return workspaceOrg(r.WorkspaceID, nil)
	}
	switch collection {
	case "workspaces":
		return workspaceOrg(id, nil)
	case "runs":
		return runOrg(id)
	case "plans", "applies":
		r, err := s.Runs.GetByPhase(ctx, id)
		if err != nil {
			return "", err
		}
		return workspaceOrg(r.WorkspaceID, nil)
	case "comments":
		c, err := s.Runs.GetComment(ctx, id)
		if err != nil {
			return "", err
		}
		return runOrg(c.RunID)
	case "projects":
		p, err := s.Projects.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return p.Organization, nil
	case "teams":
		t, err := s.Teams.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return t.Organization, nil
	case "organization-memberships":
		m, err := s.Teams.GetMembership(ctx, id)
		if err != nil {
			return "", err
		}
		return m.Organization, nil
	case "varsets":
		return s.Variables.VarsetOrganization(ctx, id)
	case "agent-pools":
		p, err := s.AgentPools.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return p.Organization, nil
	case "ssh-keys":
		// The key's organization, for a caller who may see it (the
		// request's own rule is the guard's and the service's).
		return s.SSHKeys.Organization(ctx, s.DB, id)
	case "tags":
		return s.Workspaces.TagOrganization(ctx, id)
	case "reserved-tag-keys", "reserved-tags":
		return s.Workspaces.ReservedTagKeyOrganization(ctx, id)
	case "no-code-modules":
		m, err := s.NoCode.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return m.Organization, nil
	case "gpg-keys":
		// /api/registry/private/v2/gpg-keys/{namespace}/{key-id}: the
		// namespace is the organization.
		return id, nil
	case "registry-modules":
		// Legacy routes name the organization: actions/delete/{org}/…
		if parts := strings.Split(id, "/"); len(parts) >= 3 && parts[0] == "actions" {
			return parts[2], nil
		} else if len(parts) >= 2 {
			return parts[0], nil
		}
		m, err := s.Registry.GetByID(ctx, id)
		if err != nil {
			return "", err
		}
		return m.Organization, nil
	case "configuration-versions":
		cv, err := s.ConfigVersions.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return workspaceOrg(cv.WorkspaceID, nil)
	case "state-versions":
		v, err := s.States.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return workspaceOrg(v.WorkspaceID, nil)
	case "state-version-outputs":
		o, err := s.States.Output(ctx, id)
		if err != nil {
			return "", err
		}
		v, err := s.States.Get(ctx, o.StateVersionID)
		if err != nil {
			return "", err
		}
		return workspaceOrg(v.WorkspaceID, nil)
	case "authentication-tokens":
		t, err := s.Auth.GetToken(ctx, id)
		if err != nil {
			return "", err
		}
		switch t.Kind {
		case auth.KindTeam:
			return s.Teams.TeamOrganization(ctx, t.Subject)
		case auth.KindOrganization, auth.KindAuditTrails, auth.KindAgent:
			return s.Orgs.NameByID(ctx, t.Subject)
		}
		return "", nil // user tokens: the site's
	case "users", "account", "admin":
		return "", nil
	}
	return "", core.NotFound("no organization known for %s %s", collection, id)
}
