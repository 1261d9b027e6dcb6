// Package project keeps projects, the folders that group workspaces. Every
// organization has exactly one default project.
package project

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// DefaultName is the name of the project every organization starts with.
const DefaultName = "Default Project"

// Service manages projects.
type Service struct {
	db *store.DB
}

// NewService returns a project service.
func NewService(db *store.DB) *Service { return &Service{db: db} }

// CreateDefault creates an organization's default project inside the
// organization's creation transaction.
func (s *Service) CreateDefault(ctx context.Context, q store.Q, org string) error {
	now := core.Micros(core.Now())
	_, err := q.Exec(ctx, `INSERT INTO projects (id, organization_name, name, is_default, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		core.NewID(core.PrefixProject), org, DefaultName, true, now, now)
	return err
}

// DefaultID returns the ID of an organization's default project.
func (s *Service) DefaultID(ctx context.Context, org string) (string, error) {
	var id string
	err := s.db.QueryRow(ctx, `SELECT id FROM projects WHERE organization_name = ? AND is_default = ?`, org, true).Scan(&id)
	if store.IsNoRows(err) {
		return "", core.NotFound("organization %q has no default project", org)
	}
	return id, err
}
