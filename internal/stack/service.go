package stack

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// ID prefixes of the stack API's objects (as HCP Terraform spells them).
const (
	PrefixStack         = "st"
	PrefixConfiguration = "stc"
	PrefixGroup         = "sdg"
	PrefixDeployment    = "sdep"
	PrefixDiagnostic    = "sdi"
)

// DefaultMaxUploadBytes bounds an uploaded configuration archive.
const DefaultMaxUploadBytes = 100 << 20

func nowUTC() time.Time { return core.Now() }

// Projects is what the stack domain needs from projects.
type Projects interface {
	// Organization returns the organization of a project the caller can
	// see, or a not-found error.
	Organization(ctx context.Context, projectID string) (string, error)
	// Name returns the name of a project of org, read on the stack
	// service's own behalf (upstream inputs name projects).
	Name(ctx context.Context, org, projectID string) (string, error)
}

// Organizations tells whether an organization exists.
type Organizations interface {
	Exists(ctx context.Context, name string) error
}

// AgentPools keeps the agent pool a stack names; the agent domain
// provides it.
type AgentPools interface {
	// KeepPool keeps pool id of organization org from being deleted
	// until q's transaction ends (core.Invalid when org has no such pool,
	// or has it no more).
	KeepPool(ctx context.Context, q store.Q, org, id string) error
}

// Options configure a Service; all but Logger and MaxUploadBytes are
// required.
type Options struct {
	DB             *store.DB
	Blobs          *blob.Store
	Signer         *blob.Signer
	Projects       Projects
	Orgs           Organizations
	Logger         *slog.Logger
	MaxUploadBytes int64
	// Executor runs deployments; without one, configurations are parsed
	// and recorded but no deployment run is made.
	Executor Executor
	// States reads deployments' states (nil: no stack states).
	States States
	// ApplyWait bounds how long an approved plan waits for its busy or
	// locked workspace before the deployment run fails (DefaultApplyWait
	// when zero).
	ApplyWait time.Duration
	// Keys seals deployment runs' inputs (VariablesColumn); nil stores
	// them as given.
	Keys *seal.Keyring
	// Pools checks and keeps the agent pool of a stack in agent
	// execution mode (nil: any pool id is taken as given).
	Pools AgentPools
}

// DefaultApplyWait is Options.ApplyWait's default.
const DefaultApplyWait = 10 * time.Minute

// Service manages stacks and their configurations.
type Service struct {
	db       *store.DB
	blobs    *blob.Store
	signer   *blob.Signer
	projects Projects
	orgs     Organizations
	pools    AgentPools
	logger   *slog.Logger
	maxBytes int64
	exec     Executor
	states   States
	// applyWait bounds an apply's wait for a busy workspace; busySince
	// (under busyMu) holds when each waiting run first found it busy. It
	// is memory only: a restart gives a waiting run the full wait again.
	applyWait time.Duration
	busyMu    sync.Mutex
	busySince map[string]time.Time
	wake      *loops.Wake // the loop's wake-up (Wake)
	keys      *seal.Keyring
	// VCS connects stacks to repositories; wired by the composition root
	// (nil: a vcs-repo is refused).
	VCS VCS
	// OnRunStatus hooks run in the transaction that writes a deployment
	// run's status: every status it takes, from pending (when it is made)
	// to its end (succeeded, failed or abandoned), each once (the VCS
	// domain reports them to the commit the configuration was made of).
	// Their error fails the change.
	OnRunStatus []func(ctx context.Context, q store.Q, r *DeploymentRun) error
}

// Origin records, in the transaction that makes a configuration, where it
// came from (the VCS domain: the commit its runs report to), before any of
// its runs exist.
type Origin func(ctx context.Context, q store.Q, configurationID string) error

// VCS connects stacks to repositories; the VCS domain provides it
// (vcs.Service).
type VCS interface {
	// Resolve checks, before the stack's transaction and as the caller,
	// the connection asked for a stack of org in project (cur: the
	// stack's, o: what the request sends, merged over it).
	Resolve(ctx context.Context, org, projectID string, cur *VCSRepo, o VCSRepoOptions) (*VCSRepo, error)
	// ConnectStack records in the stack's transaction q that its
	// connection is next (nil: none).
	ConnectStack(ctx context.Context, q store.Q, stackID string, next *VCSRepo) error
	// Fetch queues the fetch of the connected stack's branch head.
	Fetch(ctx context.Context, stackID string) error
}

// VCSRepo is a stack's connection to a repository (the VCS domain's type,
// as a workspace's); VCSRepoOptions what a request sends.
type (
	VCSRepo        = vcsrepo.Repo
	VCSRepoOptions = vcsrepo.Options
)

// NewService validates o and returns a service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Blobs == nil || o.Signer == nil || o.Projects == nil || o.Orgs == nil {
		return nil, errors.New("stack: NewService needs DB, Blobs, Signer, Projects and Orgs")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if o.ApplyWait <= 0 {
		o.ApplyWait = DefaultApplyWait
	}
	return &Service{db: o.DB, blobs: o.Blobs, signer: o.Signer, projects: o.Projects, orgs: o.Orgs, logger: o.Logger, maxBytes: o.MaxUploadBytes,
		exec: o.Executor, states: o.States, wake: loops.NewWake(), applyWait: o.ApplyWait, busySince: map[string]time.Time{}, keys: o.Keys,
		pools: o.Pools}, nil
}

// Authorization: every decision asks the one model (internal/authz) with
// the stack's project as the resource; HCP Terraform ties stacks to the
// permissions of their project.

// canRead: the caller may see the stack (project read).
func canRead(ctx context.Context, org, projectID string) error {
	return authz.Allows(ctx, authz.StackRead, authz.Resource{Organization: org, ProjectID: projectID})
}

// canManage: creating, changing and deleting stacks and uploading their
// configurations (manage workspaces, or a project grant that creates
// workspaces).
func canManage(ctx context.Context, org, projectID string) error {
	return authz.Allows(ctx, authz.StackManage, authz.Resource{Organization: org, ProjectID: projectID})
}

// canApprove: approving and cancelling deployment runs (write access to
// the project's workspaces).
func canApprove(ctx context.Context, org, projectID string) error {
	return authz.Allows(ctx, authz.StackApprove, authz.Resource{Organization: org, ProjectID: projectID})
}

// Stack is a stack (go-tfe's Stack).
type Stack struct {
	ID                 string
	Organization       string
	ProjectID          string
	Name               string
	Description        string
	SpeculativeEnabled bool
	ExecutionMode      string
	AgentPoolID        string
	WorkingDirectory   string
	TerraformVersion   string
	TriggerPatterns    []string
	// VCSRepo is the repository the stack's configurations come from
	// (nil: uploaded ones).
	VCSRepo   *VCSRepo
	CreatedAt time.Time
	UpdatedAt time.Time
}

// StackOptions are the attributes of a new or changed stack; nil is unset.
type StackOptions struct {
	Name               *string
	Description        *string
	SpeculativeEnabled *bool
	ExecutionMode      *string
	AgentPoolID        *string
	WorkingDirectory   *string
	TriggerPatterns    *[]string
	// TerraformVersion: the engine version of the deployments'
	// workspaces ("" for the server's default); a version that the
	// engines folder holds as tofu runs OpenTofu.
	TerraformVersion *string
	// VCSRepo connects the stack to a repository (or changes its
	// connection); RemoveVCSRepo (vcs-repo: null) disconnects it.
	VCSRepo       *VCSRepoOptions
	RemoveVCSRepo bool
}

var nameRE = core.NewPattern(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`, 1, 90)

var versionRE = regexp.MustCompile(`^(latest|v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?)$`)

func (o StackOptions) apply(st *Stack) error {
	if o.Name != nil {
		if !nameRE.MatchString(*o.Name) {
			return core.Invalid("name %q is not valid: use up to 90 letters, digits, dashes, dots and underscores, starting with a letter or digit", *o.Name)
		}
		st.Name = *o.Name
	}
	if o.Description != nil {
		st.Description = *o.Description
	}
	if o.SpeculativeEnabled != nil {
		st.SpeculativeEnabled = *o.SpeculativeEnabled
	}
	if o.ExecutionMode != nil {
		if *o.ExecutionMode != "remote" && *o.ExecutionMode != "agent" {
			return core.Invalid("execution-mode must be \"remote\" or \"agent\", not %q", *o.ExecutionMode)
		}
		st.ExecutionMode = *o.ExecutionMode
	}
	if o.AgentPoolID != nil {
		st.AgentPoolID = *o.AgentPoolID
	}
	if st.ExecutionMode == "agent" && st.AgentPoolID == "" {
		return core.Invalid("execution-mode \"agent\" needs an agent-pool")
	}
	if o.WorkingDirectory != nil {
		wd := filepath.ToSlash(filepath.Clean("/" + *o.WorkingDirectory))[1:]
		if strings.Contains(*o.WorkingDirectory, "..") {
			return core.Invalid("working-directory %q must stay inside the configuration", *o.WorkingDirectory)
		}
		st.WorkingDirectory = wd
	}
	if o.TriggerPatterns != nil {
		st.TriggerPatterns = append([]string{}, (*o.TriggerPatterns)...)
	}
	if o.TerraformVersion != nil {
		if *o.TerraformVersion != "" && !versionRE.MatchString(*o.TerraformVersion) {
			return core.Invalid("terraform-version %q is not a version: use an exact version such as 1.11.4, or latest", *o.TerraformVersion)
		}
		st.TerraformVersion = *o.TerraformVersion
	}
	return nil
}

const stackCols = `id, organization_name, project_id, name, description, speculative_enabled, execution_mode, agent_pool_id, working_directory, trigger_patterns, terraform_version, created_at, updated_at, vcs_repo`

func scanStack(sc store.Scanner) (*Stack, error) {
	var st Stack
	var tp, vcs string
	var c, u int64
	if err := sc.Scan(&st.ID, &st.Organization, &st.ProjectID, &st.Name, &st.Description, &st.SpeculativeEnabled, &st.ExecutionMode,
		&st.AgentPoolID, &st.WorkingDirectory, &tp, &st.TerraformVersion, &c, &u, &vcs); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tp), &st.TriggerPatterns); err != nil {
		return nil, fmt.Errorf("decoding trigger patterns of stack %s: %w", st.ID, err)
	}
	if vcs != "" {
		st.VCSRepo = new(VCSRepo)
		if err := json.Unmarshal([]byte(vcs), st.VCSRepo); err != nil {
			return nil, fmt.Errorf("decoding the vcs-repo of stack %s: %w", st.ID, err)
		}
	}
	st.CreatedAt, st.UpdatedAt = core.FromMicros(c), core.FromMicros(u)
	return &st, nil
}

// Outside a transaction the request memo keeps it (core.Memoize): a stack
// page or an API request asks several of the stack's lists, each of which
// checks the stack.
func loadStack(ctx context.Context, q store.Q, id string, forUpdate bool) (*Stack, error) {
	if _, inTx := q.(*store.Tx); inTx || forUpdate {
		return readStack(ctx, q, id, forUpdate)
	}
	st, err := core.Memoize(ctx, "stack:"+id, func() (*Stack, error) { return readStack(ctx, q, id, false) })
	if err != nil {
		return nil, err
	}
	c := *st
	c.TriggerPatterns = slices.Clone(st.TriggerPatterns)
	if st.VCSRepo != nil {
		repo := *st.VCSRepo
		c.VCSRepo = &repo
	}
	return &c, nil
}

func readStack(ctx context.Context, q store.Q, id string, forUpdate bool) (*Stack, error) {
	if !core.HasPrefix(id, PrefixStack) {
		return nil, core.NotFound("stack %q not found", id)
	}
	query := `SELECT ` + stackCols + ` FROM stacks WHERE id = ?`
	if forUpdate {
		query += store.ForUpdate(q)
	}
	st, err := scanStack(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("stack %q not found", id)
	}
	return st, err
}

// SystemStack returns a stack without checking the caller, for the server
// acting for the system (the VCS domain fetching its commits).
func (s *Service) SystemStack(ctx context.Context, id string) (*Stack, error) {
	return loadStack(ctx, s.db, id, false)
}

// GetStack returns a stack the caller can see.
func (s *Service) GetStack(ctx context.Context, id string) (*Stack, error) {
	st, err := loadStack(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := canRead(ctx, st.Organization, st.ProjectID); err != nil {
		return nil, core.NotFound("stack %q not found", id)
	}
	return st, nil
}

// CreateStack creates a stack in a project.
func (s *Service) CreateStack(ctx context.Context, projectID string, o StackOptions) (*Stack, error) {
	if projectID == "" {
		return nil, core.Invalid("a stack needs a project relationship")
	}
	if o.Name == nil {
		return nil, core.Invalid("a stack needs a name")
	}
	org, err := s.projects.Organization(ctx, projectID)
	if err != nil {
		return nil, err
	}
	if err := canManage(ctx, org, projectID); err != nil {
		return nil, err
	}
	now := nowUTC()
	st := &Stack{ID: core.NewID(PrefixStack), Organization: org, ProjectID: projectID, ExecutionMode: "remote", TriggerPatterns: []string{},
		CreatedAt: now, UpdatedAt: now}
	if err := o.apply(st); err != nil {
		return nil, err
	}
	if o.VCSRepo != nil {
		if st.VCSRepo, err = s.resolveVCS(ctx, st, nil, *o.VCSRepo); err != nil {
			return nil, err
		}
	}
	tp, _ := json.Marshal(st.TriggerPatterns)
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if err := s.keepPool(ctx, tx, st); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO stacks (`+stackCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			st.ID, st.Organization, st.ProjectID, st.Name, st.Description, st.SpeculativeEnabled, st.ExecutionMode, st.AgentPoolID,
			st.WorkingDirectory, string(tp), st.TerraformVersion, core.Micros(now), core.Micros(now), vcsJSON(st.VCSRepo))
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("a stack named %q already exists in project %s", st.Name, projectID)
		}
		if err != nil {
			return fmt.Errorf("creating stack: %w", err)
		}
		if st.VCSRepo != nil {
			return s.VCS.ConnectStack(ctx, tx, st.ID, st.VCSRepo)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// resolveVCS asks the VCS domain for the connection o asks for.
func (s *Service) resolveVCS(ctx context.Context, st *Stack, cur *VCSRepo, o VCSRepoOptions) (*VCSRepo, error) {
	if s.VCS == nil {
		return nil, core.Invalid("VCS-backed stacks are not supported by this server: create the stack without vcs-repo and upload configurations")
	}
	return s.VCS.Resolve(ctx, st.Organization, st.ProjectID, cur, o)
}

// vcsJSON is the vcs_repo column of a connection (” for none).
func vcsJSON(r *VCSRepo) string {
	if r == nil {
		return ""
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// DisconnectVCS removes the vcs-repo of stacks inside another domain's
// transaction q (the VCS domain's, deleting the token they connect
// through), without checking the caller.
func DisconnectVCS(ctx context.Context, q store.Q, stackIDs []string) error {
	for _, id := range stackIDs {
		if _, err := q.Exec(ctx, `UPDATE stacks SET vcs_repo = '' WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// FetchFromVCS queues the fetch of a connected stack's branch head into a
// new configuration (HCP Terraform's fetch-latest-from-vcs), for a caller
// who may manage the stack.
func (s *Service) FetchFromVCS(ctx context.Context, id string) (*Stack, error) {
	if _, err := s.checkManage(ctx, id); err != nil {
		return nil, err
	}
	st, err := loadStack(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if st.VCSRepo == nil || s.VCS == nil {
		return nil, core.Invalid("stack %s is not VCS-backed: upload configurations instead", id)
	}
	return st, s.VCS.Fetch(ctx, id)
}

// ConfigureFromArchive makes a configuration of a stack from an archive
// (a commit the VCS domain fetched), as the system: it is prepared and
// deployed as an uploaded one. Its source is fetch. A speculative one (a
// pull request's) only plans. origin (if not nil) runs in the transaction
// that makes the configuration.
func (s *Service) ConfigureFromArchive(ctx context.Context, stackID string, tgz []byte, speculative bool, origin Origin) (*Configuration, error) {
	c, err := s.createConfiguration(ctx, stackID, ConfigurationOptions{Speculative: speculative}, "fetch", origin)
	if err != nil {
		return nil, err
	}
	return s.Upload(ctx, c.ID, bytes.NewReader(tgz))
}

// keepPool, in the transaction q that writes st, checks the agent pool of
// a stack in agent execution mode (its organization's) and keeps it from
// being deleted before q commits: agent.Service.Delete counts the stacks
// naming it (UsingPool) after locking it.
func (s *Service) keepPool(ctx context.Context, q store.Q, st *Stack) error {
	if s.pools == nil || st.ExecutionMode != "agent" {
		return nil
	}
	return s.pools.KeepPool(ctx, q, st.Organization, st.AgentPoolID)
}

// UpdateStack changes a stack's attributes.
func (s *Service) UpdateStack(ctx context.Context, id string, o StackOptions) (*Stack, error) {
	checked, err := s.checkManage(ctx, id)
	if err != nil {
		return nil, err
	}
	// A connection is checked with the host before the transaction.
	var pre *Stack
	var repo *VCSRepo
	if o.VCSRepo != nil || o.RemoveVCSRepo {
		if pre, err = loadStack(ctx, s.db, id, false); err != nil {
			return nil, err
		}
		if o.VCSRepo != nil && !o.RemoveVCSRepo {
			if repo, err = s.resolveVCS(ctx, pre, pre.VCSRepo, *o.VCSRepo); err != nil {
				return nil, err
			}
		}
	}
	var out *Stack
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		st, err := loadStack(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := sameProject(st, checked); err != nil {
			return err
		}
		if err := o.apply(st); err != nil {
			return err
		}
		if pre != nil {
			if !vcsrepo.Same(st.VCSRepo, pre.VCSRepo) {
				return core.Conflict("stack %s's VCS connection changed while it was being updated; try again", id)
			}
			st.VCSRepo = repo
			if s.VCS != nil {
				if err := s.VCS.ConnectStack(ctx, tx, st.ID, repo); err != nil {
					return err
				}
			}
		}
		if err := s.keepPool(ctx, tx, st); err != nil {
			return err
		}
		st.UpdatedAt = nowUTC()
		tp, _ := json.Marshal(st.TriggerPatterns)
		_, err = tx.Exec(ctx, `UPDATE stacks SET name = ?, description = ?, speculative_enabled = ?, execution_mode = ?, agent_pool_id = ?,
			working_directory = ?, trigger_patterns = ?, terraform_version = ?, updated_at = ?, vcs_repo = ? WHERE id = ?`,
			st.Name, st.Description, st.SpeculativeEnabled, st.ExecutionMode, st.AgentPoolID, st.WorkingDirectory, string(tp), st.TerraformVersion,
			core.Micros(st.UpdatedAt), vcsJSON(st.VCSRepo), st.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("a stack named %q already exists in project %s", st.Name, st.ProjectID)
		}
		out = st
		return err
	})
	return out, err
}

// ListStacks lists an organization's stacks, optionally in one project or
// with a name containing search; sort is name or updated-at, "-" first
// for descending.
func (s *Service) ListStacks(ctx context.Context, org, projectID, search, sortBy string, offset, limit int) ([]*Stack, int, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, 0, err
	}
	if err := s.orgs.Exists(ctx, org); err != nil {
		return nil, 0, err
	}
	// Only the stacks of projects the caller may read.
	projects, err := store.All(ctx, s.db, func(sc interface{ Scan(...any) error }) (string, error) {
		var id string
		return id, sc.Scan(&id)
	}, `SELECT DISTINCT project_id FROM stacks WHERE organization_name = ?`, org)
	if err != nil {
		return nil, 0, err
	}
	readable := []string{}
	for _, p := range projects {
		if canRead(ctx, org, p) == nil {
			readable = append(readable, p)
		}
	}
	if len(readable) == 0 {
		return []*Stack{}, 0, nil
	}
	order := "name ASC"
	switch sortBy {
	case "", "name":
	case "-name":
		order = "name DESC"
	case "updated-at":
		order = "updated_at ASC"
	case "-updated-at":
		order = "updated_at DESC"
	default:
		return nil, 0, core.BadRequest("sort must be name, -name, updated-at or -updated-at, not %q", sortBy)
	}
	where := `organization_name = ? AND (? = '' OR project_id = ?) AND (? = '' OR LOWER(name) LIKE ?)`
	like := "%" + strings.ToLower(strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(search)) + "%"
	args := []any{org, projectID, projectID, search, like}
	where = strings.Replace(where, "LIKE ?", `LIKE ? ESCAPE '\'`, 1)
	where += ` AND project_id IN (?` + strings.Repeat(", ?", len(readable)-1) + `)`
	for _, p := range readable {
		args = append(args, p)
	}
	var total int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM stacks WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	items, err := store.All(ctx, s.db, scanStack, `SELECT `+stackCols+` FROM stacks WHERE `+where+` ORDER BY `+order+`, id LIMIT ? OFFSET ?`,
		append(args, limit, offset)...)
	return items, total, err
}

// checkManage checks, before a transaction, that the caller may read and
// manage stack id (authz reads the store, which must not be asked on a
// second connection inside a transaction). It returns the project it
// checked; the transaction compares it with the row it locks.
func (s *Service) checkManage(ctx context.Context, id string) (string, error) {
	st, err := loadStack(ctx, s.db, id, false)
	if err != nil {
		return "", err
	}
	if err := canRead(ctx, st.Organization, st.ProjectID); err != nil {
		return "", core.NotFound("stack %q not found", id)
	}
	if err := canManage(ctx, st.Organization, st.ProjectID); err != nil {
		return "", err
	}
	return st.ProjectID, nil
}

// sameProject refuses to go on when the stack moved to another project
// between checkManage and the transaction's locked read.
func sameProject(st *Stack, checked string) error {
	if st.ProjectID != checked {
		return core.Conflict("stack %s moved to another project while the request was checked; try again", st.ID)
	}
	return nil
}

// DeleteStack deletes a stack with its configurations. A stack that still
// has deployments is only deleted with force.
func (s *Service) DeleteStack(ctx context.Context, id string, force bool) error {
	checked, err := s.checkManage(ctx, id)
	if err != nil {
		return err
	}
	var keys []string
	var st *Stack
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		st, err = loadStack(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := sameProject(st, checked); err != nil {
			return err
		}
		if !force {
			var n int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM stack_deployments WHERE stack_id = ? AND NOT removed`, id).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return core.Conflict("stack %s still has %d deployments; delete it with force=true", id, n)
			}
		}
		keys, err = store.Strings(ctx, tx, `SELECT blob_key FROM stack_configurations WHERE stack_id = ? AND blob_key <> ''`, id)
		if err != nil {
			return err
		}
		if err := addGarbage(ctx, tx, `stack_id = ?`, id); err != nil {
			return err
		}
		if st.VCSRepo != nil && s.VCS != nil {
			if err := s.VCS.ConnectStack(ctx, tx, id, nil); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM stacks WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		s.garbage().Collect(ctx, k)
	}
	s.removeWorkspaces(ctx, st)
	return nil
}

// removeWorkspaces deletes, once the stack is gone, the workspaces its
// deployments ran on (stack-<id>-<deployment>, speculative plans' of
// deployments never deployed too) that manage no resources: a removed
// deployment's, or every one of a stack whose deployments were all
// destroyed. Those that still manage resources (a stack deleted with
// force) stay, with their state, as do locked ones; the log says which.
// Best effort: the stack is deleted whatever happens here.
func (s *Service) removeWorkspaces(ctx context.Context, st *Stack) {
	if s.exec == nil {
		return
	}
	kept, err := s.exec.RemoveWorkspaces(ctx, st.Organization, st.ProjectID, "stack-"+st.ID+"-")
	if err != nil {
		s.logger.Warn("deleting a deleted stack's workspaces", "stack", st.ID, "error", err)
	}
	for name, why := range kept {
		s.logger.Info("a deleted stack's deployment workspace is kept", "stack", st.ID, "workspace", name, "reason", why)
	}
}

// addGarbage records, in the caller's transaction (q), the archives of
// the stack configurations that where selects, for deletion at once.
func addGarbage(ctx context.Context, q store.Q, where string, args ...any) error {
	_, err := q.Exec(ctx, `INSERT INTO stack_configuration_garbage (blob_key, not_before) SELECT blob_key, ? FROM stack_configurations WHERE `+where+` AND blob_key <> '' ON CONFLICT (blob_key) DO NOTHING`,
		append([]any{core.Micros(core.Now())}, args...)...)
	return err
}

// DeleteOrganizationStacks records the archives of an organization's stack
// configurations for deletion, inside the transaction that deletes the
// organization (whose stacks go by cascade).
func DeleteOrganizationStacks(ctx context.Context, q store.Q, org string) error {
	return addGarbage(ctx, q, `stack_id IN (SELECT id FROM stacks WHERE organization_name = ?)`, org)
}

// stagingGrace is how long an upload in progress may take before a sweep
// may delete its archive.
const stagingGrace = 24 * time.Hour

// garbage is the ledger of configuration archives awaiting deletion.
func (s *Service) garbage() blob.Garbage {
	return blob.Garbage{DB: s.db, Blobs: s.blobs, Table: "stack_configuration_garbage", What: "stack configuration archive", Logger: s.logger}
}

// Ledger is the domain's ledger of archives awaiting deletion, for the
// server's sweep loop (blob.RunAll).
func (s *Service) Ledger() blob.Garbage { return s.garbage() }

// UsingPool counts the stacks in execution mode agent whose deployments
// run on agent pool poolID.
func UsingPool(ctx context.Context, q store.Q, poolID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM stacks WHERE agent_pool_id = ? AND execution_mode = ?`, poolID, "agent").Scan(&n)
	return n, err
}

// CountInProject counts the stacks of a project (a project holding stacks
// is not deleted).
func CountInProject(ctx context.Context, q store.Q, projectID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM stacks WHERE project_id = ?`, projectID).Scan(&n)
	return n, err
}

// ComponentSummary is a component as a configuration lists it (go-tfe's
// StackComponent).
type ComponentSummary struct {
	Name       string `json:"name"`
	Correlator string `json:"correlator"`
	Expanded   bool   `json:"expanded"`
	Removed    bool   `json:"removed"`
}

// Timestamps are a configuration's status times.
type Timestamps struct {
	QueuedAt     *time.Time `json:"queued-at,omitempty"`
	PreparingAt  *time.Time `json:"preparing-at,omitempty"`
	EnqueueingAt *time.Time `json:"enqueueing-at,omitempty"`
	CompletedAt  *time.Time `json:"completed-at,omitempty"`
	CanceledAt   *time.Time `json:"canceled-at,omitempty"`
	ErroredAt    *time.Time `json:"errored-at,omitempty"`
}

// Configuration is a stack configuration version (go-tfe's
// StackConfiguration).
type Configuration struct {
	ID             string
	StackID        string
	Organization   string
	ProjectID      string
	SequenceNumber int
	Status         ConfigStatus
	Source         string // manual or reuse
	Speculative    bool
	DestroyAll     bool
	// Selected names the deployments the configuration runs (all when
	// empty).
	Selected    []string
	Components  []ComponentSummary
	Deployments []string
	Timestamps  Timestamps
	CreatedAt   time.Time
	UpdatedAt   time.Time
	blobKey     string
	sha256      string
}

const cfgCols = `c.id, c.stack_id, s.organization_name, s.project_id, c.sequence_number, c.status, c.source, c.speculative, c.destroy_all, c.blob_key, c.sha256,
	c.components, c.deployments, c.status_timestamps, c.created_at, c.updated_at, c.selected_deployments`

const cfgFrom = ` FROM stack_configurations c JOIN stacks s ON s.id = c.stack_id`

func scanConfig(sc store.Scanner) (*Configuration, error) {
	var c Configuration
	var comps, deps, ts, selected string
	var cr, up int64
	if err := sc.Scan(&c.ID, &c.StackID, &c.Organization, &c.ProjectID, &c.SequenceNumber, &c.Status, &c.Source, &c.Speculative, &c.DestroyAll,
		&c.blobKey, &c.sha256, &comps, &deps, &ts, &cr, &up, &selected); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		s string
		v any
	}{{comps, &c.Components}, {deps, &c.Deployments}, {ts, &c.Timestamps}, {selected, &c.Selected}} {
		if err := json.Unmarshal([]byte(f.s), f.v); err != nil {
			return nil, fmt.Errorf("decoding stack configuration %s: %w", c.ID, err)
		}
	}
	c.CreatedAt, c.UpdatedAt = core.FromMicros(cr), core.FromMicros(up)
	return &c, nil
}

func loadConfig(ctx context.Context, q store.Q, id string, forUpdate bool) (*Configuration, error) {
	if !core.HasPrefix(id, PrefixConfiguration) {
		return nil, core.NotFound("stack configuration %q not found", id)
	}
	query := `SELECT ` + cfgCols + cfgFrom + ` WHERE c.id = ?`
	if forUpdate && q.Driver().Name() == "postgres" {
		query += " FOR UPDATE OF c"
	}
	c, err := scanConfig(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("stack configuration %q not found", id)
	}
	return c, err
}

// GetConfiguration returns a configuration the caller can see.
func (s *Service) GetConfiguration(ctx context.Context, id string) (*Configuration, error) {
	c, err := loadConfig(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := canRead(ctx, c.Organization, c.ProjectID); err != nil {
		return nil, core.NotFound("stack configuration %q not found", id)
	}
	return c, nil
}

// ListConfigurations lists a stack's configurations, newest first.
func (s *Service) ListConfigurations(ctx context.Context, stackID string, offset, limit int) ([]*Configuration, int, error) {
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM stack_configurations WHERE stack_id = ?`, stackID).Scan(&total); err != nil {
		return nil, 0, err
	}
	items, err := store.All(ctx, s.db, scanConfig, `SELECT `+cfgCols+cfgFrom+` WHERE c.stack_id = ? ORDER BY c.sequence_number DESC LIMIT ? OFFSET ?`,
		stackID, limit, offset)
	return items, total, err
}

// LatestConfiguration returns a stack's newest configuration, or nil.
func (s *Service) LatestConfiguration(ctx context.Context, stackID string) (*Configuration, error) {
	items, _, err := s.ListConfigurations(ctx, stackID, 0, 1)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return items[0], nil
}

// selection checks a configuration's selected deployments: names as a
// deployment block's label is one, each once, at most maxSelected. Whether
// the configuration declares them is known once it is parsed.
func selection(names []string) ([]string, error) {
	if len(names) > maxSelected {
		return nil, core.Invalid("selected-deployments names %d deployments; at most %d may be named", len(names), maxSelected)
	}
	out := []string{}
	for _, n := range names {
		if !hclsyntax.ValidIdentifier(n) {
			return nil, core.Invalid("selected-deployments: %q is not a deployment name", n)
		}
		if slices.Contains(out, n) {
			return nil, core.Invalid("selected-deployments names %q twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// maxSelected bounds selected-deployments (HCP Terraform allows 20
// deployments a stack; Terrace does not limit them, but a request's list
// is bounded).
const maxSelected = 100

// ConfigurationOptions are the attributes of a new configuration.
type ConfigurationOptions struct {
	Speculative bool
	DestroyAll  bool
	// SelectedDeployments names the deployments to run (all when empty):
	// the others get no run from this configuration (a rerun of its
	// group runs them later).
	SelectedDeployments []string
	// Reuse makes the configuration from the archive of the stack's latest
	// uploaded configuration, prepared at once (source=reuse).
	Reuse bool
}

// CreateConfiguration starts a configuration version: pending until its
// archive is uploaded (or, with Reuse, prepared from the previous one).
func (s *Service) CreateConfiguration(ctx context.Context, stackID string, o ConfigurationOptions) (*Configuration, error) {
	return s.createConfiguration(ctx, stackID, o, "", nil)
}

// createConfiguration makes a configuration: for the caller (system ""),
// or on the service's own behalf with that source (like "upstream", a
// reuse when an upstream stack's published values changed). origin, if
// not nil, runs in the transaction that makes it.
func (s *Service) createConfiguration(ctx context.Context, stackID string, o ConfigurationOptions, system string, origin Origin) (*Configuration, error) {
	var checked string
	var err error
	if system == "" {
		if checked, err = s.checkManage(ctx, stackID); err != nil {
			return nil, err
		}
	}
	selected, err := selection(o.SelectedDeployments)
	if err != nil {
		return nil, err
	}
	var c *Configuration
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		st, err := loadStack(ctx, tx, stackID, true)
		if err != nil {
			return err
		}
		if system == "" {
			if err := sameProject(st, checked); err != nil {
				return err
			}
		}
		if o.Speculative && !st.SpeculativeEnabled {
			return core.Invalid("stack %s does not allow speculative configurations; set speculative-enabled first", stackID)
		}
		source := cmp.Or(system, "manual")
		var key, sum string
		if o.Reuse {
			source = cmp.Or(system, "reuse")
			err := tx.QueryRow(ctx, `SELECT blob_key, sha256 FROM stack_configurations WHERE stack_id = ? AND blob_key <> '' ORDER BY sequence_number DESC LIMIT 1`, stackID).Scan(&key, &sum)
			if store.IsNoRows(err) {
				return core.Invalid("stack %s has no uploaded configuration to reuse", stackID)
			}
			if err != nil {
				return err
			}
		}
		var seq int
		if err := tx.QueryRow(ctx, `SELECT next_sequence FROM stacks WHERE id = ?`, stackID).Scan(&seq); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE stacks SET next_sequence = next_sequence + 1 WHERE id = ?`, stackID); err != nil {
			return err
		}
		now := nowUTC()
		c = &Configuration{ID: core.NewID(PrefixConfiguration), StackID: stackID, Organization: st.Organization, SequenceNumber: seq,
			Status: ConfigPending, Source: source, Speculative: o.Speculative, DestroyAll: o.DestroyAll, Selected: selected, Components: []ComponentSummary{},
			Deployments: []string{}, CreatedAt: now, UpdatedAt: now, blobKey: key, sha256: sum}
		c.Timestamps.QueuedAt = &now
		if err := insertConfig(ctx, tx, c); err != nil {
			return err
		}
		if origin != nil {
			return origin(ctx, tx, c.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if o.Reuse {
		return s.prepare(ctx, c.ID)
	}
	return c, nil
}

func insertConfig(ctx context.Context, q store.Q, c *Configuration) error {
	comps, _ := json.Marshal(c.Components)
	deps, _ := json.Marshal(c.Deployments)
	ts, _ := json.Marshal(c.Timestamps)
	selected, _ := json.Marshal(c.Selected)
	_, err := q.Exec(ctx, `INSERT INTO stack_configurations (id, stack_id, sequence_number, status, source, speculative, destroy_all, blob_key, sha256,
		components, deployments, status_timestamps, created_at, updated_at, selected_deployments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.StackID, c.SequenceNumber, string(c.Status), c.Source, c.Speculative, c.DestroyAll, c.blobKey, c.sha256,
		string(comps), string(deps), string(ts), core.Micros(c.CreatedAt), core.Micros(c.UpdatedAt), string(selected))
	return err
}

func updateConfig(ctx context.Context, q store.Q, c *Configuration) error {
	comps, _ := json.Marshal(c.Components)
	deps, _ := json.Marshal(c.Deployments)
	ts, _ := json.Marshal(c.Timestamps)
	_, err := q.Exec(ctx, `UPDATE stack_configurations SET status = ?, blob_key = ?, sha256 = ?, components = ?, deployments = ?,
		status_timestamps = ?, updated_at = ? WHERE id = ?`,
		string(c.Status), c.blobKey, c.sha256, string(comps), string(deps), string(ts), core.Micros(c.UpdatedAt), c.ID)
	return err
}

// UploadPath is the capability path a configuration's archive is PUT to.
func UploadPath(id string) string { return "/stack-configurations/" + id + "/upload" }

// UploadURL returns the signed URL for uploading a pending configuration's
// archive, or "" when the configuration no longer takes one.
func (s *Service) UploadURL(ctx context.Context, id string) (string, error) {
	c, err := s.GetConfiguration(ctx, id)
	if err != nil {
		return "", err
	}
	if err := canManage(ctx, c.Organization, c.ProjectID); err != nil {
		return "", err
	}
	if c.Status != ConfigPending {
		return "", nil
	}
	return s.signer.URL("PUT", UploadPath(id), time.Hour), nil
}

// Upload stores the archive of a pending configuration and prepares it.
// It is reached through a signed URL, so it checks no caller. A body over
// the limit leaves the configuration pending for another try.
func (s *Service) Upload(ctx context.Context, id string, body io.Reader) (*Configuration, error) {
	c, err := loadConfig(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if c.Status != ConfigPending {
		return nil, core.Conflict("stack configuration %s is %s and takes no upload", id, c.Status)
	}
	key := "stack-configurations/" + c.StackID + "/" + c.ID + "-" + core.RandomString(8) + ".tar.gz"
	// Recorded first, so that a crash before the upload commits leaves the
	// archive to a sweep.
	if err := s.garbage().Add(ctx, s.db, key, core.Now().Add(stagingGrace)); err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := s.blobs.PutReader(ctx, key, io.TeeReader(body, h), s.maxBytes); err != nil {
		s.garbage().Collect(ctx, key)
		if core.KindOf(err) == core.KindTooLarge {
			return nil, err
		}
		return nil, fmt.Errorf("storing stack configuration archive: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := loadConfig(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if cur.Status != ConfigPending {
			return core.Conflict("stack configuration %s is %s and takes no upload", id, cur.Status)
		}
		cur.blobKey, cur.sha256 = key, sum
		cur.UpdatedAt = nowUTC()
		if err := s.garbage().Forget(ctx, tx, key); err != nil {
			return err
		}
		return updateConfig(ctx, tx, cur)
	})
	if err != nil {
		s.garbage().Collect(ctx, key)
		return nil, err
	}
	return s.prepare(context.WithoutCancel(ctx), id)
}

// prepare unpacks and parses a configuration's archive and records the
// outcome in one transaction: completed with its deployment groups and
// deployments, or failed with diagnostics.
func (s *Service) prepare(ctx context.Context, id string) (*Configuration, error) {
	var c *Configuration
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := loadConfig(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := transitionConfig(cur, ConfigPreparing); err != nil {
			return core.Conflict("%v", err)
		}
		c = cur
		return updateConfig(ctx, tx, cur)
	})
	if err != nil {
		return nil, err
	}
	st, err := loadStack(ctx, s.db, c.StackID, false)
	if err != nil {
		return nil, err
	}
	cfg, parsed := s.parseArchive(ctx, c.blobKey, st.WorkingDirectory)
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := loadConfig(ctx, tx, id, true)
		if err != nil {
			return err
		}
		diags := parsed
		if !diags.HasErrors() && len(cur.Selected) > 0 {
			d, err := checkSelected(ctx, tx, cur, cfg)
			if err != nil {
				return err
			}
			diags = append(slices.Clip(diags), d...)
		}
		if err := insertDiagnostics(ctx, tx, cur.ID, diags); err != nil {
			return err
		}
		if diags.HasErrors() {
			if err := transitionConfig(cur, ConfigFailed); err != nil {
				return err
			}
			c = cur
			return updateConfig(ctx, tx, cur)
		}
		if err := transitionConfig(cur, ConfigCompleted); err != nil {
			return err
		}
		cur.Components, cur.Deployments = summarize(cfg)
		if err := updateConfig(ctx, tx, cur); err != nil {
			return err
		}
		if err := recordDeployments(ctx, tx, cur, cfg); err != nil {
			return err
		}
		if !cur.Speculative {
			if err := recordUpstreams(ctx, tx, cur.StackID, cfg); err != nil {
				return err
			}
		}
		if s.exec != nil {
			if err := s.createRuns(ctx, tx, cur, cfg); err != nil {
				return err
			}
		}
		c = cur
		return nil
	})
	if err != nil {
		// Do not leave it preparing: end it failed, with the reason.
		s.abort(ctx, id, err)
		return nil, fmt.Errorf("preparing stack configuration %s: %w", id, err)
	}
	s.nudge()
	return c, nil
}

// checkSelected reports, as error diagnostics, the selected deployments of
// c that its configuration does not declare and that are not deployments
// of the stack it removes (which a selection may name to destroy them).
func checkSelected(ctx context.Context, q store.Q, c *Configuration, cfg *Config) (Diagnostics, error) {
	var diags Diagnostics
	for _, name := range c.Selected {
		if cfg.Deployment(name) != nil {
			continue
		}
		detail := fmt.Sprintf("selected-deployments names %q, which the configuration does not declare (a speculative configuration destroys nothing).", name)
		if !c.Speculative {
			var n int
			if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM stack_deployments WHERE stack_id = ? AND name = ? AND workspace_id <> ''`, c.StackID, name).Scan(&n); err != nil {
				return nil, err
			}
			if n > 0 {
				continue
			}
			detail = fmt.Sprintf("selected-deployments names %q, which the configuration does not declare and the stack does not have.", name)
		}
		diags = append(diags, Diagnostic{Severity: SeverityError, Summary: "Unknown selected deployment", Detail: detail})
	}
	return diags, nil
}

// abort ends a configuration that could not be recorded as failed, with a
// diagnostic; a failure here is logged (the configuration stays preparing).
func (s *Service) abort(ctx context.Context, id string, cause error) {
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := loadConfig(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := transitionConfig(cur, ConfigFailed); err != nil {
			return err
		}
		d := Diagnostics{{Severity: SeverityError, Summary: "Preparing the configuration failed", Detail: "Terrace could not record the configuration; upload it again."}}
		if err := insertDiagnostics(ctx, tx, id, d); err != nil {
			return err
		}
		return updateConfig(ctx, tx, cur)
	})
	if err != nil {
		s.logger.Error("ending a stack configuration that failed to prepare", "configuration", id, "cause", cause, "error", err)
	}
}

// parseArchive unpacks an archive into a scratch folder and parses the
// stack files at the working directory. Every problem is a diagnostic.
func (s *Service) parseArchive(ctx context.Context, key, workdir string) (*Config, Diagnostics) {
	fail := func(summary, detail string) (*Config, Diagnostics) {
		return nil, Diagnostics{{Severity: SeverityError, Summary: summary, Detail: detail}}
	}
	dir, err := os.MkdirTemp("", "terrace-stack-")
	if err != nil {
		return fail("Cannot prepare the configuration", err.Error())
	}
	defer os.RemoveAll(dir)
	r, _, err := s.blobs.Reader(ctx, key)
	if err != nil {
		return fail("Cannot read the configuration archive", err.Error())
	}
	defer r.Close()
	if err := slug.Unpack(r, dir, slug.Limits{}); err != nil {
		return fail("Invalid configuration archive", err.Error())
	}
	root := filepath.Join(dir, filepath.FromSlash(workdir))
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return fail("Working directory not found", fmt.Sprintf("The archive has no folder %q, the stack's working directory.", workdir))
	}
	return ParseFS(os.DirFS(root))
}

func summarize(cfg *Config) ([]ComponentSummary, []string) {
	comps := []ComponentSummary{}
	for _, c := range cfg.Components {
		comps = append(comps, ComponentSummary{Name: c.Name, Correlator: "component." + c.Name, Expanded: c.ForEach != nil})
	}
	for _, st := range cfg.Stacks {
		comps = append(comps, ComponentSummary{Name: st.Name, Correlator: "stack." + st.Name})
	}
	for _, r := range cfg.Removed {
		comps = append(comps, ComponentSummary{Name: r.From, Correlator: "component." + r.From, Removed: true})
	}
	deps := []string{}
	for _, d := range cfg.Deployments {
		deps = append(deps, d.Name)
	}
	sort.Strings(deps)
	return comps, deps
}

// GroupConfig is a deployment group's configuration as the API shows it.
type GroupConfig struct {
	AutoApproveChecks []string `json:"auto-approve-checks"`
	Deployments       []string `json:"deployments"`
	Custom            bool     `json:"custom"`
}

// recordDeployments writes the groups of a completed configuration and,
// unless it is speculative, the stack's deployments (a deployment missing
// from the configuration is marked removed; its last configuration stays).
func recordDeployments(ctx context.Context, q store.Q, c *Configuration, cfg *Config) error {
	now := core.Micros(nowUTC())
	for _, g := range cfg.DeploymentGroups {
		gc := GroupConfig{AutoApproveChecks: append([]string{}, g.AutoApproveChecks...), Deployments: []string{}, Custom: !g.Implicit}
		for _, d := range cfg.Deployments {
			if d.Group == g.Name {
				gc.Deployments = append(gc.Deployments, d.Name)
			}
		}
		b, _ := json.Marshal(gc)
		if _, err := q.Exec(ctx, `INSERT INTO stack_deployment_groups (id, stack_configuration_id, name, status, config, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, core.NewID(PrefixGroup), c.ID, g.Name, string(GroupPending), string(b), now, now); err != nil {
			return err
		}
	}
	if c.Speculative {
		return nil
	}
	for _, d := range cfg.Deployments {
		res, err := q.Exec(ctx, `UPDATE stack_deployments SET last_configuration_id = ?, removed = FALSE, updated_at = ? WHERE stack_id = ? AND name = ?`,
			c.ID, now, c.StackID, d.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			continue
		}
		if _, err := q.Exec(ctx, `INSERT INTO stack_deployments (id, stack_id, name, last_configuration_id, removed, created_at, updated_at)
			VALUES (?, ?, ?, ?, FALSE, ?, ?)`, core.NewID(PrefixDeployment), c.StackID, d.Name, c.ID, now, now); err != nil {
			return err
		}
	}
	names := make([]any, 0, len(cfg.Deployments)+2)
	names = append(names, now, c.StackID)
	marks := make([]string, 0, len(cfg.Deployments))
	for _, d := range cfg.Deployments {
		names = append(names, d.Name)
		marks = append(marks, "?")
	}
	_, err := q.Exec(ctx, `UPDATE stack_deployments SET removed = TRUE, updated_at = ? WHERE stack_id = ? AND name NOT IN (`+strings.Join(marks, ", ")+`)`, names...)
	return err
}

// StoredDiagnostic is a diagnostic as the stack-diagnostics API serves it.
type StoredDiagnostic struct {
	ID              string
	ConfigurationID string
	Organization    string
	ProjectID       string
	Diagnostic
	Acknowledged bool
	CreatedAt    time.Time
}

func insertDiagnostics(ctx context.Context, q store.Q, cfgID string, diags Diagnostics) error {
	now := nowUTC()
	for i, d := range diags {
		b, _ := json.Marshal([]Diagnostic{d})
		// Keep the order: one microsecond apart.
		at := core.Micros(now) + int64(i)
		if _, err := q.Exec(ctx, `INSERT INTO stack_diagnostics (id, stack_configuration_id, severity, summary, detail, diags, acknowledged, created_at)
			VALUES (?, ?, ?, ?, ?, ?, FALSE, ?)`, core.NewID(PrefixDiagnostic), cfgID, d.Severity, d.Summary, d.Detail, string(b), at); err != nil {
			return err
		}
	}
	return nil
}

const diagCols = `d.id, d.stack_configuration_id, s.organization_name, s.project_id, d.severity, d.summary, d.detail, d.diags, d.acknowledged, d.created_at`

const diagFrom = ` FROM stack_diagnostics d JOIN stack_configurations c ON c.id = d.stack_configuration_id JOIN stacks s ON s.id = c.stack_id`

func scanDiagnostic(sc store.Scanner) (*StoredDiagnostic, error) {
	var d StoredDiagnostic
	var diags string
	var at int64
	if err := sc.Scan(&d.ID, &d.ConfigurationID, &d.Organization, &d.ProjectID, &d.Severity, &d.Summary, &d.Detail, &diags, &d.Acknowledged, &at); err != nil {
		return nil, err
	}
	var ds []Diagnostic
	if err := json.Unmarshal([]byte(diags), &ds); err != nil {
		return nil, fmt.Errorf("decoding stack diagnostic %s: %w", d.ID, err)
	}
	if len(ds) > 0 {
		d.Range, d.Snippet = ds[0].Range, ds[0].Snippet
	}
	d.CreatedAt = core.FromMicros(at)
	return &d, nil
}

// ConfigurationDiagnostics lists a configuration's diagnostics in order.
func (s *Service) ConfigurationDiagnostics(ctx context.Context, cfgID string) ([]*StoredDiagnostic, error) {
	if _, err := s.GetConfiguration(ctx, cfgID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, scanDiagnostic, `SELECT `+diagCols+diagFrom+` WHERE d.stack_configuration_id = ? ORDER BY d.created_at, d.id`, cfgID)
}

// GetDiagnostic returns one diagnostic.
func (s *Service) GetDiagnostic(ctx context.Context, id string) (*StoredDiagnostic, error) {
	if !core.HasPrefix(id, PrefixDiagnostic) {
		return nil, core.NotFound("stack diagnostic %q not found", id)
	}
	d, err := scanDiagnostic(s.db.QueryRow(ctx, `SELECT `+diagCols+diagFrom+` WHERE d.id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("stack diagnostic %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := canRead(ctx, d.Organization, d.ProjectID); err != nil {
		return nil, core.NotFound("stack diagnostic %q not found", id)
	}
	return d, nil
}

// Group is a deployment group of a configuration (go-tfe's
// StackDeploymentGroup).
type Group struct {
	ID              string
	ConfigurationID string
	Organization    string
	ProjectID       string
	Name            string
	Status          GroupStatus
	Config          GroupConfig
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const groupCols = `g.id, g.stack_configuration_id, s.organization_name, s.project_id, g.name, g.status, g.config, g.created_at, g.updated_at`

const groupFrom = ` FROM stack_deployment_groups g JOIN stack_configurations c ON c.id = g.stack_configuration_id JOIN stacks s ON s.id = c.stack_id`

func scanGroup(sc store.Scanner) (*Group, error) {
	var g Group
	var cfg string
	var cr, up int64
	if err := sc.Scan(&g.ID, &g.ConfigurationID, &g.Organization, &g.ProjectID, &g.Name, &g.Status, &cfg, &cr, &up); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(cfg), &g.Config); err != nil {
		return nil, fmt.Errorf("decoding deployment group %s: %w", g.ID, err)
	}
	g.CreatedAt, g.UpdatedAt = core.FromMicros(cr), core.FromMicros(up)
	return &g, nil
}

// ListGroups lists a configuration's deployment groups by name.
func (s *Service) ListGroups(ctx context.Context, cfgID string) ([]*Group, error) {
	if _, err := s.GetConfiguration(ctx, cfgID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, scanGroup, `SELECT `+groupCols+groupFrom+` WHERE g.stack_configuration_id = ? ORDER BY g.name`, cfgID)
}

// GroupByName returns a configuration's deployment group by name.
func (s *Service) GroupByName(ctx context.Context, cfgID, name string) (*Group, error) {
	if _, err := s.GetConfiguration(ctx, cfgID); err != nil {
		return nil, err
	}
	g, err := scanGroup(s.db.QueryRow(ctx, `SELECT `+groupCols+groupFrom+` WHERE g.stack_configuration_id = ? AND g.name = ?`, cfgID, name))
	if store.IsNoRows(err) {
		return nil, core.NotFound("deployment group %q not found in stack configuration %s", name, cfgID)
	}
	return g, err
}

// GetGroup returns a deployment group.
func (s *Service) GetGroup(ctx context.Context, id string) (*Group, error) {
	if !core.HasPrefix(id, PrefixGroup) {
		return nil, core.NotFound("deployment group %q not found", id)
	}
	g, err := scanGroup(s.db.QueryRow(ctx, `SELECT `+groupCols+groupFrom+` WHERE g.id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("deployment group %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := canRead(ctx, g.Organization, g.ProjectID); err != nil {
		return nil, core.NotFound("deployment group %q not found", id)
	}
	return g, nil
}

// DeploymentRecord is a deployment of a stack (go-tfe's StackDeployment).
type DeploymentRecord struct {
	ID                  string
	StackID             string
	Name                string
	LastConfigurationID string
	Removed             bool
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// ListDeployments lists a stack's current deployments by name.
func (s *Service) ListDeployments(ctx context.Context, stackID string) ([]*DeploymentRecord, error) {
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, func(sc store.Scanner) (*DeploymentRecord, error) {
		var d DeploymentRecord
		var cr, up int64
		if err := sc.Scan(&d.ID, &d.StackID, &d.Name, &d.LastConfigurationID, &d.Removed, &cr, &up); err != nil {
			return nil, err
		}
		d.CreatedAt, d.UpdatedAt = core.FromMicros(cr), core.FromMicros(up)
		return &d, nil
	}, `SELECT id, stack_id, name, last_configuration_id, removed, created_at, updated_at FROM stack_deployments WHERE stack_id = ? AND NOT removed ORDER BY name`, stackID)
}

// Locate returns the organization and project of a stack object (stack,
// configuration, deployment group, deployment run, step or diagnostic),
// whoever asks: the authorization model's resolver uses it to place a
// request before any check. An unknown ID is core.ErrNotFound.
func (s *Service) Locate(ctx context.Context, id string) (org, projectID string, err error) {
	var q string
	switch {
	case core.HasPrefix(id, PrefixStack):
		q = `SELECT s.organization_name, s.project_id FROM stacks s WHERE s.id = ?`
	case core.HasPrefix(id, PrefixConfiguration):
		q = `SELECT s.organization_name, s.project_id FROM stack_configurations c JOIN stacks s ON s.id = c.stack_id WHERE c.id = ?`
	case core.HasPrefix(id, PrefixGroup):
		q = `SELECT s.organization_name, s.project_id FROM stack_deployment_groups g JOIN stack_configurations c ON c.id = g.stack_configuration_id
			JOIN stacks s ON s.id = c.stack_id WHERE g.id = ?`
	case core.HasPrefix(id, PrefixDiagnostic):
		q = `SELECT s.organization_name, s.project_id FROM stack_diagnostics d JOIN stack_configurations c ON c.id = d.stack_configuration_id
			JOIN stacks s ON s.id = c.stack_id WHERE d.id = ?`
	case core.HasPrefix(id, PrefixRun):
		q = `SELECT s.organization_name, s.project_id FROM stack_deployment_runs r JOIN stacks s ON s.id = r.stack_id WHERE r.id = ?`
	case core.HasPrefix(id, PrefixStep):
		q = `SELECT s.organization_name, s.project_id FROM stack_deployment_steps t JOIN stack_deployment_runs r ON r.id = t.stack_deployment_run_id
			JOIN stacks s ON s.id = r.stack_id WHERE t.id = ?`
	default:
		return "", "", core.NotFound("%q not found", id)
	}
	err = s.db.QueryRow(ctx, q, id).Scan(&org, &projectID)
	if store.IsNoRows(err) {
		return "", "", core.NotFound("%q not found", id)
	}
	return org, projectID, err
}
