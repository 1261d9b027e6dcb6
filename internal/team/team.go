// Package team keeps teams and their members. Every organization has an
// "owners" team; its members own the organization.
package team

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// OwnersTeam is the name of the team whose members own an organization.
const OwnersTeam = "owners"

// Service manages teams.
type Service struct {
	db *store.DB
}

// NewService returns a team service.
func NewService(db *store.DB) *Service { return &Service{db: db} }

// CreateOwners creates the owners team of a new organization, with the
// creating user (if any) as its member. It runs inside the organization's
// creation transaction.
func (s *Service) CreateOwners(ctx context.Context, q store.Q, org, userID string) error {
	id := core.NewID(core.PrefixTeam)
	if _, err := q.Exec(ctx, `INSERT INTO teams (id, organization_name, name, attrs, created_at) VALUES (?, ?, ?, ?, ?)`,
		id, org, OwnersTeam, `{"visibility":"secret"}`, core.Micros(core.Now())); err != nil {
		return err
	}
	if userID == "" {
		return nil
	}
	_, err := q.Exec(ctx, `INSERT INTO team_members (team_id, user_id) VALUES (?, ?)`, id, userID)
	return err
}

// UserOrganizations returns the organizations a user belongs to and those
// where the user is an owner.
func (s *Service) UserOrganizations(ctx context.Context, userID string) (member, owner []string, err error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT t.organization_name, t.name FROM teams t JOIN team_members m ON m.team_id = t.id WHERE m.user_id = ?`, userID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var org, name string
		if err := rows.Scan(&org, &name); err != nil {
			return nil, nil, err
		}
		if !seen[org] {
			seen[org] = true
			member = append(member, org)
		}
		if name == OwnersTeam {
			owner = append(owner, org)
		}
	}
	return member, owner, rows.Err()
}

// TeamOrganization returns the organization a team belongs to.
func (s *Service) TeamOrganization(ctx context.Context, teamID string) (string, error) {
	var org string
	err := s.db.QueryRow(ctx, `SELECT organization_name FROM teams WHERE id = ?`, teamID).Scan(&org)
	if store.IsNoRows(err) {
		return "", core.NotFound("team %s not found", teamID)
	}
	return org, err
}
