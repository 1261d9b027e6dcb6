package authz

import (
	"context"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
)

type modelKey struct{}

// WithModel returns ctx carrying the model, so that services deep in a
// request ask the same model the guard asked (the guard does this for every
// API request).
func WithModel(ctx context.Context, s *Service) context.Context {
	return context.WithValue(ctx, modelKey{}, s)
}

// Allows asks the model in ctx whether the caller in ctx may do action on
// res: nil, or a core.Forbidden / core.NotFound error. Services call it for
// their decisions. Without a model in ctx (a service used on its own, as
// in its package tests) only owners are allowed, the strictest answer.
func Allows(ctx context.Context, action Action, res Resource) error {
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		if auth.FromContext(ctx).IsOwner(res.Organization) {
			return nil
		}
		return core.Forbidden("only owners of organization %q may do this", res.Organization)
	}
	if res.WorkspaceID != "" && res.ProjectID == "" {
		if full, err := s.resolver.Resolve(ctx, res.WorkspaceID); err == nil {
			res = full
		}
	}
	return s.Check(ctx, action, res)
}
