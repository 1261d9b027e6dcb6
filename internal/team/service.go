package team

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Users is what the team domain needs from the user store (package auth).
type Users interface {
	GetUser(ctx context.Context, id string) (*auth.User, error)
	GetUsers(ctx context.Context, ids []string) (map[string]*auth.User, error)
	UserByName(ctx context.Context, username string) (*auth.User, error)
	UserByEmail(ctx context.Context, email string) (*auth.User, error)
	CreateUser(ctx context.Context, q store.Q, username, email string, siteAdmin bool) (*auth.User, error)
}

// Tokens is what the team domain needs from the token store (package auth).
type Tokens interface {
	CreateToken(ctx context.Context, q store.Q, n auth.NewToken) (*auth.Token, string, error)
	RegenerateToken(ctx context.Context, n auth.NewToken) (*auth.Token, string, error)
	GetToken(ctx context.Context, id string) (*auth.Token, error)
	ListTokens(ctx context.Context, kind auth.Kind, subjects ...string) ([]*auth.Token, error)
	DeleteToken(ctx context.Context, q store.Q, id string) error
	DeleteTokens(ctx context.Context, q store.Q, kind auth.Kind, subject string) error
}

// Service manages teams, members, organization memberships and team tokens.
type Service struct {
	db     *store.DB
	users  Users
	tokens Tokens
	// Invitations, when set, hears of each membership created by email
	// (internal/signin sends the invitation link); see Inviter.
	Invitations Inviter
}

// NewService returns a team service. SetAuth must be called before the
// API is served (the auth service itself depends on this one).
func NewService(db *store.DB) *Service { return &Service{db: db} }

// SetAuth wires in the user and token stores.
func (s *Service) SetAuth(users Users, tokens Tokens) { s.users, s.tokens = users, tokens }

// CreateOwners creates the owners team of a new organization, with the
// creating user (if any) as its member and an active member of the
// organization. It runs inside the organization's creation transaction.
func (s *Service) CreateOwners(ctx context.Context, q store.Q, org, userID string) error {
	id := core.NewID(core.PrefixTeam)
	if _, err := q.Exec(ctx, `INSERT INTO teams (id, organization_name, name, attrs, created_at) VALUES (?, ?, ?, ?, ?)`,
		id, org, OwnersTeam, `{"visibility":"secret"}`, core.Micros(core.Now())); err != nil {
		return err
	}
	if userID == "" {
		return nil
	}
	if err := ensureMembership(ctx, q, org, userID, StatusActive); err != nil {
		return err
	}
	_, err := q.Exec(ctx, `INSERT INTO team_members (team_id, user_id) VALUES (?, ?)`, id, userID)
	return err
}

// accepted is the SQL condition that the member m (team_members) of team t
// (teams) has no invitation still waiting in t's organization: an invited
// person belongs to the organization, and acts in its teams, only once
// the invitation is accepted (HCP Terraform adds them to the teams named
// in the invitation then).
const accepted = `NOT EXISTS (SELECT 1 FROM organization_memberships i
	WHERE i.organization_name = t.organization_name AND i.user_id = m.user_id AND i.status = '` + StatusInvited + `')`

// UserOrganizations returns the organizations a user belongs to (through an
// accepted membership or a team) and those where the user is an owner.
func (s *Service) UserOrganizations(ctx context.Context, userID string) (member, owner []string, err error) {
	rows, err := s.db.Query(ctx, `SELECT organization_name FROM organization_memberships WHERE user_id = ? AND status = ?
		UNION SELECT t.organization_name FROM teams t JOIN team_members m ON m.team_id = t.id WHERE m.user_id = ? AND `+accepted, userID, StatusActive, userID)
	if err != nil {
		return nil, nil, err
	}
	if member, err = scanStrings(rows); err != nil {
		return nil, nil, err
	}
	rows, err = s.db.Query(ctx, `SELECT t.organization_name FROM teams t JOIN team_members m ON m.team_id = t.id WHERE m.user_id = ? AND t.name = ? AND `+accepted, userID, OwnersTeam)
	if err != nil {
		return nil, nil, err
	}
	if owner, err = scanStrings(rows); err != nil {
		return nil, nil, err
	}
	sort.Strings(member)
	sort.Strings(owner)
	return member, owner, nil
}

// UsersOrganizations returns, for each of the users, the organizations
// the user belongs to as UserOrganizations says it, by name, in one
// statement (the admin API's user lists).
func (s *Service) UsersOrganizations(ctx context.Context, userIDs []string) (map[string][]string, error) {
	out := make(map[string][]string, len(userIDs))
	if len(userIDs) == 0 {
		return out, nil
	}
	in, args := store.In(userIDs)
	pairs, err := store.Pairs(ctx, s.db, `SELECT DISTINCT user_id, organization_name FROM (`+s.UserOrganizationsSQL()+`) uo
		WHERE user_id IN (`+in+`) ORDER BY user_id, organization_name`, args...)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		out[p[0]] = append(out[p[0]], p[1])
	}
	return out, nil
}

// OrganizationOwners returns, for each of the organizations, its owners
// (the accepted members of its owners team) by username, whoever asks:
// the admin organizations API shows them to site admins.
func (s *Service) OrganizationOwners(ctx context.Context, orgs []string) (map[string][]*auth.User, error) {
	out := make(map[string][]*auth.User, len(orgs))
	if len(orgs) == 0 {
		return out, nil
	}
	in, args := store.In(orgs)
	pairs, err := store.Pairs(ctx, s.db, `SELECT t.organization_name, m.user_id FROM teams t JOIN team_members m ON m.team_id = t.id
		WHERE t.name = ? AND t.organization_name IN (`+in+`) AND `+accepted, append([]any{OwnersTeam}, args...)...)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(pairs))
	for _, p := range pairs {
		ids = append(ids, p[1])
	}
	users, err := s.users.GetUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		if u, ok := users[p[1]]; ok {
			out[p[0]] = append(out[p[0]], u)
		}
	}
	for _, us := range out {
		slices.SortFunc(us, func(a, b *auth.User) int { return strings.Compare(a.Username, b.Username) })
	}
	return out, nil
}

// LockIn takes the team's row for the rest of q's transaction on
// PostgreSQL (nothing on SQLite; core.NotFound if it is gone), for another
// domain that decides over what hangs on the team: notify counts its
// configurations under it, and locks nothing of the team's after it.
func (s *Service) LockIn(ctx context.Context, q store.Q, id string) error {
	if lock := store.ForUpdate(q); lock != "" {
		var one int
		err := q.QueryRow(ctx, `SELECT 1 FROM teams WHERE id = ?`+lock, id).Scan(&one)
		if store.IsNoRows(err) { // deleted since the caller read it
			return core.NotFound("team %q not found", id)
		}
		if err != nil {
			return fmt.Errorf("locking team %s: %w", id, err)
		}
	}
	return nil
}

// SoleOwnerOf returns the organizations, by name, whose only owner (an
// accepted member of the owners team) is the user, reading through q:
// deleting the user would leave them without one.
func (s *Service) SoleOwnerOf(ctx context.Context, q store.Q, userID string) ([]string, error) {
	return store.Strings(ctx, q, `SELECT t.organization_name FROM teams t JOIN team_members m ON m.team_id = t.id
		WHERE t.name = ? AND m.user_id = ? AND `+accepted+`
		AND NOT EXISTS (SELECT 1 FROM team_members o WHERE o.team_id = t.id AND o.user_id <> m.user_id
			AND NOT EXISTS (SELECT 1 FROM organization_memberships i
				WHERE i.organization_name = t.organization_name AND i.user_id = o.user_id AND i.status = ?))
		ORDER BY t.organization_name`, OwnersTeam, userID, StatusInvited)
}

func scanStrings(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close() error
}) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
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

// IsOwnersTeam reports whether a team is its organization's owners team.
func (s *Service) IsOwnersTeam(ctx context.Context, teamID string) (bool, error) {
	var name string
	err := s.db.QueryRow(ctx, `SELECT name FROM teams WHERE id = ?`, teamID).Scan(&name)
	if store.IsNoRows(err) {
		return false, core.NotFound("team %s not found", teamID)
	}
	return name == OwnersTeam, err
}

// --- access checks

// checkOrg returns 404 unless the caller may see the organization and it
// exists (every organization has an owners team).
func (s *Service) checkOrg(ctx context.Context, q store.Q, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return err
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM teams WHERE organization_name = ? AND name = ?`, org, OwnersTeam).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return core.NotFound("organization %q not found", org)
	}
	return nil
}

// Authz is what the authorization model needs of the team.
func (t *Team) Authz() authz.Team {
	a := t.OrganizationAccess()
	return authz.Team{ID: t.ID, Organization: t.Organization, Owners: t.IsOwners(), Secret: t.Settings.Visibility != "organization",
		MembersManageTokens: t.MembersManageTokens(),
		Access: authz.OrgAccess{
			ManagePolicies: a.ManagePolicies, ManagePolicyOverrides: a.ManagePolicyOverrides, ManageWorkspaces: a.ManageWorkspaces,
			ManageVCSSettings: a.ManageVCSSettings, ManageProviders: a.ManageProviders, ManageModules: a.ManageModules,
			ManageRunTasks: a.ManageRunTasks, ManageProjects: a.ManageProjects, ReadWorkspaces: a.ReadWorkspaces,
			ReadProjects: a.ReadProjects, ManageMembership: a.ManageMembership, ManageTeams: a.ManageTeams,
			ManageOrgAccess: a.ManageOrganizationAccess, AccessSecretTeams: a.AccessSecretTeams, ManageAgentPools: a.ManageAgentPools,
		}}
}

// allows asks the authorization model whether the caller may do action
// on team t.
func allows(ctx context.Context, action authz.Action, t *Team) error {
	return authz.AllowsTeam(ctx, action, t.Authz())
}

// --- teams

const teamCols = `id, organization_name, name, attrs, created_at`

func scanTeam(sc interface{ Scan(...any) error }) (*Team, error) {
	var t Team
	var attrs string
	var created int64
	if err := sc.Scan(&t.ID, &t.Organization, &t.Name, &attrs, &created); err != nil {
		return nil, err
	}
	if st, ok := decodedSettings.Get(attrs); ok {
		t.Settings = st
	} else {
		if err := json.Unmarshal([]byte(attrs), &t.Settings); err != nil {
			return nil, fmt.Errorf("decoding settings of team %s: %w", t.ID, err)
		}
		if t.Settings.Visibility == "" {
			t.Settings.Visibility = "secret"
		}
		decodedSettings.Put(attrs, t.Settings)
	}
	t.CreatedAt = core.FromMicros(created)
	return &t, nil
}

// load reads a team and its members, optionally locking the team's row
// for the rest of q's transaction.
func (s *Service) load(ctx context.Context, q store.Q, id string, forUpdate bool) (*Team, error) {
	if !core.HasPrefix(id, core.PrefixTeam) {
		return nil, core.NotFound("team %q not found", id)
	}
	query := `SELECT ` + teamCols + ` FROM teams WHERE id = ?`
	if forUpdate {
		query += store.ForUpdate(q)
	}
	t, err := scanTeam(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("team %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT user_id FROM team_members WHERE team_id = ? ORDER BY user_id`, id)
	if err != nil {
		return nil, err
	}
	if t.UserIDs, err = scanStrings(rows); err != nil {
		return nil, err
	}
	return t, nil
}

// Get returns a team the caller may see.
func (s *Service) Get(ctx context.Context, id string) (*Team, error) {
	t, err := s.load(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if !auth.FromContext(ctx).CanAccessOrganization(t.Organization) || allows(ctx, authz.TeamRead, t) != nil {
		return nil, core.NotFound("team %q not found", id)
	}
	return t, nil
}

// ListOptions filter a team list.
type ListOptions struct {
	Names []string // exact names
	Query string   // substring of the name, case-insensitive
}

// List returns the teams of an organization the caller may see, by
// name.
func (s *Service) List(ctx context.Context, org string, opts ListOptions) ([]*Team, error) {
	ts, _, err := s.ListPage(ctx, org, opts, 0, -1)
	return ts, err
}

// ListPage returns at most limit (all when negative) of the teams List
// returns, from offset on, and how many List returns in all. The filters
// are the store's; which teams the caller may see is decided on the
// teams' rows (visibility is one of their settings) against the caller's
// own teams, and members are read for the page's teams only.
func (s *Service) ListPage(ctx context.Context, org string, opts ListOptions, offset, limit int) ([]*Team, int, error) {
	if err := s.checkOrg(ctx, s.db, org); err != nil {
		return nil, 0, err
	}
	teams, err := s.listRows(ctx, org, opts)
	if err != nil {
		return nil, 0, err
	}
	sees, err := authz.VisibleTeams(ctx, org)
	if err != nil {
		return nil, 0, err
	}
	out := []*Team{}
	for _, t := range teams {
		if sees(t.Authz()) {
			out = append(out, t)
		}
	}
	total := len(out)
	out = out[min(max(offset, 0), total):]
	if limit >= 0 {
		out = out[:min(limit, len(out))]
	}
	if err := s.fillMembers(ctx, out); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// listRows are the rows of org's teams that opts' filters select (the
// store's), by name, without their members.
func (s *Service) listRows(ctx context.Context, org string, opts ListOptions) ([]*Team, error) {
	where := `organization_name = ?`
	args := []any{org}
	if len(opts.Names) > 0 {
		in, names := store.In(opts.Names)
		where += ` AND name IN (` + in + `)`
		args = append(args, names...)
	}
	if q := strings.ToLower(opts.Query); q != "" {
		where += ` AND LOWER(name) LIKE ?` + store.LikeEscape
		args = append(args, "%"+store.EscapeLike(q)+"%")
	}
	return store.All(ctx, s.db, scanTeam, `SELECT `+teamCols+` FROM teams WHERE `+where+` ORDER BY name, id`, args...)
}

// fillMembers reads the members (UserIDs) of teams, in one statement.
func (s *Service) fillMembers(ctx context.Context, teams []*Team) error {
	if len(teams) == 0 {
		return nil
	}
	byID := make(map[string]*Team, len(teams))
	ids := make([]string, len(teams))
	for i, t := range teams {
		byID[t.ID] = t
		t.UserIDs = nil
		ids[i] = t.ID
	}
	in, args := store.In(ids)
	members, err := store.Pairs(ctx, s.db, `SELECT team_id, user_id FROM team_members WHERE team_id IN (`+in+`) ORDER BY user_id`, args...)
	for _, m := range members {
		if t := byID[m[0]]; t != nil {
			t.UserIDs = append(t.UserIDs, m[1])
		}
	}
	return err
}

// Options are a team's attributes on create and update; nil is unchanged
// (or the default on create).
type Options struct {
	Name                       *string        `json:"name"`
	SSOTeamID                  *string        `json:"sso-team-id"`
	Visibility                 *string        `json:"visibility"`
	AllowMemberTokenManagement *bool          `json:"allow-member-token-management"`
	OrganizationAccess         *AccessOptions `json:"organization-access"`
}

func (o Options) apply(t *Team) error {
	// Whether t is the owners team is decided before a rename: a team
	// renamed to "owners" is not it (and is refused: the name is taken).
	owners := t.IsOwners()
	if o.Name != nil {
		if owners && *o.Name != OwnersTeam {
			return core.Invalid("the owners team cannot be renamed")
		}
		if !owners && *o.Name == OwnersTeam {
			return core.Invalid("name %q has already been taken", OwnersTeam)
		}
		if err := validateName(*o.Name); err != nil {
			return err
		}
		t.Name = *o.Name
	}
	if o.SSOTeamID != nil {
		t.Settings.SSOTeamID = *o.SSOTeamID
	}
	if o.Visibility != nil {
		if !validVisibility(*o.Visibility) {
			return core.Invalid("visibility must be \"secret\" or \"organization\", not %q", *o.Visibility)
		}
		t.Settings.Visibility = *o.Visibility
	}
	if o.AllowMemberTokenManagement != nil {
		v := *o.AllowMemberTokenManagement
		t.Settings.AllowMemberTokenManagement = &v
	}
	if o.OrganizationAccess != nil {
		if owners {
			before := t.OrganizationAccess()
			after := before
			if err := o.OrganizationAccess.apply(&after); err != nil || after != before {
				return core.Invalid("the owners team's organization access cannot be changed")
			}
			return nil
		}
		if err := o.OrganizationAccess.apply(&t.Settings.Access); err != nil {
			return err
		}
	}
	return nil
}

// Create makes a team: manage-teams, access-secret-teams besides for a
// secret team (the default), and manage-organization-access to give it
// organization access.
func (s *Service) Create(ctx context.Context, org string, opts Options) (*Team, error) {
	if err := s.checkOrg(ctx, s.db, org); err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgManageTeams, authz.Resource{Organization: org}); err != nil {
		return nil, err
	}
	if opts.Name == nil {
		return nil, core.Invalid("name is required")
	}
	t := &Team{ID: core.NewID(core.PrefixTeam), Organization: org, Settings: Settings{Visibility: "secret"}, CreatedAt: core.Now()}
	if err := opts.apply(t); err != nil {
		return nil, err
	}
	// A secret team is one that manage-teams alone may not reach: HCP
	// Terraform asks access-secret-teams to create one.
	if t.Settings.Visibility == "secret" {
		if err := authz.Allows(ctx, authz.TeamMakeSecret, authz.Resource{Organization: org}); err != nil {
			if opts.Visibility == nil && core.KindOf(err) == core.KindForbidden {
				return nil, core.Forbidden("%v: a new team is secret unless its visibility is \"organization\"", err)
			}
			return nil, err
		}
	}
	// A new team with organization access is a change of organization
	// access, which manage-teams alone does not allow.
	if t.Settings.Access != (Access{}) {
		if err := authz.Allows(ctx, authz.TeamManageAccess, authz.Resource{Organization: org}); err != nil {
			return nil, err
		}
	}
	attrs, _ := json.Marshal(t.Settings)
	_, err := s.db.Exec(ctx, `INSERT INTO teams (id, organization_name, name, attrs, created_at) VALUES (?, ?, ?, ?, ?)`,
		t.ID, org, t.Name, string(attrs), core.Micros(t.CreatedAt))
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Invalid("name %q has already been taken", t.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("creating team %s: %w", t.Name, err)
	}
	return t, nil
}

// Update changes a team: manage-teams (and access-secret-teams for a
// secret team, or to make one secret), and manage-organization-access to
// change its organization access. The owners team keeps its name and its
// organization access.
func (s *Service) Update(ctx context.Context, id string, opts Options) (*Team, error) {
	before, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	// Decided before the transaction: the model reads the caller's teams
	// from the store, which it must not do inside one. What they decide on
	// (the team's identity: owners or not, its visibility's team) is the
	// same in the row the transaction reads.
	if err := authz.AllowsTeam(ctx, authz.TeamManage, before.Authz()); err != nil {
		return nil, err
	}
	changeAccess := authz.AllowsTeam(ctx, authz.TeamManageAccess, before.Authz())
	var makeSecret error
	if opts.Visibility != nil && *opts.Visibility == "secret" {
		makeSecret = authz.AllowsTeam(ctx, authz.TeamMakeSecret, before.Authz())
	}
	var t *Team
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		// Locked: on PostgreSQL an update committed while this one read
		// is read as it left the row, not written over (the settings are
		// one document: the organization access it changed came back).
		var err error
		if t, err = s.load(ctx, tx, id, true); err != nil {
			return err
		}
		access, visibility := t.Settings.Access, t.Settings.Visibility
		if err := opts.apply(t); err != nil {
			return err
		}
		if t.Settings.Access != access && changeAccess != nil {
			return changeAccess
		}
		if t.Settings.Visibility != visibility && t.Settings.Visibility == "secret" && makeSecret != nil {
			return makeSecret
		}
		attrs, _ := json.Marshal(t.Settings)
		_, err = tx.Exec(ctx, `UPDATE teams SET name = ?, attrs = ? WHERE id = ?`, t.Name, string(attrs), t.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", t.Name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Delete removes a team, its memberships and its tokens (manage-teams),
// never the owners team.
func (s *Service) Delete(ctx context.Context, id string) error {
	t, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := allows(ctx, authz.TeamManage, t); err != nil {
		return err
	}
	if t.IsOwners() {
		return core.Invalid("the owners team cannot be deleted")
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		if err := s.tokens.DeleteTokens(ctx, tx, auth.KindTeam, t.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM teams WHERE id = ?`, t.ID)
		return err
	})
}

// --- members

// Users returns the members of a team the caller may see.
func (s *Service) Users(ctx context.Context, t *Team) ([]*auth.User, error) {
	m, err := s.users.GetUsers(ctx, t.UserIDs)
	if err != nil {
		return nil, err
	}
	out := make([]*auth.User, 0, len(m))
	for _, id := range t.UserIDs {
		if u := m[id]; u != nil {
			out = append(out, u)
		}
	}
	return out, nil
}

// User returns a user by ID (for rendering memberships).
func (s *Service) User(ctx context.Context, id string) (*auth.User, error) {
	return s.users.GetUser(ctx, id)
}

// manageMembers loads a team whose members the caller may change.
func (s *Service) manageMembers(ctx context.Context, teamID string) (*Team, error) {
	t, err := s.Get(ctx, teamID)
	if err != nil {
		return nil, err
	}
	if err := allows(ctx, authz.TeamMembers, t); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Service) usersByName(ctx context.Context, org string, usernames []string) ([]string, error) {
	if len(usernames) == 0 {
		return nil, core.Invalid("at least one user is required")
	}
	var ids []string
	for _, name := range usernames {
		// A user who is not a member of the organization is answered as
		// one who does not exist: the caller learns nothing of the
		// instance's other users.
		notMember := core.NotFound("user %q is not a member of organization %q: invite them first (organization memberships)", name, org)
		u, err := s.users.UserByName(ctx, name)
		if core.KindOf(err) == core.KindNotFound {
			return nil, notMember
		}
		if err != nil {
			return nil, err
		}
		var one int
		err = s.db.QueryRow(ctx, `SELECT 1 FROM organization_memberships WHERE organization_name = ? AND user_id = ?`, org, u.ID).Scan(&one)
		if store.IsNoRows(err) {
			return nil, notMember
		}
		if err != nil {
			return nil, err
		}
		ids = append(ids, u.ID)
	}
	return ids, nil
}

func (s *Service) membershipUsers(ctx context.Context, org string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, core.Invalid("at least one organization membership is required")
	}
	var users []string
	for _, id := range ids {
		m, err := s.loadMembership(ctx, s.db, id)
		if err != nil || m.Organization != org {
			return nil, core.NotFound("organization membership %q not found", id)
		}
		users = append(users, m.UserID)
	}
	return users, nil
}

// AddUsers adds users (by username) to a team. They must be members of its
// organization already, invited or active, as HCP Terraform asks ("to add
// users to a team, they must first receive and accept the invitation"): an
// invited one acts with the team once the invitation is accepted.
func (s *Service) AddUsers(ctx context.Context, teamID string, usernames []string) error {
	t, err := s.manageMembers(ctx, teamID)
	if err != nil {
		return err
	}
	ids, err := s.usersByName(ctx, t.Organization, usernames)
	if err != nil {
		return err
	}
	return s.addMembers(ctx, t, ids)
}

// AddMemberships adds the users of organization memberships to a team.
func (s *Service) AddMemberships(ctx context.Context, teamID string, membershipIDs []string) error {
	t, err := s.manageMembers(ctx, teamID)
	if err != nil {
		return err
	}
	ids, err := s.membershipUsers(ctx, t.Organization, membershipIDs)
	if err != nil {
		return err
	}
	return s.addMembers(ctx, t, ids)
}

func (s *Service) addMembers(ctx context.Context, t *Team, userIDs []string) error {
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		for _, uid := range userIDs {
			// Only while the user is a member: a membership deleted since
			// it was looked up adds nobody (and never comes back active).
			_, err := tx.Exec(ctx, `INSERT INTO team_members (team_id, user_id) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM organization_memberships WHERE organization_name = ? AND user_id = ?) ON CONFLICT DO NOTHING`,
				t.ID, uid, t.Organization, uid)
			if err != nil {
				return fmt.Errorf("adding user %s to team %s: %w", uid, t.ID, err)
			}
		}
		return nil
	})
}

// RemoveUsers removes users (by username) from a team.
func (s *Service) RemoveUsers(ctx context.Context, teamID string, usernames []string) error {
	t, err := s.manageMembers(ctx, teamID)
	if err != nil {
		return err
	}
	ids, err := s.usersByName(ctx, t.Organization, usernames)
	if err != nil {
		return err
	}
	return s.removeMembers(ctx, t, ids)
}

// RemoveMemberships removes the users of organization memberships from a team.
func (s *Service) RemoveMemberships(ctx context.Context, teamID string, membershipIDs []string) error {
	t, err := s.manageMembers(ctx, teamID)
	if err != nil {
		return err
	}
	ids, err := s.membershipUsers(ctx, t.Organization, membershipIDs)
	if err != nil {
		return err
	}
	return s.removeMembers(ctx, t, ids)
}

func (s *Service) removeMembers(ctx context.Context, t *Team, userIDs []string) error {
	return s.db.Tx(ctx, func(tx *store.Tx) error { return removeMembersIn(ctx, tx, t, userIDs) })
}

// removeMembersIn is removeMembers inside q's transaction. From the owners
// team it takes the team's row first (lockOwners), then the members'.
func removeMembersIn(ctx context.Context, q store.Q, t *Team, userIDs []string) error {
	if t.IsOwners() {
		if err := lockOwners(ctx, q, t.Organization); err != nil {
			return err
		}
	}
	for _, uid := range userIDs {
		if _, err := q.Exec(ctx, `DELETE FROM team_members WHERE team_id = ? AND user_id = ?`, t.ID, uid); err != nil {
			return err
		}
	}
	if !t.IsOwners() {
		return nil
	}
	return checkOwnersLeft(ctx, q, t.Organization)
}

// lockOwners takes the row of org's owners team for the rest of q's
// transaction on PostgreSQL (SQLite's write transactions run one at a time
// already). Every change that may remove an owner takes it before it
// deletes anything, so that checkOwnersLeft counts what the others left:
// before (2026-11-30) two owners removed at once each counted the other
// still there (its delete not committed yet) and the organization was left
// with none. Order: the owners team's row, then the member and membership
// rows; nothing takes them the other way round.
func lockOwners(ctx context.Context, q store.Q, org string) error {
	lock := store.ForUpdate(q)
	if lock == "" {
		return nil
	}
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM teams WHERE organization_name = ? AND name = ?`+lock, org, OwnersTeam).Scan(&id)
	if err != nil && !store.IsNoRows(err) {
		return fmt.Errorf("locking the owners team of %s: %w", org, err)
	}
	return nil
}

// checkOwnersLeft refuses a change that would leave an organization
// without owners (an invited one is none until accepted).
func checkOwnersLeft(ctx context.Context, q store.Q, org string) error {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM team_members m JOIN teams t ON t.id = m.team_id WHERE t.organization_name = ? AND t.name = ? AND `+accepted, org, OwnersTeam).Scan(&n)
	if err != nil {
		return err
	}
	if n == 0 {
		return core.Conflict("organization %q must keep at least one owner", org)
	}
	return nil
}

// MemberTeams returns the teams of org the user is in, whoever asks (the
// authorization model reads them to know what the user may do).
func (s *Service) MemberTeams(ctx context.Context, userID, org string) ([]*Team, error) {
	// The guard and the renderer of a read both ask: the request memo
	// answers the second. Each caller gets its own copies.
	ts, err := core.Memoize(ctx, "member-teams:"+userID+"/"+org, func() ([]*Team, error) {
		// The request's authentication read them already (the one query
		// of internal/auth, RememberUserTeams).
		if rows, ok := core.Recall[[]auth.MemberTeam](ctx, memberTeamRowsKey(userID, org)); ok {
			return decodeMemberTeams(rows)
		}
		return store.All(ctx, s.db, scanTeam, `SELECT t.id, t.organization_name, t.name, t.attrs, t.created_at FROM teams t
		JOIN team_members m ON m.team_id = t.id WHERE m.user_id = ? AND t.organization_name = ? AND `+accepted+` ORDER BY t.name`, userID, org)
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Team, len(ts))
	for i, t := range ts {
		c := *t
		out[i] = &c
	}
	return out, nil
}

// AuthzTeam returns what the authorization model needs of a team, whoever
// asks; the request memo keeps it, since every decision of a team token's
// request and every team action asks for a team.
func (s *Service) AuthzTeam(ctx context.Context, id string) (authz.Team, error) {
	return core.Memoize(ctx, "authz-team:"+id, func() (authz.Team, error) {
		if !core.HasPrefix(id, core.PrefixTeam) {
			return authz.Team{}, core.NotFound("team %q not found", id)
		}
		t, err := scanTeam(s.db.QueryRow(ctx, `SELECT `+teamCols+` FROM teams WHERE id = ?`, id))
		if store.IsNoRows(err) {
			return authz.Team{}, core.NotFound("team %q not found", id)
		}
		if err != nil {
			return authz.Team{}, err
		}
		return t.Authz(), nil
	})
}

// TeamTokensSQL says in SQL what TeamOrganization and IsOwnersTeam
// answer, for the one query that authenticates a team token.
func (s *Service) TeamTokensSQL() string {
	return `SELECT id, organization_name, CASE WHEN name = '` + OwnersTeam + `' THEN 1 ELSE 0 END AS owners FROM teams`
}

// UserTeamsSQL is UserOrganizationsSQL naming the team of each membership
// through a team (auth.MemberTeamsSQL), so that the query that
// authenticates a user also reads the user's teams.
func (s *Service) UserTeamsSQL() string {
	return `SELECT user_id, organization_name, 0 AS owner, NULL AS team_id, NULL AS team_name, NULL AS team_attrs, NULL AS team_created_at
		FROM organization_memberships WHERE status = '` + StatusActive + `'
		UNION ALL SELECT m.user_id, t.organization_name, CASE WHEN t.name = '` + OwnersTeam + `' THEN 1 ELSE 0 END, t.id, t.name, t.attrs, t.created_at
		FROM teams t JOIN team_members m ON m.team_id = t.id WHERE ` + accepted
}

// RememberUserTeams keeps, for the rest of the request, the teams the
// authenticating query read: MemberTeams answers from them for each of
// orgs (the user's organizations; none of their teams is left out).
func (s *Service) RememberUserTeams(ctx context.Context, userID string, orgs []string, teams []auth.MemberTeam) {
	for _, org := range orgs {
		var mine []auth.MemberTeam
		for _, t := range teams {
			if t.Organization == org {
				mine = append(mine, t)
			}
		}
		// As MemberTeams orders them.
		slices.SortFunc(mine, func(a, b auth.MemberTeam) int { return strings.Compare(a.Name, b.Name) })
		core.Remember(ctx, memberTeamRowsKey(userID, org), mine)
	}
}

func memberTeamRowsKey(userID, org string) string { return "member-team-rows:" + userID + "/" + org }

// decodeMemberTeams turns the rows RememberUserTeams kept into teams.
func decodeMemberTeams(rows []auth.MemberTeam) ([]*Team, error) {
	out := make([]*Team, 0, len(rows))
	for _, r := range rows {
		t, err := scanTeam(memberTeamRow(r))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// memberTeamRow scans like a row of teamCols.
type memberTeamRow auth.MemberTeam

func (r memberTeamRow) Scan(dest ...any) error {
	*dest[0].(*string), *dest[1].(*string), *dest[2].(*string), *dest[3].(*string), *dest[4].(*int64) = r.ID, r.Organization, r.Name, r.Attrs, r.CreatedAt
	return nil
}

// UserOrganizationsSQL says in SQL what UserOrganizations answers, for the
// one query that authenticates a request (internal/auth): every
// organization of every user, with owner 1 when through the owners team.
func (s *Service) UserOrganizationsSQL() string {
	return `SELECT user_id, organization_name, 0 AS owner FROM organization_memberships WHERE status = '` + StatusActive + `'
		UNION ALL SELECT m.user_id, t.organization_name, CASE WHEN t.name = '` + OwnersTeam + `' THEN 1 ELSE 0 END
		FROM teams t JOIN team_members m ON m.team_id = t.id WHERE ` + accepted
}
