package workspace

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// ProjectInfo is what the workspace domain needs to know about a project.
type ProjectInfo struct {
	ID           string
	Organization string
	Name         string
	Description  string
	// ExecutionMode and AgentPoolID are the project's effective defaults
	// (already resolved against the organization's).
	ExecutionMode string
	AgentPoolID   string
	TagBindings   []TagBinding
	// AutoDestroyActivityDuration is inherited by workspaces that do not
	// set their own ("" for none).
	AutoDestroyActivityDuration string
}

// Projects resolves projects; the project domain provides it.
type Projects interface {
	// DefaultID returns the ID of an organization's default project.
	DefaultID(ctx context.Context, org string) (string, error)
	// ProjectInfo returns a project the caller may see (404 otherwise).
	ProjectInfo(ctx context.Context, id string) (*ProjectInfo, error)
	// WorkspaceProject returns the project of a workspace already read
	// (by a caller who may see it, or by the server itself) without
	// checking the caller, reading through q (inside a transaction, its Tx).
	WorkspaceProject(ctx context.Context, q store.Q, id string) (*ProjectInfo, error)
}

// StateInfo tells what the state domain knows about a workspace; nil until
// state exists (then there is no current state and no resources).
type StateInfo interface {
	CurrentStateVersionID(ctx context.Context, workspaceID string) (string, error)
	ResourceCount(ctx context.Context, workspaceID string) (int, error)
}

// Output is a current state output as shown in the workspace's outputs
// relationship (never a sensitive value).
type Output struct {
	ID        string
	Name      string
	Sensitive bool
	Type      string
	Value     any
}

// OutputLister may be implemented by the StateInfo given to the service to
// fill the workspace's outputs relationship.
type OutputLister interface {
	CurrentOutputs(ctx context.Context, workspaceID string) ([]Output, error)
}

// StateSummary is what a workspace read shows of the workspace's state.
type StateSummary struct {
	CurrentStateVersionID string // "" without state
	ResourceCount         int
	Outputs               []Output // sensitive values removed
}

// StateSummarizer may be implemented by the StateInfo given to the service
// to answer a workspace read in one call instead of three (each of which
// would check access to the workspace again). The workspace has been
// access-checked by the caller.
type StateSummarizer interface {
	StateSummary(ctx context.Context, workspaceID string) (StateSummary, error)
}

// CurrentRuns tells the current run of a workspace; the run domain
// provides it (nil until runs exist).
type CurrentRuns interface {
	CurrentRunID(ctx context.Context, workspaceID string) (string, error)
}

// RunHistory is what a workspace shows of its runs beyond the current one;
// the run domain's CurrentRuns may provide it.
type RunHistory interface {
	RunsCount(ctx context.Context, workspaceID string) (int, error)
}

// CurrentConfigs tells the current configuration version of a workspace;
// the configuration version domain provides it (nil: none shown).
type CurrentConfigs interface {
	CurrentConfigurationVersionID(ctx context.Context, workspaceID string) (string, error)
}

// SSHKeys resolves SSH keys; the SSH key domain provides it (nil: keys
// cannot be assigned).
type SSHKeys interface {
	// Organization returns the organization of a key the caller may see
	// (core.NotFound otherwise), locking the key's row when q is a
	// transaction so that the key outlives it.
	Organization(ctx context.Context, q store.Q, id string) (string, error)
}

// AgentPools resolves agent pools; the agent domain provides it (nil
// accepts any agent-pool-id).
type AgentPools interface {
	// KeepPool keeps pool id of organization org from being deleted
	// until q's transaction ends (core.Invalid when org has no such pool,
	// or has it no more).
	KeepPool(ctx context.Context, q store.Q, org, id string) error
}

// TerraformVersions are the terraform versions a site admin registered;
// the tool version domain provides them (nil: none are).
type TerraformVersions interface {
	// CheckSelectable refuses (core.Invalid, saying why) a version a
	// workspace may not be set to: one registered but disabled, or marked
	// beta unless beta (the organization has access to beta tools). It
	// reads through q, and inside a transaction holds the version's row
	// until the transaction ends, so that the version is not deleted or
	// disabled meanwhile.
	CheckSelectable(ctx context.Context, q store.Q, version string, beta bool) error
}

// VCS connects workspaces to repositories; the VCS domain provides it
// (nil: a vcs-repo is refused).
type VCS interface {
	// Resolve checks, before the workspace's transaction and as the
	// caller, the connection asked for a workspace of org in project: cur
	// is the workspace's connection (nil: none), o what the request sends
	// (merged over cur). It answers the connection to keep, with the
	// repository's default branch and the webhook's URL filled in.
	Resolve(ctx context.Context, org, projectID string, cur *VCSRepo, o VCSRepoOptions) (*VCSRepo, error)
	// Connect records, inside the workspace's transaction q, that its
	// connection went from prev to next (either may be nil).
	Connect(ctx context.Context, q store.Q, workspaceID string, prev, next *VCSRepo) error
	// CheckScope refuses a connection's token to a workspace of another
	// project its VCS provider is not scoped to (a workspace moving
	// there), whoever asks.
	CheckScope(ctx context.Context, org, projectID string, repo *VCSRepo) error
}

// Service manages workspaces.
type Service struct {
	db       *store.DB
	projects Projects
	// State, Runs and Pools are wired by the composition root; all may be nil.
	State StateInfo
	Runs  CurrentRuns
	Pools AgentPools
	// Configs is wired by the composition root; may be nil.
	Configs CurrentConfigs
	// SSHKeys is wired by the composition root; may be nil.
	SSHKeys SSHKeys
	// Versions is wired by the composition root; may be nil.
	Versions TerraformVersions
	// VCS is wired by the composition root; may be nil.
	VCS VCS
	// DefaultRemoteState is global-remote-state of a workspace created
	// without one (the site's default-remote-state-access setting); nil:
	// false.
	DefaultRemoteState func(ctx context.Context) (bool, error)
	// WorkspaceLimit returns the most workspaces an organization may have
	// (-1: no limit; a site admin's workspace-limit), reading through the
	// creating transaction, which it may lock the organization in; nil:
	// none.
	WorkspaceLimit func(ctx context.Context, q store.Q, org string) (int, error)
	// BetaTools says whether an organization's workspaces may use
	// terraform versions registered as beta (a site admin's
	// access-beta-tools), reading through q; nil: they may not.
	BetaTools func(ctx context.Context, q store.Q, org string) (bool, error)
	// OnDelete runs inside the transaction that deletes a workspace, so
	// other domains drop what they keep for it (variables, state, …).
	OnDelete []func(ctx context.Context, q store.Q, workspaceID string) error
	// OnUnlock runs after a user or team releases a workspace's lock, so
	// that runs waiting for it start.
	OnUnlock []func(ctx context.Context, workspaceID string)
	// document, set by the API, gives the select-list of the workspace
	// document's parts (API.documentColumns): a read-only request that
	// looks a workspace up by name reads them in the row's statement.
	document func(d *document) (cols []string, dest []any)
	// documentQuery and documentByID: readByName's and loadRow's
	// statements with the document.
	documentQuery, documentByID documentQuery
}

// remove deletes a workspace row and, in the same transaction (q),
// everything other domains keep for it.
func (s *Service) remove(ctx context.Context, q store.Q, id string) error {
	for _, fn := range s.OnDelete {
		if err := fn(ctx, q, id); err != nil {
			return fmt.Errorf("deleting workspace %s: %w", id, err)
		}
	}
	_, err := q.Exec(ctx, `DELETE FROM workspaces WHERE id = ?`, id)
	return err
}

// DeleteOrganizationWorkspaces removes an organization's workspaces, each
// with what other domains keep for it as Delete removes it, inside the
// transaction that deletes the organization: the organization's cascade
// would take their rows, but not the blobs those name.
func (s *Service) DeleteOrganizationWorkspaces(ctx context.Context, q store.Q, org string) error {
	ids, err := store.Strings(ctx, q, `SELECT id FROM workspaces WHERE organization_name = ? ORDER BY id`, org)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.remove(ctx, q, id); err != nil {
			return err
		}
	}
	return nil
}

// checkLimit refuses a new workspace past the organization's workspace
// limit, in the creating transaction q.
func (s *Service) checkLimit(ctx context.Context, q store.Q, org string) error {
	if s.WorkspaceLimit == nil {
		return nil
	}
	limit, err := s.WorkspaceLimit(ctx, q, org)
	if err != nil || limit < 0 {
		return err
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM workspaces WHERE organization_name = ?`, org).Scan(&n); err != nil {
		return err
	}
	if n >= limit {
		return core.Invalid("organization %s has %d workspaces, its limit (workspace-limit, set by a site administrator): delete one, or ask for a higher limit", org, n)
	}
	return nil
}

// keepPool, in the transaction q that assigns o's agent pool, refuses a
// pool outside the workspace's organization and keeps it from being
// deleted before q commits (agent.Service.Delete counts the workspaces
// naming it after locking it): one deleted meanwhile is refused as
// unknown.
func (s *Service) keepPool(ctx context.Context, q store.Q, org string, o Options) error {
	if s.Pools == nil || o.AgentPoolID == nil || *o.AgentPoolID == "" {
		return nil
	}
	return s.Pools.KeepPool(ctx, q, org, *o.AgentPoolID)
}

// NewService returns a workspace service.
func NewService(db *store.DB, projects Projects) *Service {
	return &Service{db: db, projects: projects}
}

// Options are the attributes of a new or changed workspace; nil fields are
// unchanged (or defaulted on create).
type Options struct {
	Name                        *string
	Description                 *string
	ExecutionMode               *string
	AgentPoolID                 *string
	Operations                  *bool
	ExecutionModeOverwrite      *bool
	AgentPoolOverwrite          *bool
	AllowDestroyPlan            *bool
	AssessmentsEnabled          *bool
	AutoApply                   *bool
	AutoApplyRunTrigger         *bool
	FileTriggersEnabled         *bool
	GlobalRemoteState           *bool
	ProjectRemoteState          *bool
	QueueAllRuns                *bool
	SpeculativeEnabled          *bool
	StructuredRunOutputEnabled  *bool
	InheritsProjectAutoDestroy  *bool
	AutoDestroyAtSet            bool
	AutoDestroyAt               *time.Time
	AutoDestroyActivityDuration *string
	SourceName                  *string
	SourceURL                   *string
	TerraformVersion            *string
	WorkingDirectory            *string
	MigrationEnvironment        *string
	TriggerPrefixes             *[]string
	TriggerPatterns             *[]string
	ProjectID                   *string
	// Tags (create only) are tag names or IDs.
	Tags []TagRef
	// TagBindings are added (create) or replace the workspace's (update).
	TagBindings *[]TagBinding
	// VCSRepo connects the workspace to a repository (or changes its
	// connection); RemoveVCSRepo (vcs-repo: null) disconnects it.
	VCSRepo       *VCSRepoOptions
	RemoveVCSRepo bool
	// ManagedBy (the server's, never the API's; create only: the mark
	// never changes, and the authorization model remembers it) marks the
	// workspace as the deployment of a stack (Settings.ManagedBy).
	ManagedBy *string
}

// TagRef names a tag by ID or by name.
type TagRef struct {
	ID   string
	Name string
}

func (o Options) apply(w *Workspace) error {
	s := &w.Settings
	if o.Name != nil {
		if err := ValidateName(*o.Name); err != nil {
			return err
		}
		w.Name = *o.Name
	}
	setStr := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setStr(&s.Description, o.Description)
	setStr(&s.SourceName, o.SourceName)
	setStr(&s.SourceURL, o.SourceURL)
	setStr(&s.WorkingDirectory, o.WorkingDirectory)
	setStr(&s.MigrationEnvironment, o.MigrationEnvironment)
	setStr(&s.ManagedBy, o.ManagedBy)
	setBool(&s.AllowDestroyPlan, o.AllowDestroyPlan)
	setBool(&s.AssessmentsEnabled, o.AssessmentsEnabled)
	setBool(&s.AutoApply, o.AutoApply)
	setBool(&s.AutoApplyRunTrigger, o.AutoApplyRunTrigger)
	setBool(&s.FileTriggersEnabled, o.FileTriggersEnabled)
	setBool(&s.GlobalRemoteState, o.GlobalRemoteState)
	setBool(&s.ProjectRemoteState, o.ProjectRemoteState)
	setBool(&s.QueueAllRuns, o.QueueAllRuns)
	setBool(&s.SpeculativeEnabled, o.SpeculativeEnabled)
	setBool(&s.StructuredRunOutputEnabled, o.StructuredRunOutputEnabled)
	setBool(&s.InheritsProjectAutoDestroy, o.InheritsProjectAutoDestroy)
	if s.GlobalRemoteState && s.ProjectRemoteState && (o.GlobalRemoteState != nil || o.ProjectRemoteState != nil) {
		if o.ProjectRemoteState != nil && *o.ProjectRemoteState && o.GlobalRemoteState != nil && *o.GlobalRemoteState {
			return core.Invalid("Project remote state cannot be enabled when global remote state sharing is enabled")
		}
		// Turning one on turns the other off.
		if o.GlobalRemoteState != nil && *o.GlobalRemoteState {
			s.ProjectRemoteState = false
		} else {
			s.GlobalRemoteState = false
		}
	}
	if o.TerraformVersion != nil {
		if err := ValidateTerraformVersion(*o.TerraformVersion); err != nil {
			return err
		}
		s.TerraformVersion = *o.TerraformVersion
	}
	if o.AutoDestroyAtSet {
		s.AutoDestroyAt = o.AutoDestroyAt
	}
	if o.AutoDestroyActivityDuration != nil {
		d := *o.AutoDestroyActivityDuration
		if d != "" && !durationOK(d) {
			return core.Invalid("Auto destroy activity duration has an incorrect format, we expect up to 4 numeric digits and 1 unit ('d' or 'h')")
		}
		s.AutoDestroyActivityDuration = d
	}
	if o.TriggerPrefixes != nil && o.TriggerPatterns != nil && len(*o.TriggerPrefixes) > 0 && len(*o.TriggerPatterns) > 0 {
		return core.Invalid("trigger-prefixes and trigger-patterns cannot both be set")
	}
	// Setting one kind of trigger replaces the other.
	if o.TriggerPrefixes != nil {
		s.TriggerPrefixes = append([]string{}, (*o.TriggerPrefixes)...)
		if len(s.TriggerPrefixes) > 0 {
			s.TriggerPatterns = []string{}
		}
	}
	if o.TriggerPatterns != nil {
		s.TriggerPatterns = append([]string{}, (*o.TriggerPatterns)...)
		if len(s.TriggerPatterns) > 0 {
			s.TriggerPrefixes = []string{}
		}
	}
	// Execution mode.
	if o.ExecutionMode != nil && o.Operations != nil {
		return core.Invalid("operations is deprecated and cannot be used together with execution-mode")
	}
	if o.ExecutionModeOverwrite != nil && o.AgentPoolOverwrite != nil && *o.ExecutionModeOverwrite != *o.AgentPoolOverwrite {
		return core.Invalid("If agent-pool and execution-mode are both included in setting-overwrites, their values must be the same.")
	}
	mode := o.ExecutionMode
	if mode == nil && o.Operations != nil {
		m := "local"
		if *o.Operations {
			m = "remote"
		}
		mode = &m
	}
	if mode != nil {
		if *mode != "remote" && *mode != "local" && *mode != "agent" {
			return core.Invalid("execution-mode must be one of remote, local or agent, not %q", *mode)
		}
		s.ExecutionMode, s.ExecutionModeOverwrite, s.AgentPoolOverwrite = *mode, true, true
		if *mode != "agent" {
			s.AgentPoolID = ""
		}
	}
	if o.AgentPoolID != nil && *o.AgentPoolID != "" {
		if !s.ExecutionModeOverwrite || s.ExecutionMode != "agent" {
			return core.Invalid("agent-pool-id must not be specified unless using 'agent' execution mode")
		}
		s.AgentPoolID, s.AgentPoolOverwrite = *o.AgentPoolID, true
	}
	if s.ExecutionModeOverwrite && s.ExecutionMode == "agent" && s.AgentPoolID == "" {
		return core.Invalid("agent-pool-id must be specified when using 'agent' execution mode")
	}
	if o.ExecutionModeOverwrite != nil && !*o.ExecutionModeOverwrite {
		s.ExecutionModeOverwrite, s.ExecutionMode = false, ""
	}
	if o.AgentPoolOverwrite != nil && !*o.AgentPoolOverwrite {
		s.AgentPoolOverwrite, s.AgentPoolID = false, ""
	}
	return nil
}

func durationOK(d string) bool {
	if len(d) < 2 || len(d) > 5 {
		return false
	}
	for _, c := range d[:len(d)-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	u := d[len(d)-1]
	return u == 'd' || u == 'h'
}

const cols = `id, organization_name, project_id, name, locked_by_kind, locked_by_id, lock_reason, attrs, created_at, updated_at, ssh_key_id`

func scan(sc interface{ Scan(...any) error }) (*Workspace, error) { return scanWith(sc) }

// scanWith reads a row of cols, and into more the columns after them.
func scanWith(sc interface{ Scan(...any) error }, more ...any) (*Workspace, error) {
	var w Workspace
	var attrs string
	var created, updated int64
	if err := sc.Scan(append([]any{&w.ID, &w.Organization, &w.ProjectID, &w.Name, &w.LockKind, &w.LockID, &w.LockReason, &attrs, &created, &updated, &w.SSHKeyID}, more...)...); err != nil {
		return nil, err
	}
	if st, ok := decodedSettings.Get(attrs); ok {
		w.Settings = st
	} else {
		w.Settings = defaultSettings()
		if err := json.Unmarshal([]byte(attrs), &w.Settings); err != nil {
			return nil, fmt.Errorf("decoding settings of workspace %s: %w", w.ID, err)
		}
		if w.Settings.TriggerPrefixes == nil {
			w.Settings.TriggerPrefixes = []string{}
		}
		if w.Settings.TriggerPatterns == nil {
			w.Settings.TriggerPatterns = []string{}
		}
		decodedSettings.Put(attrs, w.Settings)
	}
	w.CreatedAt, w.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &w, nil
}

// load reads a workspace by ID, visible to the caller, optionally locking
// the row for the rest of the transaction.
func (s *Service) load(ctx context.Context, q store.Q, id string, forUpdate bool) (*Workspace, error) {
	w, err := s.loadUnchecked(ctx, q, id, forUpdate)
	if err != nil {
		return nil, err
	}
	if !auth.FromContext(ctx).CanAccessOrganization(w.Organization) {
		return nil, core.NotFound("workspace %q not found", id)
	}
	return w, nil
}

// loadUnchecked reads a workspace without looking at the caller.
func (s *Service) loadUnchecked(ctx context.Context, q store.Q, id string, forUpdate bool) (*Workspace, error) {
	if !core.HasPrefix(id, core.PrefixWorkspace) {
		return nil, core.NotFound("workspace %q not found", id)
	}
	w, err := s.loadRow(ctx, q, id, forUpdate)
	if store.IsNoRows(err) {
		return nil, core.NotFound("workspace %q not found", id)
	}
	return w, err
}

// loadRow reads a workspace by id, from the request memo when outside a
// transaction.
func (s *Service) loadRow(ctx context.Context, q store.Q, id string, forUpdate bool) (*Workspace, error) {
	if forUpdate || q != store.Q(s.db) {
		return s.read(ctx, q, forUpdate, `id = ?`, id)
	}
	// Outside a transaction the row may come from the request memo. The
	// workspace's own read (GET readRoute, which the authorization guard
	// resolves first) reads the document with the row, as a read by name
	// does.
	return memoized(core.Memoize(ctx, "workspace:"+id, func() (*Workspace, error) {
		if tfeapi.RouteOf(ctx) == readRoute {
			return s.readWithDocument(ctx, &s.documentByID, `id = ?`, id)
		}
		return s.read(ctx, q, false, `id = ?`, id)
	}))
}

// readRoute is the workspace's own read by ID, as API.Register names it
// (written out there: internal/authz reads the route table from the
// source; TestWorkspaceReadRoundTrips fails should the two differ).
const readRoute = "GET /api/v2/workspaces/{id}"

// memoized returns a copy of a workspace from the request memo, so that a
// caller changing it changes nobody else's.
func memoized(w *Workspace, err error) (*Workspace, error) {
	if err != nil {
		return nil, err
	}
	c := *w
	c.TagNames = slices.Clone(w.TagNames)
	return &c, nil
}

// tagNamesSQL aggregates a workspace's tag names, in the order tagNames
// reads them, into one value (NULL for none): the names match tagRE, so
// a comma cannot be part of one. string_agg with ORDER BY is PostgreSQL's
// and SQLite's (3.44 on) alike.
const tagNamesSQL = `(SELECT string_agg(t.name, ',' ORDER BY wt.created_at, t.name) FROM workspace_tags wt JOIN tags t ON t.id = wt.tag_id WHERE wt.workspace_id = ws.id)`

// read reads the workspace matching where, and its tags, from the store
// in one statement; sql.ErrNoRows when there is none.
func (s *Service) read(ctx context.Context, q store.Q, forUpdate bool, where string, args ...any) (*Workspace, error) {
	query := `SELECT ` + cols + `, ` + tagNamesSQL + ` FROM workspaces ws WHERE ` + where
	if forUpdate {
		query += store.ForUpdate(q)
	}
	return scanTagged(q.QueryRow(ctx, query, args...))
}

// scanWithTags scans a row of read's columns (for store.All and Page).
func scanWithTags(sc store.Scanner) (*Workspace, error) { return scanTagged(sc) }

// scanTagged scans a row of read's columns, and into more the columns
// after them.
func scanTagged(sc store.Scanner, more ...any) (*Workspace, error) {
	var tags sql.NullString
	w, err := scanWith(sc, append([]any{&tags}, more...)...)
	if err != nil {
		return nil, err
	}
	w.TagNames = []string{}
	if tags.String != "" {
		w.TagNames = strings.Split(tags.String, ",")
	}
	return w, nil
}

// readByName reads the workspace org/name as read does. In a read-only
// request (one with a request memo: a workspace read, whose document
// follows) the same statement reads the document's parts and remembers
// them for the rest of the request (readDocument finds them), one store
// round trip instead of two; should that statement fail, the row is read
// alone and the document is left to readDocument.
func (s *Service) readByName(ctx context.Context, org, name string) (*Workspace, error) {
	return s.readWithDocument(ctx, &s.documentQuery, `organization_name = ? AND name = ?`, org, name)
}

// readWithDocument reads the workspace matching where as read does and,
// in a read-only request, its document's parts in the same statement (q
// keeps the statement), remembered for the rest of the request.
func (s *Service) readWithDocument(ctx context.Context, q *documentQuery, where string, args ...any) (*Workspace, error) {
	if s.document != nil && core.HasMemo(ctx) {
		var d document
		if dcols, dest := s.document(&d); len(dcols) > 0 {
			// Without the request's cancellation, as auth's token query
			// (internal/auth): index searches of microseconds, for which
			// database/sql and the drivers would start a goroutine to
			// interrupt them should the request end.
			query := q.get(dcols, func() string {
				return `SELECT ` + cols + `, ` + tagNamesSQL + `, ` + selectList(dcols) + ` FROM workspaces ws WHERE ` + where
			})
			w, err := scanTagged(s.db.QueryRow(context.WithoutCancel(ctx), query, args...), dest...)
			if err == nil {
				core.Remember(ctx, documentKey(w.ID), d)
				return w, nil
			}
			if store.IsNoRows(err) {
				return nil, err
			}
		}
	}
	return s.read(ctx, s.db, false, where, args...)
}

// Get returns a workspace by ID; 404 when the caller cannot access its
// organization.
func (s *Service) Get(ctx context.Context, id string) (*Workspace, error) {
	return s.load(ctx, s.db, id, false)
}

// GetByName returns a workspace by organization and name; 404 when the
// caller cannot access the organization.
func (s *Service) GetByName(ctx context.Context, org, name string) (*Workspace, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	w, err := memoized(core.Memoize(ctx, "workspace-name:"+org+"/"+name, func() (*Workspace, error) {
		w, err := s.readByName(ctx, org, name)
		if err == nil {
			// The authorization model asks by ID (Resolver.ManagedBy).
			core.Remember(ctx, "workspace:"+w.ID, w)
		}
		return w, err
	}))
	if store.IsNoRows(err) {
		return nil, core.NotFound("workspace %q not found in organization %q", name, org)
	}
	return w, err
}

// CountInProject counts the workspaces in a project, through q (the
// caller's transaction, or the DB).
func (s *Service) CountInProject(ctx context.Context, q store.Q, projectID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM workspaces WHERE project_id = ?`, projectID).Scan(&n)
	return n, err
}

// UsingPool counts the workspaces whose runs go to agent pool poolID
// (their own agent-pool-id; a workspace inheriting its project's pool is
// the project's: project.UsingPool).
func UsingPool(ctx context.Context, q store.Q, poolID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM workspaces WHERE attrs LIKE ?`+store.LikeEscape,
		store.LikeJSONString("agent-pool-id", poolID)).Scan(&n)
	return n, err
}

// requireCreate asks the authorization model whether the caller may create
// a workspace in the project (the organization's default when none):
// manage-workspaces, or a grant on that project that creates workspaces.
func (s *Service) requireCreate(ctx context.Context, org string, projectID *string) error {
	prj := ""
	if projectID != nil {
		prj = *projectID
	}
	if prj == "" {
		id, err := s.projects.DefaultID(ctx, org)
		if err != nil {
			return err
		}
		prj = id
	}
	err := authz.Allows(ctx, authz.ProjectCreateWorkspace, authz.Resource{Organization: org, ProjectID: prj})
	if err == nil {
		return nil
	}
	// A project named and hidden from the caller stays not found; the
	// default one, which the caller did not name, is a refusal.
	if projectID != nil && *projectID != "" && core.KindOf(err) == core.KindNotFound {
		return err
	}
	return core.Forbidden("you may not create workspaces in this project of organization %q", org)
}

// CheckCreate asks the authorization model whether the caller may create
// a workspace in project projectID ("" the organization's default): what
// Create asks, for a domain that creates workspaces on a caller's behalf
// and must refuse before starting. That domain chose the project, not the
// caller, so a project hidden from the caller is a refusal (403), not "not
// found".
func (s *Service) CheckCreate(ctx context.Context, org, projectID string) error {
	err := s.requireCreate(ctx, org, &projectID)
	if core.KindOf(err) == core.KindNotFound {
		return core.Forbidden("you may not create workspaces in this project of organization %q", org)
	}
	return err
}

// requireManageWorkspace asks the authorization model whether the caller
// may change w's settings.
func requireManageWorkspace(ctx context.Context, w *Workspace) error {
	return authz.Allows(ctx, authz.WorkspaceUpdate, authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID})
}

// checkedTx runs fn in a transaction on workspace id, loaded for update,
// once check allows the caller in ctx. check runs before the transaction:
// the authorization model reads the caller's teams and grants, and inside
// the transaction that read would take a second connection while it holds
// the first (store.ErrConnInTx; enough of them at once deadlock the pool,
// and on SQLite the one writer). A workspace moved to another project
// between the check and the transaction was checked against the wrong
// project: fn does not run, and the caller is told to try again.
func (s *Service) checkedTx(ctx context.Context, id string, check func(context.Context, *Workspace) error, fn func(tx *store.Tx, w *Workspace) error) error {
	pre, err := s.load(ctx, s.db, id, false)
	if err != nil {
		return err
	}
	if err := check(ctx, pre); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		w, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if w.ProjectID != pre.ProjectID {
			return core.Conflict("workspace %s moved to another project meanwhile; try again", w.Name)
		}
		return fn(tx, w)
	})
}

// requireForceDelete asks the authorization model whether the caller may
// delete w whatever it manages.
func requireForceDelete(ctx context.Context, w *Workspace) error {
	return authz.Allows(ctx, authz.WorkspaceForceDelete, authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID})
}

// requireMoveOut asks the authorization model whether the caller may move
// w out of its project: the move permission on the workspace (admin
// includes it, and so does a project grant's workspace-access move).
func requireMoveOut(ctx context.Context, w *Workspace) error {
	return authz.Allows(ctx, authz.WorkspaceMove, authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID})
}

// requireMove asks the authorization model whether the caller may move w
// into project dest, as HCP Terraform decides it: the move permission on
// the workspace and the right to create workspaces in the destination. A
// destination the caller may not see is not found, as one that does not
// exist is.
func requireMove(ctx context.Context, w *Workspace, dest string) error {
	if err := requireMoveOut(ctx, w); err != nil {
		return err
	}
	return requireMoveInto(ctx, w, dest)
}

// requireMoveInto is requireMove's destination half.
func requireMoveInto(ctx context.Context, w *Workspace, dest string) error {
	err := authz.Allows(ctx, authz.ProjectCreateWorkspace, authz.Resource{Organization: w.Organization, ProjectID: dest})
	return core.NotFoundAs(err, "project %q not found in organization %q", dest, w.Organization)
}

// onlyMoves reports whether an update changes nothing of a workspace but
// its project: the move permission decides it, not the right to change
// the workspace's settings. It is the one place a move is recognized: the
// API's guard leaves the update's decision to Update.
func (o Options) onlyMoves() bool {
	rest := o
	rest.ProjectID = nil
	return o.ProjectID != nil && reflect.ValueOf(rest).IsZero()
}

// Create adds a workspace to an organization.
func (s *Service) Create(ctx context.Context, org string, o Options) (*Workspace, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	if err := s.requireCreate(ctx, org, o.ProjectID); err != nil {
		return nil, err
	}
	if o.Name == nil || *o.Name == "" {
		return nil, core.Invalid("name is required")
	}
	now := core.Now()
	w := &Workspace{ID: core.NewID(core.PrefixWorkspace), Organization: org, Settings: defaultSettings(), CreatedAt: now, UpdatedAt: now}
	if o.GlobalRemoteState == nil && s.DefaultRemoteState != nil {
		// The site's default; project-remote-state, when asked for,
		// turns it off (apply).
		def, err := s.DefaultRemoteState(ctx)
		if err != nil {
			return nil, err
		}
		w.Settings.GlobalRemoteState = def
	}
	if err := o.apply(w); err != nil {
		return nil, err
	}
	if err := s.setProject(ctx, w, o.ProjectID); err != nil {
		return nil, err
	}
	if o.TagBindings != nil {
		if err := validateBindings(*o.TagBindings); err != nil {
			return nil, err
		}
	}
	if o.VCSRepo != nil {
		repo, err := s.resolveVCS(ctx, org, w.ProjectID, nil, *o.VCSRepo)
		if err != nil {
			return nil, err
		}
		w.Settings.VCSRepo = repo
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		if o.TerraformVersion != nil {
			if err := s.checkVersion(ctx, tx, org, w.Settings.TerraformVersion); err != nil {
				return err
			}
		}
		if err := s.checkLimit(ctx, tx, org); err != nil {
			return err
		}
		if err := s.keepPool(ctx, tx, org, o); err != nil {
			return err
		}
		attrs, _ := json.Marshal(w.Settings)
		_, err := tx.Exec(ctx, `INSERT INTO workspaces (id, organization_name, project_id, name, attrs, terraform_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			w.ID, org, w.ProjectID, w.Name, string(attrs), UsedVersion(w.Settings.TerraformVersion), core.Micros(now), core.Micros(now))
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", w.Name)
		}
		if err != nil {
			return err
		}
		if w.Settings.VCSRepo != nil {
			if err := s.VCS.Connect(ctx, tx, w.ID, nil, w.Settings.VCSRepo); err != nil {
				return err
			}
		}
		if len(o.Tags) > 0 {
			if err := s.addTags(ctx, tx, w, o.Tags); err != nil {
				return err
			}
		}
		if o.TagBindings != nil {
			return s.addBindings(ctx, tx, w, *o.TagBindings)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, w.ID)
}

func (s *Service) setProject(ctx context.Context, w *Workspace, projectID *string) error {
	if projectID == nil || *projectID == "" {
		if w.ProjectID != "" {
			return nil
		}
		id, err := s.projects.DefaultID(ctx, w.Organization)
		if err != nil {
			return err
		}
		w.ProjectID = id
		return nil
	}
	p, err := s.projects.ProjectInfo(ctx, *projectID)
	if err != nil || p.Organization != w.Organization {
		return core.NotFound("project %q not found in organization %q", *projectID, w.Organization)
	}
	w.ProjectID = p.ID
	return nil
}

// ListOptions filter a workspace list.
type ListOptions struct {
	Search       string // substring of the name
	WildcardName string // "*foo", "foo*", "*foo*" or an exact name
	Tags         []string
	ExcludeTags  []string
	ProjectID    string
	Tagged       []TagBinding
	Locked       *bool // only locked (true) or unlocked (false) workspaces
	// CurrentRunStatus keeps the workspaces whose current run has one of
	// these statuses.
	CurrentRunStatus []string
	Sort             string // name, -name, created-at, -created-at, updated-at, -updated-at, current-run.created-at, -current-run.created-at
}

// RunHistorySQL is implemented by a run domain that says, in SQL over a
// workspace's id written ws.id, when its current run was created and its
// status (NULL: no run), for lists sorted or filtered by them.
type RunHistorySQL interface {
	CurrentRunCreatedAtSQL() string
	CurrentRunStatusSQL() string
}

// List returns all of an organization's workspaces that match opts (the
// caller may read), in opts' order.
func (s *Service) List(ctx context.Context, org string, opts ListOptions) ([]*Workspace, error) {
	ws, _, err := s.ListPage(ctx, org, opts, 0, -1)
	return ws, err
}

// ListPage returns at most limit (all when negative) of the workspaces
// List returns, from offset on, and how many List returns in all. The
// filters, the order and the page are the store's: the cost follows the
// page, not the organization's size.
func (s *Service) ListPage(ctx context.Context, org string, opts ListOptions, offset, limit int) ([]*Workspace, int, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, 0, err
	}
	where, args, each, all, err := s.listWhere(ctx, org, opts)
	if err != nil {
		return nil, 0, err
	}
	offset = max(offset, 0)
	order := s.listOrder(opts.Sort)
	if each != nil {
		// A run token: its reach is asked of each workspace, so the page
		// is taken after that.
		all, err := store.All(ctx, s.db, scanWithTags, `SELECT `+cols+`, `+tagNamesSQL+` FROM workspaces ws WHERE `+where+` ORDER BY `+order, args...)
		if err != nil {
			return nil, 0, err
		}
		out := []*Workspace{}
		for _, w := range all {
			if each(w.ProjectID, w.ID) {
				out = append(out, w)
			}
		}
		total := len(out)
		out = out[min(offset, total):]
		if limit >= 0 {
			out = out[:min(limit, len(out))]
		}
		return out, total, nil
	}
	if all {
		// Every workspace of the organization: the total is the count the
		// store keeps (migration 1043), not a count of the organization's
		// workspaces for every page.
		var total int
		err := s.db.QueryRow(ctx, `SELECT workspaces FROM workspace_counts WHERE organization_name = ?`, org).Scan(&total)
		if err != nil && !store.IsNoRows(err) {
			return nil, 0, err
		}
		return store.PageOf(ctx, s.db, scanWithTags, cols+`, `+tagNamesSQL, "workspaces ws", where, order, offset, limit, total, args...)
	}
	return store.Page(ctx, s.db, scanWithTags, cols+`, `+tagNamesSQL, "workspaces ws", where, order, offset, limit, args...)
}

// listWhere is the condition on a workspaces row aliased ws that List's
// opts and the caller's reach make, with its arguments; each is the test
// of a caller whose reach is asked workspace by workspace (a run token's),
// nil otherwise.
//
// all reports that the condition is the organization's alone: the caller
// reads every workspace of it and no filter applies.
func (s *Service) listWhere(ctx context.Context, org string, opts ListOptions) (where string, args []any, each func(projectID, workspaceID string) bool, all bool, err error) {
	conds := []string{`ws.organization_name = ?`}
	args = []any{org}
	and := func(cond string, a ...any) {
		conds = append(conds, cond)
		args = append(args, a...)
	}
	readable, rargs, each, err := authz.ReadableWorkspaces(ctx, org)
	if err != nil {
		return "", nil, nil, false, err
	}
	if readable != "" {
		and(readable, rargs...)
	}
	if opts.ProjectID != "" {
		and(`ws.project_id = ?`, opts.ProjectID)
	}
	// Names are letters, digits, "-" and "_" (nameRE), matched without
	// regard to case; "_" is escaped out of LIKE's wildcards.
	if opts.Search != "" {
		and(`LOWER(ws.name) LIKE ?`+store.LikeEscape, "%"+store.EscapeLike(strings.ToLower(opts.Search))+"%")
	}
	if p := strings.ToLower(opts.WildcardName); p != "" {
		pattern := store.EscapeLike(strings.Trim(p, "*"))
		if strings.HasPrefix(p, "*") {
			pattern = "%" + pattern
		}
		if strings.HasSuffix(p, "*") {
			pattern += "%"
		}
		and(`LOWER(ws.name) LIKE ?`+store.LikeEscape, pattern)
	}
	// search[tags] names single-value tags or the keys of tag bindings
	// (the workspace's own or its project's): terraform 1.10+ sends a
	// cloud block's key/value tags both as filter[tagged] and, "just in
	// case", their keys as search[tags], expecting the same workspaces
	// from either. From the tag to its workspaces, through the tags' and
	// workspace_tags' indexes, rather than a subquery per workspace.
	const tagged = `(ws.id IN (SELECT wt.workspace_id FROM tags t JOIN workspace_tags wt ON wt.tag_id = t.id WHERE t.organization_name = ? AND t.name = ?)` +
		` OR EXISTS (SELECT 1 FROM workspace_tag_bindings b WHERE b.workspace_id = ws.id AND b.tag_key = ?)` +
		` OR EXISTS (SELECT 1 FROM project_tag_bindings pb WHERE pb.project_id = ws.project_id AND pb.tag_key = ?))`
	for _, t := range opts.Tags {
		if t = strings.TrimSpace(t); t != "" {
			and(tagged, org, strings.ToLower(t), t, t)
		}
	}
	for _, t := range opts.ExcludeTags {
		if t = strings.TrimSpace(t); t != "" {
			and(`NOT `+tagged, org, strings.ToLower(t), t, t)
		}
	}
	// A tag binding filter matches the workspace's effective bindings:
	// its own, and its project's for the keys it does not bind itself.
	for _, b := range opts.Tagged {
		own := `SELECT 1 FROM workspace_tag_bindings b WHERE b.workspace_id = ws.id AND b.tag_key = ?`
		inherited := `SELECT 1 FROM project_tag_bindings pb WHERE pb.project_id = ws.project_id AND pb.tag_key = ?`
		if b.Value == "" {
			and(`(EXISTS (`+own+`) OR EXISTS (`+inherited+`))`, b.Key, b.Key)
			continue
		}
		// The project's binding holds where the workspace has none, and
		// where the key is reserved with overrides disabled
		// (EffectiveTagBindings).
		and(`((EXISTS (`+own+` AND b.tag_value = ?) AND NOT (`+lockedKeySQL+` AND EXISTS (`+inherited+`)))`+
			` OR ((NOT EXISTS (`+own+`) OR `+lockedKeySQL+`) AND EXISTS (`+inherited+` AND pb.tag_value = ?)))`,
			b.Key, b.Value, b.Key, true, b.Key, b.Key, b.Key, true, b.Key, b.Value)
	}
	if opts.Locked != nil {
		if *opts.Locked {
			and(`ws.locked_by_kind <> ''`)
		} else {
			and(`ws.locked_by_kind = ''`)
		}
	}
	if len(opts.CurrentRunStatus) > 0 {
		h, ok := s.Runs.(RunHistorySQL)
		if !ok || s.Runs == nil {
			return "", nil, nil, false, core.Invalid("filter[current-run][status] is not available")
		}
		in, statuses := store.In(opts.CurrentRunStatus)
		and(`(`+h.CurrentRunStatusSQL()+`) IN (`+in+`)`, statuses...)
	}
	return strings.Join(conds, ` AND `), args, each, len(conds) == 1 && each == nil, nil
}

// listOrder is the ORDER BY of a list sorted by: name (the default),
// created-at, updated-at or current-run.created-at, a "-" prefix
// reversing; ties go by name. Workspaces without a current run sort as if
// their run were newest of all, as PostgreSQL orders NULLs (last
// ascending, first descending).
func (s *Service) listOrder(by string) string {
	desc := strings.HasPrefix(by, "-")
	dir := ""
	if desc {
		dir = " DESC"
	}
	switch strings.TrimPrefix(by, "-") {
	case "created-at":
		return `ws.created_at` + dir + `, ws.name, ws.id`
	case "updated-at":
		return `ws.updated_at` + dir + `, ws.name, ws.id`
	case "current-run.created-at":
		h, ok := s.Runs.(RunHistorySQL)
		if !ok || s.Runs == nil {
			return `ws.created_at` + dir + `, ws.name, ws.id`
		}
		at := `(` + h.CurrentRunCreatedAtSQL() + `)`
		if desc {
			return `(` + at + ` IS NULL) DESC, ` + at + ` DESC, ws.name, ws.id`
		}
		return `(` + at + ` IS NULL), ` + at + `, ws.name, ws.id`
	}
	// Names are unique in an organization: the order is the unique
	// index's, which the store walks for a page instead of sorting every
	// workspace (PostgreSQL sorted 10,000 names, in its collation, for
	// each page).
	return `ws.name` + dir
}

// Update changes a workspace.
func (s *Service) Update(ctx context.Context, id string, o Options) (*Workspace, error) {
	// The access check and the project are looked up before the
	// transaction (the model reads the caller's teams: a read inside it
	// would take a second connection; the agent pool is checked and kept
	// inside it, keepPool); the project's errors are reported after the
	// access check, and so is a move the caller may not make (the whole
	// update is then refused). A workspace's organization never changes;
	// one moved to another project meanwhile was checked against the
	// wrong project, so the update is refused.
	var projectErr error
	var projectID string
	pre, err := s.load(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if o.ManagedBy != nil {
		return nil, core.Invalid("a workspace is marked as a stack's when it is created, and the mark does not change")
	}
	// An update of nothing but the project is a move: the move permission
	// (a project grant may give it without admin); any other needs the
	// right to change the workspace's settings.
	moveOnly := o.onlyMoves()
	if moveOnly {
		err = requireMoveOut(ctx, pre)
	} else {
		err = requireManageWorkspace(ctx, pre)
	}
	if err != nil {
		return nil, err
	}
	if o.ProjectID != nil && *o.ProjectID != "" {
		c := *pre
		projectErr, projectID = s.setProject(ctx, &c, o.ProjectID), c.ProjectID
		if projectErr == nil && projectID != pre.ProjectID {
			if moveOnly {
				projectErr = requireMoveInto(ctx, pre, projectID)
			} else {
				projectErr = requireMove(ctx, pre, projectID)
			}
		}
	}
	// A connection is checked with the host before the transaction, for
	// the project the workspace ends in.
	var repo *VCSRepo
	dest := pre.ProjectID
	if projectErr == nil && projectID != "" {
		dest = projectID
	}
	// A connected workspace moved to another project keeps its
	// connection only if that project may use its token.
	if o.VCSRepo == nil && !o.RemoveVCSRepo && pre.Settings.VCSRepo != nil && dest != pre.ProjectID && s.VCS != nil {
		if err := s.VCS.CheckScope(ctx, pre.Organization, dest, pre.Settings.VCSRepo); err != nil {
			return nil, err
		}
	}
	if o.VCSRepo != nil && !o.RemoveVCSRepo {
		if repo, err = s.resolveVCS(ctx, pre.Organization, dest, pre.Settings.VCSRepo, *o.VCSRepo); err != nil {
			return nil, err
		}
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		w, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if w.ProjectID != pre.ProjectID {
			return core.Conflict("workspace %s moved to another project while it was being updated; try again", id)
		}
		before := UsedVersion(w.Settings.TerraformVersion)
		prevRepo := w.Settings.VCSRepo
		if err := o.apply(w); err != nil {
			return err
		}
		if o.VCSRepo != nil || o.RemoveVCSRepo {
			if !vcsrepo.Same(prevRepo, pre.Settings.VCSRepo) {
				return core.Conflict("workspace %s's VCS connection changed while it was being updated; try again", id)
			}
			w.Settings.VCSRepo = repo
			if s.VCS != nil {
				if err := s.VCS.Connect(ctx, tx, w.ID, prevRepo, repo); err != nil {
					return err
				}
			}
		}
		// Only a change of version is checked: a workspace keeps a
		// version disabled after it chose it, and an update that sends
		// its settings back unchanged (as terraform's provider does) is
		// not refused for it.
		if after := UsedVersion(w.Settings.TerraformVersion); after != before {
			if err := s.checkVersion(ctx, tx, w.Organization, after); err != nil {
				return err
			}
		}
		if err := s.keepPool(ctx, tx, w.Organization, o); err != nil {
			return err
		}
		if o.ProjectID != nil && *o.ProjectID != "" {
			if projectErr != nil {
				return projectErr
			}
			w.ProjectID = projectID
		}
		w.UpdatedAt = core.Now()
		attrs, _ := json.Marshal(w.Settings)
		_, err = tx.Exec(ctx, `UPDATE workspaces SET name = ?, project_id = ?, attrs = ?, terraform_version = ?, updated_at = ? WHERE id = ?`,
			w.Name, w.ProjectID, string(attrs), UsedVersion(w.Settings.TerraformVersion), core.Micros(w.UpdatedAt), w.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", w.Name)
		}
		if err != nil {
			return err
		}
		if o.TagBindings != nil {
			if err := validateBindings(*o.TagBindings); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM workspace_tag_bindings WHERE workspace_id = ?`, w.ID); err != nil {
				return err
			}
			return s.addBindings(ctx, tx, w, *o.TagBindings)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// resolveVCS asks the VCS domain for the connection o asks for.
func (s *Service) resolveVCS(ctx context.Context, org, projectID string, cur *VCSRepo, o VCSRepoOptions) (*VCSRepo, error) {
	if s.VCS == nil {
		return nil, core.Invalid("VCS connections are not supported by this server")
	}
	return s.VCS.Resolve(ctx, org, projectID, cur, o)
}

// DisconnectVCS removes the VCS connection of workspaces, inside another
// domain's transaction q (the VCS domain's, when the token they connect
// through is deleted), without checking the caller.
func (s *Service) DisconnectVCS(ctx context.Context, q store.Q, workspaceIDs []string) error {
	for _, id := range workspaceIDs {
		w, err := s.read(ctx, q, true, `id = ?`, id)
		if store.IsNoRows(err) {
			continue
		}
		if err != nil {
			return err
		}
		if w.Settings.VCSRepo == nil {
			continue
		}
		w.Settings.VCSRepo = nil
		attrs, _ := json.Marshal(w.Settings)
		if _, err := q.Exec(ctx, `UPDATE workspaces SET attrs = ?, updated_at = ? WHERE id = ?`, string(attrs), core.Micros(core.Now()), id); err != nil {
			return err
		}
	}
	return nil
}

// UsedVersion is a terraform version as the terraform_version column
// keeps it and the registered versions are named: a leading "v" dropped,
// so that "v1.5.7" uses 1.5.7.
func UsedVersion(v string) string { return strings.TrimPrefix(strings.TrimSpace(v), "v") }

// checkVersion asks the registered versions whether a workspace of org
// may be set to version (through tx: see TerraformVersions).
func (s *Service) checkVersion(ctx context.Context, tx store.Q, org, version string) error {
	if s.Versions == nil {
		return nil
	}
	beta := false
	if s.BetaTools != nil {
		var err error
		if beta, err = s.BetaTools(ctx, tx, org); err != nil {
			return err
		}
	}
	return s.Versions.CheckSelectable(ctx, tx, UsedVersion(version), beta)
}

// TerraformVersionUsage counts the workspaces of the whole site that use
// each of versions (as UsedVersion writes them), reading through q: for
// the admin terraform versions API's usage, and its refusal to delete a
// version in use. A version no workspace uses is left out.
func TerraformVersionUsage(ctx context.Context, q store.Q, versions []string) (map[string]int, error) {
	out := map[string]int{}
	if len(versions) == 0 {
		return out, nil
	}
	in, args := store.In(versions)
	type used struct {
		version string
		n       int
	}
	counts, err := store.All(ctx, q, func(sc store.Scanner) (u used, err error) {
		return u, sc.Scan(&u.version, &u.n)
	}, `SELECT terraform_version, COUNT(*) FROM workspaces WHERE terraform_version IN (`+in+`) GROUP BY terraform_version`, args...)
	for _, u := range counts {
		out[u.version] = u.n
	}
	return out, err
}

// Delete removes a workspace, whatever its state: a force delete, for
// those the API tells can-force-delete (WorkspaceForceDelete: the
// workspace's admins who are owners, and its other admins when the
// organization allows force deletes).
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.checkedTx(ctx, id, requireForceDelete, func(tx *store.Tx, w *Workspace) error {
		return s.remove(ctx, tx, w.ID)
	})
}

// SafeDelete removes a workspace only when it is unlocked and manages no
// resources, for those the API tells can-destroy (WorkspaceDelete: admins,
// and teams given the delete permission).
func (s *Service) SafeDelete(ctx context.Context, id string) error {
	check := func(ctx context.Context, w *Workspace) error {
		if err := authz.Allows(ctx, authz.WorkspaceDelete, authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID}); err != nil {
			return err
		}
		if s.State == nil {
			return nil
		}
		n, err := s.State.ResourceCount(ctx, w.ID)
		if err != nil {
			return err
		}
		if n > 0 {
			return core.Conflict("workspace cannot be safely deleted because it is still managing resources")
		}
		return nil
	}
	return s.checkedTx(ctx, id, check, func(tx *store.Tx, w *Workspace) error {
		if w.Locked() {
			return core.Conflict("Workspace is currently locked. Workspace must be unlocked before it can be safely deleted")
		}
		return s.remove(ctx, tx, w.ID)
	})
}

// Discard removes workspace id, which its caller's own request has just
// created and now gives up on (a no-code provision that failed half way:
// "on failure nothing remains"). Creating it was decided, so removing it
// is not asked again: a creator who may not delete workspaces (a project
// grant that creates but does not delete) still leaves nothing behind. It
// is refused, as SafeDelete is, for a workspace that manages resources,
// is locked or has a run: by then it is no longer just made.
func (s *Service) Discard(ctx context.Context, id string) error {
	check := func(ctx context.Context, w *Workspace) error {
		if s.Runs != nil {
			if run, err := s.Runs.CurrentRunID(ctx, w.ID); err != nil {
				return err
			} else if run != "" {
				return core.Conflict("workspace %s has a run: not discarded", w.Name)
			}
		}
		if s.State != nil {
			if n, err := s.State.ResourceCount(ctx, w.ID); err != nil {
				return err
			} else if n > 0 {
				return core.Conflict("workspace %s manages resources: not discarded", w.Name)
			}
		}
		return nil
	}
	return s.checkedTx(ctx, id, check, func(tx *store.Tx, w *Workspace) error {
		if w.Locked() {
			return core.Conflict("workspace %s is locked: not discarded", w.Name)
		}
		return s.remove(ctx, tx, w.ID)
	})
}

// holder returns the lock holder the caller would be.
func holder(ctx context.Context) (kind, id string, err error) {
	p := auth.FromContext(ctx)
	if p == nil {
		return "", "", core.Unauthorized("no token given")
	}
	switch p.Kind {
	case auth.KindUser:
		return LockUser, p.UserID, nil
	case auth.KindTeam:
		return LockTeam, p.TeamID, nil
	case auth.KindRun:
		return LockRun, p.RunID, nil
	}
	return "", "", core.Forbidden("%s cannot lock or unlock workspaces", p.Kind.Token())
}

func holderName(kind string) string {
	switch kind {
	case LockRun:
		return "Run"
	case LockTeam:
		return "Team"
	}
	return "User"
}

// Lock locks the workspace for the caller. Two concurrent locks cannot
// both succeed: the check and the update happen under a row lock.
func (s *Service) Lock(ctx context.Context, id, reason string) (*Workspace, error) {
	kind, hid, err := holder(ctx)
	if err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		w, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if w.Locked() {
			return core.Conflict("workspace already locked")
		}
		res, err := tx.Exec(ctx, `UPDATE workspaces SET locked_by_kind = ?, locked_by_id = ?, lock_reason = ? WHERE id = ? AND locked_by_kind = ''`,
			kind, hid, reason, w.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return core.Conflict("workspace already locked")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// Unlock releases the caller's lock. With force, an owner releases anyone's.
func (s *Service) Unlock(ctx context.Context, id string, force bool) (*Workspace, error) {
	var kind, hid string
	if !force {
		var err error
		if kind, hid, err = holder(ctx); err != nil {
			return nil, err
		}
	}
	check := func(ctx context.Context, w *Workspace) error {
		if force && authz.Allows(ctx, authz.WorkspaceForceUnlock, authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID}) != nil {
			return core.Forbidden("only owners may force-unlock workspaces")
		}
		return nil
	}
	err := s.checkedTx(ctx, id, check, func(tx *store.Tx, w *Workspace) error {
		if !w.Locked() {
			return core.Conflict("workspace already unlocked")
		}
		if !force && (w.LockKind != kind || w.LockID != hid) {
			return core.Conflict("workspace %s is locked by %s %s", w.Name, holderName(w.LockKind), w.LockID)
		}
		_, err := tx.Exec(ctx, `UPDATE workspaces SET locked_by_kind = '', locked_by_id = '', lock_reason = '' WHERE id = ?`, w.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, fn := range s.OnUnlock {
		fn(ctx, id)
	}
	return s.Get(ctx, id)
}

// LockForRun makes runID the holder of the workspace's lock inside q's
// transaction. It reports false when someone else holds the lock; taking a
// lock the run already holds succeeds. The conditional update makes
// concurrent callers safe on both stores.
func (s *Service) LockForRun(ctx context.Context, q store.Q, workspaceID, runID string) (bool, error) {
	res, err := q.Exec(ctx, `UPDATE workspaces SET locked_by_kind = ?, locked_by_id = ?, lock_reason = ?
		WHERE id = ? AND (locked_by_kind = '' OR (locked_by_kind = ? AND locked_by_id = ?))`,
		LockRun, runID, "Locked by run "+runID, workspaceID, LockRun, runID)
	if err != nil {
		return false, fmt.Errorf("locking workspace %s for run %s: %w", workspaceID, runID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// LockQueue takes the workspace's row lock for the rest of q's transaction
// on PostgreSQL (SQLite's write transactions run one at a time already).
// The run domain takes it before it creates a run that waits in the
// workspace's queue and before it schedules on a user's unlock: the run
// that ends holds the row too (its unlock writes it), so a run created
// while another ends is read by one of the two transactions. Without it,
// each read the other's work uncommitted: the ending run saw no pending
// run, the new run saw the workspace still held, and the new run stayed
// pending for good.
func (s *Service) LockQueue(ctx context.Context, q store.Q, workspaceID string) error {
	lock := store.ForUpdate(q)
	if lock == "" {
		return nil
	}
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM workspaces WHERE id = ?`+lock, workspaceID).Scan(&id)
	if err != nil && !store.IsNoRows(err) {
		return fmt.Errorf("locking workspace %s's queue: %w", workspaceID, err)
	}
	return nil
}

// LockIn is LockQueue (the same row) for another domain that decides over
// what hangs on the workspace: notify counts its configurations under it.
// Unlike LockQueue it answers core.NotFound when the workspace is gone
// (deleted since the caller read it), so nothing is added to it.
func (s *Service) LockIn(ctx context.Context, q store.Q, workspaceID string) error {
	if lock := store.ForUpdate(q); lock != "" {
		var id string
		err := q.QueryRow(ctx, `SELECT id FROM workspaces WHERE id = ?`+lock, workspaceID).Scan(&id)
		if store.IsNoRows(err) {
			return core.NotFound("workspace %q not found", workspaceID)
		}
		if err != nil {
			return fmt.Errorf("locking workspace %s: %w", workspaceID, err)
		}
	}
	return nil
}

// UnlockForRunSQL is the statement that releases the lock if runID holds
// it (no-op otherwise): the run domain sends it along with its own writes
// (one round trip on PostgreSQL).
func UnlockForRunSQL(workspaceID, runID string) (string, []any) {
	return `UPDATE workspaces SET locked_by_kind = '', locked_by_id = '', lock_reason = ''
		WHERE id = ? AND locked_by_kind = ? AND locked_by_id = ?`, []any{workspaceID, LockRun, runID}
}

// System returns a workspace without checking the caller's access, for
// background work (schedulers, runners) that acts for the system.
func (s *Service) System(ctx context.Context, id string) (*Workspace, error) {
	return s.loadUnchecked(ctx, s.db, id, false)
}

// SystemIn is System reading through q: inside a transaction, its Tx (a
// read on the DB there would take a second connection).
func (s *Service) SystemIn(ctx context.Context, q store.Q, id string) (*Workspace, error) {
	return s.loadUnchecked(ctx, q, id, false)
}

// AllSystem returns every workspace of every organization without checking
// the caller (tag names left out), for background work such as the health
// assessment scheduler.
func (s *Service) AllSystem(ctx context.Context) ([]*Workspace, error) {
	return store.All(ctx, s.db, scan, `SELECT `+cols+` FROM workspaces ORDER BY organization_name, name`)
}

// LockHolder returns who holds the workspace's lock: kind is "" when the
// workspace is unlocked, else "users", "teams" or "runs" with the holder's ID.
func (s *Service) LockHolder(ctx context.Context, id string) (kind, holderID string, err error) {
	w, err := s.Get(ctx, id)
	if err != nil {
		return "", "", err
	}
	return w.LockKind, w.LockID, nil
}

// LockedByCaller reports whether the workspace is locked by the caller.
func (s *Service) LockedByCaller(ctx context.Context, id string) (bool, error) {
	kind, hid, err := s.LockHolder(ctx, id)
	if err != nil {
		return false, err
	}
	ck, cid, err := holder(ctx)
	if err != nil {
		return false, nil
	}
	return kind != "" && kind == ck && hid == cid, nil
}

// EffectiveExecution returns the execution mode and agent pool that apply
// to w: its own when overwritten, else its project's.
func (s *Service) EffectiveExecution(ctx context.Context, w *Workspace) (mode, agentPoolID string) {
	return s.EffectiveExecutionIn(ctx, s.db, w)
}

// EffectiveExecutionIn is EffectiveExecution reading through q (inside a
// transaction, its Tx).
func (s *Service) EffectiveExecutionIn(ctx context.Context, q store.Q, w *Workspace) (mode, agentPoolID string) {
	if w.Settings.ExecutionModeOverwrite {
		// The workspace's own mode and pool: its project's do not count,
		// so they are not read (three queries on a run's way to its plan).
		return effectiveExecution(w, ProjectDefaults{}, false)
	}
	if _, cached := ctx.Value(projectCacheKey{}).(map[string]*ProjectInfo); !cached {
		// The project's defaults in one statement, as a workspace read
		// says them, instead of the project, its tag bindings and its
		// organization one by one.
		if pd, ok := s.projectDefaultsIn(ctx, q, w.ID); ok {
			return effectiveExecution(w, pd, true)
		}
	}
	var pd ProjectDefaults
	p, err := s.projectInfoIn(ctx, q, w.ProjectID)
	if err == nil {
		pd = ProjectDefaults{ExecutionMode: p.ExecutionMode, AgentPoolID: p.AgentPoolID}
	}
	return effectiveExecution(w, pd, err == nil)
}

// projectDefaultsIn reads the defaults workspace id inherits from its
// project in one statement through q, when the projects say them in SQL
// (ProjectSQL); ok is false otherwise, or when the project cannot be read.
func (s *Service) projectDefaultsIn(ctx context.Context, q store.Q, id string) (ProjectDefaults, bool) {
	ps, isSQL := s.projects.(ProjectSQL)
	if !isSQL || s.projects == nil {
		return ProjectDefaults{}, false
	}
	cols, ok := ps.WorkspaceProjectSQL()
	if !ok {
		return ProjectDefaults{}, false
	}
	vals := make([]sql.NullString, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := q.QueryRow(ctx, `SELECT `+selectList(cols)+` FROM workspaces ws WHERE ws.id = ?`, id).Scan(dest...); err != nil {
		return ProjectDefaults{}, false
	}
	pd, err := ps.WorkspaceProjectOf(vals)
	return pd, err == nil
}

// effectiveExecution is EffectiveExecution once the project's defaults
// are known (ok false: the project could not be read).
func effectiveExecution(w *Workspace, p ProjectDefaults, ok bool) (mode, agentPoolID string) {
	mode, agentPoolID = "remote", ""
	if ok {
		mode, agentPoolID = p.ExecutionMode, p.AgentPoolID
	}
	if w.Settings.ExecutionModeOverwrite {
		mode, agentPoolID = w.Settings.ExecutionMode, ""
	}
	if w.Settings.AgentPoolOverwrite && w.Settings.AgentPoolID != "" {
		agentPoolID = w.Settings.AgentPoolID
	}
	if mode == "" {
		mode = "remote"
	}
	if mode != "agent" {
		agentPoolID = ""
	}
	return mode, agentPoolID
}

// autoDestroyDuration returns w's auto-destroy activity duration: its own,
// else its project's when it inherits it.
func (s *Service) autoDestroyDuration(ctx context.Context, w *Workspace) string {
	if w.Settings.AutoDestroyActivityDuration != "" || !w.Settings.InheritsProjectAutoDestroy {
		return w.Settings.AutoDestroyActivityDuration
	}
	var project string
	if p, err := s.projectInfo(ctx, w.ProjectID); err == nil {
		project = p.AutoDestroyActivityDuration
	}
	return inheritedAutoDestroy(w, project)
}

// inheritedAutoDestroy is autoDestroyDuration once the project's duration
// (project) is known.
func inheritedAutoDestroy(w *Workspace, project string) string {
	if w.Settings.AutoDestroyActivityDuration != "" || !w.Settings.InheritsProjectAutoDestroy {
		return w.Settings.AutoDestroyActivityDuration
	}
	return project
}

type projectCacheKey struct{}

// WithProjectCache returns ctx carrying a cache of project lookups, for
// requests that render many workspaces. The cache is not safe for
// concurrent use.
func WithProjectCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, projectCacheKey{}, map[string]*ProjectInfo{})
}

func (s *Service) projectInfo(ctx context.Context, id string) (*ProjectInfo, error) {
	return s.projectInfoIn(ctx, s.db, id)
}

func (s *Service) projectInfoIn(ctx context.Context, q store.Q, id string) (*ProjectInfo, error) {
	m, ok := ctx.Value(projectCacheKey{}).(map[string]*ProjectInfo)
	if !ok {
		return s.projects.WorkspaceProject(ctx, q, id)
	}
	if p := m[id]; p != nil {
		return p, nil
	}
	p, err := s.projects.WorkspaceProject(ctx, q, id)
	if err == nil {
		m[id] = p
	}
	return p, err
}
