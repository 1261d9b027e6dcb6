package server

import (
	"context"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/vcs"
)

// vcsProjects shows projects to the VCS provider domain.
type vcsProjects struct{ projects *project.Service }

func (a vcsProjects) Organization(ctx context.Context, id string) (string, error) {
	p, err := a.projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}

func (a vcsProjects) name(ctx context.Context, id string) (string, error) {
	p, err := a.projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

// vcsPools shows agent pools to the VCS provider domain.
type vcsPools struct{ pools *agent.Service }

func (a vcsPools) Organization(ctx context.Context, id string) (string, error) {
	return a.pools.PoolOrganization(ctx, id)
}

// wireVCS builds the VCS provider service.
func (s *Server) wireVCS() error {
	var err error
	s.VCS, err = vcs.NewService(vcs.Options{DB: s.DB, Organizations: sshKeyOrgs{s.Orgs}, Projects: vcsProjects{s.Projects},
		AgentPools: vcsPools{s.AgentPools}, Keys: s.Keys})
	return err
}
