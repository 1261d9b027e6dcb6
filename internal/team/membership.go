package team

import (
	"context"
	"fmt"
	"net/mail"
	"regexp"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ensureMembership makes the user a member of the organization unless it
// already is.
func ensureMembership(ctx context.Context, q store.Q, org, userID, status string) error {
	_, err := q.Exec(ctx, `INSERT INTO organization_memberships (id, organization_name, user_id, status, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		core.NewID(prefixMembership), org, userID, status, core.Micros(core.Now()))
	if err != nil {
		return fmt.Errorf("adding user %s to organization %s: %w", userID, org, err)
	}
	return nil
}

const membershipCols = `id, organization_name, user_id, status, created_at`

func scanMembership(sc interface{ Scan(...any) error }) (*Membership, error) {
	var m Membership
	var created int64
	if err := sc.Scan(&m.ID, &m.Organization, &m.UserID, &m.Status, &created); err != nil {
		return nil, err
	}
	m.CreatedAt = core.FromMicros(created)
	return &m, nil
}

func (s *Service) loadMembership(ctx context.Context, q store.Q, id string) (*Membership, error) {
	if !core.HasPrefix(id, prefixMembership) {
		return nil, core.NotFound("organization membership %q not found", id)
	}
	m, err := scanMembership(q.QueryRow(ctx, `SELECT `+membershipCols+` FROM organization_memberships WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("organization membership %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT t.id FROM teams t JOIN team_members m ON m.team_id = t.id WHERE t.organization_name = ? AND m.user_id = ? ORDER BY t.name, t.id`, m.Organization, m.UserID)
	if err != nil {
		return nil, err
	}
	if m.TeamIDs, err = scanStrings(rows); err != nil {
		return nil, err
	}
	return m, nil
}

// GetMembership returns an organization membership the caller may see:
// one of an organization the caller is in, or the caller's own invitation
// not yet accepted (which gives no access to the organization), so that
// its user may read and decline it.
func (s *Service) GetMembership(ctx context.Context, id string) (*Membership, error) {
	m, err := s.loadMembership(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if p := auth.FromContext(ctx); m.Status == StatusInvited && p.IsUser() && p.UserID == m.UserID {
		return m, nil
	}
	if err := auth.CheckOrganization(ctx, m.Organization); err != nil {
		return nil, core.NotFound("organization membership %q not found", id)
	}
	return m, nil
}

// MembershipFilter narrows a membership list.
type MembershipFilter struct {
	Emails []string // exact addresses, case-insensitive
	Status string   // invited | active
	Query  string   // substring of the email or username
}

// ListMemberships returns an organization's memberships that match f,
// oldest first, with their users: at most limit (all when negative) from
// offset on, and how many match in all. The filters and the page are the
// store's, so a page costs the same in an organization of ten members or
// ten thousand; the users and teams are read for the page only.
func (s *Service) ListMemberships(ctx context.Context, org string, f MembershipFilter, offset, limit int) ([]*Membership, map[string]*auth.User, int, error) {
	if err := s.checkOrg(ctx, s.db, org); err != nil {
		return nil, nil, 0, err
	}
	// Users are joined only to filter on them: a membership's user
	// exists (the foreign key deletes the membership with it).
	where := `m.organization_name = ?`
	args := []any{org}
	byUser := len(f.Emails) > 0 || f.Query != ""
	if len(f.Emails) > 0 {
		lower := make([]string, len(f.Emails))
		for i, e := range f.Emails {
			lower[i] = strings.ToLower(e)
		}
		in, emails := store.In(lower)
		where += ` AND LOWER(u.email) IN (` + in + `)`
		args = append(args, emails...)
	}
	if f.Status != "" {
		where += ` AND m.status = ?`
		args = append(args, f.Status)
	}
	if q := strings.ToLower(f.Query); q != "" {
		pattern := "%" + store.EscapeLike(q) + "%"
		where += ` AND (LOWER(u.email) LIKE ?` + store.LikeEscape + ` OR LOWER(u.username) LIKE ?` + store.LikeEscape + `)`
		args = append(args, pattern, pattern)
	}
	from := `organization_memberships m`
	if byUser {
		from += ` JOIN users u ON u.id = m.user_id`
	}
	page, total, err := store.Page(ctx, s.db, scanMembership, `m.id, m.organization_name, m.user_id, m.status, m.created_at`, from, where, `m.created_at, m.id`, offset, limit, args...)
	if err != nil {
		return nil, nil, 0, err
	}
	out := []*Membership{}
	ids := make([]string, len(page))
	for i, m := range page {
		ids[i] = m.UserID
	}
	users, err := s.users.GetUsers(ctx, ids)
	if err != nil {
		return nil, nil, 0, err
	}
	teams, err := s.teamsOf(ctx, org, ids)
	if err != nil {
		return nil, nil, 0, err
	}
	for _, m := range page {
		if users[m.UserID] == nil {
			// Gone between the two statements.
			continue
		}
		m.TeamIDs = teams[m.UserID]
		out = append(out, m)
	}
	return out, users, total, nil
}

// teamsOf returns the IDs of org's teams each of users is in, ordered as
// teams list (by name).
func (s *Service) teamsOf(ctx context.Context, org string, users []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(users) == 0 {
		return out, nil
	}
	in, ids := store.In(users)
	pairs, err := store.Pairs(ctx, s.db, `SELECT tm.user_id, t.id FROM team_members tm JOIN teams t ON t.id = tm.team_id
		WHERE t.organization_name = ? AND tm.user_id IN (`+in+`) ORDER BY t.name, t.id`, append([]any{org}, ids...)...)
	for _, p := range pairs {
		out[p[0]] = append(out[p[0]], p[1])
	}
	return out, err
}

// ListOwnMemberships returns the caller's memberships in every organization.
func (s *Service) ListOwnMemberships(ctx context.Context) ([]*Membership, error) {
	p := auth.FromContext(ctx)
	if !p.IsUser() {
		return nil, core.NotFound("organization memberships are only listed for users")
	}
	rows, err := s.db.Query(ctx, `SELECT id FROM organization_memberships WHERE user_id = ? ORDER BY created_at, id`, p.UserID)
	if err != nil {
		return nil, err
	}
	ids, err := scanStrings(rows)
	if err != nil {
		return nil, err
	}
	var out []*Membership
	for _, id := range ids {
		m, err := s.loadMembership(ctx, s.db, id)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

var unsafeUsername = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// usernameFor picks a free username for a user invited by email.
func (s *Service) usernameFor(ctx context.Context, email string) (string, error) {
	base, _, _ := strings.Cut(email, "@")
	base = strings.Trim(unsafeUsername.ReplaceAllString(base, "-"), "-")
	if base == "" {
		base = "user"
	}
	if len(base) > 40 {
		base = base[:40]
	}
	name := base
	for range 10 {
		_, err := s.users.UserByName(ctx, name)
		if core.KindOf(err) == core.KindNotFound {
			return name, nil
		}
		if err != nil {
			return "", err
		}
		name = base + "-" + strings.ToLower(core.RandomString(6))
	}
	return "", fmt.Errorf("no free username for %s", email)
}

// CreateMembership invites an email address into an organization
// (manage-membership), and optionally into some of its teams (as adding a
// member to each: TeamMembers). A user with that address is created when
// none exists. The membership shows as "invited" until the person accepts
// the invitation link sent by Invitations (internal/signin), which makes
// it "active"; until then the person has no access to the organization,
// nor acts in the teams named (UserOrganizations, MemberTeams).
func (s *Service) CreateMembership(ctx context.Context, org, email string, teamIDs []string) (*Membership, error) {
	if err := s.checkOrg(ctx, s.db, org); err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgManageMembers, authz.Resource{Organization: org}); err != nil {
		return nil, err
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != strings.TrimSpace(email) || addr.Name != "" {
		return nil, core.Invalid("email %q is not a valid address", email)
	}
	email = addr.Address
	// Inviting into a team is adding a member to it: the team must be
	// one whose members the caller may change (visible to the caller; the
	// owners team only for owners).
	var teams []*Team
	for _, id := range teamIDs {
		t, err := s.load(ctx, s.db, id, false)
		if err != nil || t.Organization != org {
			return nil, core.NotFound("team %q not found", id)
		}
		if err := allows(ctx, authz.TeamMembers, t); err != nil {
			return nil, err
		}
		teams = append(teams, t)
	}
	u, err := s.users.UserByEmail(ctx, email)
	var username string
	if core.KindOf(err) == core.KindNotFound {
		u = nil
		if username, err = s.usernameFor(ctx, email); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	id := core.NewID(prefixMembership)
	var send func(context.Context)
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if u == nil {
			var err error
			if u, err = s.users.CreateUser(ctx, tx, username, email, false); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO organization_memberships (id, organization_name, user_id, status, created_at) VALUES (?, ?, ?, ?, ?)`,
			id, org, u.ID, StatusInvited, core.Micros(core.Now()))
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("%s is already a member of organization %q", email, org)
		}
		if err != nil {
			return err
		}
		for _, t := range teams {
			if _, err := tx.Exec(ctx, `INSERT INTO team_members (team_id, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, t.ID, u.ID); err != nil {
				return err
			}
		}
		if s.Invitations != nil {
			var err error
			send, err = s.Invitations.Invite(ctx, tx, Invitation{Organization: org, MembershipID: id, UserID: u.ID, Email: email, Suspended: u.Suspended})
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if send != nil {
		send(ctx)
	}
	return s.loadMembership(ctx, s.db, id)
}

// DeleteMembership removes a user from an organization and all its teams:
// the model's OrgRemoveMember (manage-membership, as in HCP Terraform, or
// the user themselves), and, unless the user leaves by themselves,
// TeamMembers on each of the user's teams (HCP Terraform asks visibility
// into all of them; only owners change the owners team). Decided before
// the transaction, which keeps the last owner.
func (s *Service) DeleteMembership(ctx context.Context, id string) error {
	m, err := s.GetMembership(ctx, id)
	if err != nil {
		return err
	}
	if err := authz.Allows(ctx, authz.OrgRemoveMember, authz.Resource{Organization: m.Organization, UserID: m.UserID}); err != nil {
		return err
	}
	if p := auth.FromContext(ctx); !p.IsUser() || p.UserID != m.UserID {
		for _, tid := range m.TeamIDs {
			t, err := s.load(ctx, s.db, tid, false)
			if err != nil {
				return err
			}
			err = allows(ctx, authz.TeamMembers, t)
			if core.KindOf(err) == core.KindNotFound {
				return core.Forbidden("insufficient permissions to remove members: this user is in a team you cannot see")
			}
			if err != nil {
				return err
			}
		}
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		// The owners team's row first, as every removal of an owner
		// takes it (lockOwners), so that checkOwnersLeft below counts
		// what a removal beside this one left.
		if err := lockOwners(ctx, tx, m.Organization); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM team_members WHERE user_id = ? AND team_id IN (SELECT id FROM teams WHERE organization_name = ?)`, m.UserID, m.Organization); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM organization_memberships WHERE id = ?`, m.ID); err != nil {
			return err
		}
		for _, tid := range m.TeamIDs {
			if t, err := s.load(ctx, tx, tid, false); err == nil && t.IsOwners() {
				return checkOwnersLeft(ctx, tx, m.Organization)
			}
		}
		return nil
	})
}

// MembershipsOf returns the memberships in org of users by user ID, with
// their teams when withTeams (a rendered membership names them): one
// statement, two with the teams, whatever the number of users.
func (s *Service) MembershipsOf(ctx context.Context, org string, users []string, withTeams bool) (map[string]*Membership, error) {
	out := map[string]*Membership{}
	if len(users) == 0 {
		return out, nil
	}
	in, ids := store.In(users)
	ms, err := store.All(ctx, s.db, scanMembership, `SELECT `+membershipCols+` FROM organization_memberships WHERE organization_name = ? AND user_id IN (`+in+`)`, append([]any{org}, ids...)...)
	if err != nil {
		return nil, err
	}
	var teams map[string][]string
	if withTeams {
		if teams, err = s.teamsOf(ctx, org, users); err != nil {
			return nil, err
		}
	}
	for _, m := range ms {
		m.TeamIDs = teams[m.UserID]
		out[m.UserID] = m
	}
	return out, nil
}

// Membership returns a membership by ID without access checks, for
// rendering relationships of objects the caller already may see.
func (s *Service) Membership(ctx context.Context, id string) (*Membership, error) {
	return s.loadMembership(ctx, s.db, id)
}

// Invitation is a membership created by email, waiting to be accepted.
type Invitation struct {
	Organization, MembershipID, UserID, Email string
	// Suspended: the user is suspended, and gets no email (as with every
	// notification) until a site admin lifts it; the invitation waits.
	Suspended bool
}

// Inviter records an invitation inside the membership's transaction and
// returns what to do once it is committed (send the link), or nil.
type Inviter interface {
	Invite(ctx context.Context, q store.Q, inv Invitation) (send func(context.Context), err error)
}

// ActivateMembership marks an invited membership active: its invitation
// was accepted (internal/signin).
func (s *Service) ActivateMembership(ctx context.Context, q store.Q, id string) error {
	res, err := q.Exec(ctx, `UPDATE organization_memberships SET status = ? WHERE id = ?`, StatusActive, id)
	if err != nil {
		return fmt.Errorf("activating organization membership %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.NotFound("organization membership %q not found", id)
	}
	return nil
}
