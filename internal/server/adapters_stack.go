package server

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/store"
)

// wireStacks builds the stack service; a project that holds stacks is not
// deleted.
func (s *Server) wireStacks() error {
	var err error
	s.Stacks, err = stack.NewService(stack.Options{DB: s.DB, Blobs: s.Blobs, Signer: s.Signer,
		Projects: stackProjects{s.Projects}, Orgs: orchOrgs{s}, Logger: s.logger.With("component", "stack")})
	if err != nil {
		return err
	}
	s.Projects.OnDelete = append(s.Projects.OnDelete, func(ctx context.Context, q store.Q, projectID string) error {
		n, err := stack.CountInProject(ctx, q, projectID)
		if err != nil {
			return err
		}
		if n > 0 {
			return core.Conflict("project %s still holds %d stacks; delete them first", projectID, n)
		}
		return nil
	})
	return nil
}

type stackProjects struct{ p *project.Service }

func (a stackProjects) Organization(ctx context.Context, id string) (string, error) {
	p, err := a.p.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}
