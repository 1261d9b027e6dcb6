package state

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// Workspace is what the state domain needs to know about a workspace.
type Workspace struct {
	ID, Name, Organization string
	// LockedBy is "" when unlocked, else the holder's principal id: a user
	// id (user-…), team id (team-…) or run id (run-…), or for tokens that
	// have no identity of their own (organization, agent), the token id.
	LockedBy string
}

// Workspaces looks workspaces up for the state domain; the workspace
// domain provides it. Both methods are access-checked: a workspace the
// caller in ctx may not see is core.ErrNotFound.
type Workspaces interface {
	Get(ctx context.Context, id string) (*Workspace, error)
	GetByName(ctx context.Context, org, name string) (*Workspace, error)
}

// Service manages state versions.
type Service struct {
	db     *store.DB
	blobs  *blob.Store
	signer *blob.Signer

	ws      atomic.Pointer[workspacesBox]
	maxSize atomic.Int64
	strict  atomic.Bool

	// Keys seals output values and json-state-outputs at rest
	// (SealedColumns); nil stores them as given. The state files
	// themselves are sealed by the blob store.
	Keys *seal.Keyring
}

// SealedColumns are this domain's sealed columns: output values (sensitive
// outputs hold secrets) and the json-state-outputs a client uploads
// (seal.Keyring.Migrate seals rows written before encryption at rest).
var SealedColumns = []seal.Column{
	{Table: "state_version_outputs", IDColumn: "id", Column: "value", Purpose: "state_version_outputs.value"},
	{Table: "state_versions", IDColumn: "id", Column: "json_outputs", Purpose: "state_versions.json_outputs"},
}

type workspacesBox struct{ Workspaces }

// Capability URL lifetimes.
const (
	UploadURLTTL   = time.Hour
	DownloadURLTTL = time.Hour
	// OrphanAge is how old an unreferenced blob record must be before the
	// garbage collector removes the blob (longer than any upload takes).
	OrphanAge = time.Hour
)

// NewService returns a state service. ws may be nil until the workspace
// domain is wired in with SetWorkspaces; every workspace is then unknown.
func NewService(db *store.DB, blobs *blob.Store, signer *blob.Signer, ws Workspaces) *Service {
	s := &Service{db: db, blobs: blobs, signer: signer}
	s.maxSize.Store(DefaultMaxSize)
	s.SetWorkspaces(ws)
	return s
}

// SetWorkspaces wires the workspace lookups in (safe while serving).
func (s *Service) SetWorkspaces(ws Workspaces) { s.ws.Store(&workspacesBox{ws}) }

// SetMaxSize changes the size limit of state files and JSON states.
func (s *Service) SetMaxSize(n int64) { s.maxSize.Store(n) }

// MaxSize is the size limit of state files and JSON states.
func (s *Service) MaxSize() int64 { return s.maxSize.Load() }

// SetStrictContent makes uploads whose content disagrees with the serial or
// lineage given at creation fail. It is off by default because HCP Terraform
// accepts such uploads and go-tfe's own test suite relies on that; the
// checks against the current state use both the given values and the
// content's, so the disagreement cannot be used to roll state back.
func (s *Service) SetStrictContent(on bool) { s.strict.Store(on) }

func (s *Service) workspace(ctx context.Context, id string) (*Workspace, error) {
	b := s.ws.Load()
	if b == nil || b.Workspaces == nil || !core.HasPrefix(id, core.PrefixWorkspace) {
		return nil, core.NotFound("workspace %s not found", id)
	}
	return b.Get(ctx, id)
}

func (s *Service) workspaceByName(ctx context.Context, org, name string) (*Workspace, error) {
	b := s.ws.Load()
	if b == nil || b.Workspaces == nil {
		return nil, core.NotFound("workspace %q not found in organization %q", name, org)
	}
	return b.GetByName(ctx, org, name)
}

// HoldsLock reports whether p holds a lock recorded as lockedBy. The
// holder is the caller's user (user tokens, including the site admin's),
// team (team tokens) or run (run tokens); organization and agent tokens
// have no identity beyond the token, so their locks are recorded under the
// token id. Nobody, not even a site admin or an owner, writes state under
// someone else's lock: force-unlock first.
func HoldsLock(p *auth.Principal, lockedBy string) bool {
	if p == nil || lockedBy == "" {
		return false
	}
	for _, id := range []string{p.UserID, p.TeamID, p.RunID, p.TokenID} {
		if id != "" && id == lockedBy {
			return true
		}
	}
	return false
}

// CallerHoldsLock reports whether the caller in ctx holds the lock of a
// workspace it may see.
func (s *Service) CallerHoldsLock(ctx context.Context, workspaceID string) (bool, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return false, err
	}
	return HoldsLock(auth.FromContext(ctx), ws.LockedBy), nil
}

// CreateOptions are the attributes of a new state version.
type CreateOptions struct {
	Serial  *int64
	MD5     *string
	Lineage *string
	Force   bool
	RunID   string
	// State is the raw state (legacy inline create); nil creates a pending
	// version whose content arrives through its upload URL.
	State            []byte
	JSONState        []byte
	JSONStateOutputs []byte
}

// Create makes a state version in a workspace the caller has locked.
func (s *Service) Create(ctx context.Context, workspaceID string, opts CreateOptions) (*Version, error) {
	p := auth.FromContext(ctx)
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if p != nil && p.Kind == auth.KindRun {
		if p.WorkspaceID != ws.ID {
			return nil, core.Forbidden("a run token may only write the state of its own workspace")
		}
		if opts.RunID == "" {
			opts.RunID = p.RunID
		} else if opts.RunID != p.RunID {
			return nil, core.Invalid("relationship run must be the token's run %s", p.RunID)
		}
	}
	if ws.LockedBy == "" {
		return nil, core.Conflict("workspace %s must be locked by the caller to create a state version", ws.ID)
	}
	if !HoldsLock(p, ws.LockedBy) {
		return nil, core.Conflict("workspace %s is locked by %s; state versions can only be created by the lock holder", ws.ID, ws.LockedBy)
	}
	if opts.Serial == nil {
		return nil, core.Invalid("serial is required")
	}
	if *opts.Serial < 0 {
		return nil, core.Invalid("serial must not be negative")
	}
	v := &Version{
		ID: core.NewID(core.PrefixStateVersion), WorkspaceID: ws.ID, Status: StatusPending,
		Serial: *opts.Serial, Force: opts.Force, RunID: opts.RunID, CreatedAt: core.Now(),
	}
	if p != nil {
		v.CreatedBy = p.UserID
	}
	if opts.Lineage != nil {
		v.Lineage = *opts.Lineage
	}
	if opts.MD5 != nil && *opts.MD5 != "" {
		if !md5RE.MatchString(*opts.MD5) {
			return nil, core.Invalid("md5 must be 32 lowercase hexadecimal digits")
		}
		v.MD5 = *opts.MD5
	}
	if opts.JSONStateOutputs != nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(opts.JSONStateOutputs, &m); err != nil {
			return nil, core.Invalid("json-state-outputs is not a JSON object: %v", err)
		}
		v.jsonOutputs = opts.JSONStateOutputs
	}
	if opts.JSONState != nil {
		if err := validateJSONState(opts.JSONState, s.MaxSize()); err != nil {
			return nil, err
		}
	}
	if opts.State == nil {
		if opts.JSONState != nil {
			return nil, core.Invalid("json-state needs state; without state, upload the JSON state to hosted-json-state-upload-url")
		}
		err := s.db.Tx(ctx, func(tx *store.Tx) error {
			cur, err := s.lockHead(ctx, tx, ws.ID)
			if err != nil {
				return err
			}
			if err := checkAgainst(cur, v.Serial, v.Lineage, v.MD5, nil, v.Force); err != nil {
				return err
			}
			return s.insertVersion(ctx, tx, v)
		})
		if err != nil {
			return nil, err
		}
		return v, nil
	}

	pr, err := s.checkContent(v, opts.State)
	if err != nil {
		return nil, err
	}
	stateKey, err := s.putBlob(ctx, v.ID, "state", opts.State)
	if err != nil {
		return nil, err
	}
	keys := []string{stateKey}
	if opts.JSONState != nil {
		jk, err := s.putBlob(ctx, v.ID, "json-state", opts.JSONState)
		if err != nil {
			s.dropBlobs(keys...)
			return nil, err
		}
		v.JSONStateKey = jk
		keys = append(keys, jk)
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := s.lockHead(ctx, tx, ws.ID)
		if err != nil {
			return err
		}
		if err := checkAgainst(cur, v.Serial, v.Lineage, pr.md5, pr, v.Force); err != nil {
			return err
		}
		return s.insertFinal(ctx, tx, v, pr, stateKey, keys)
	})
	if err != nil {
		s.dropBlobs(keys...)
		return nil, err
	}
	return v, nil
}

// checkContent validates a state file for version v on its own (before
// comparing it with the current state).
func (s *Service) checkContent(v *Version, data []byte) (*parsed, error) {
	jsonOutputs := v.jsonOutputs
	if jsonOutputs != nil {
		plain, err := s.Keys.OpenString(SealedColumns[1].Purpose, string(jsonOutputs))
		if err != nil {
			return nil, err
		}
		jsonOutputs = []byte(plain)
	}
	pr, err := parseState(data, s.MaxSize(), jsonOutputs)
	if err != nil {
		return nil, err
	}
	if v.MD5 != "" && v.MD5 != pr.md5 {
		return nil, core.Invalid("md5 %s does not match the state's MD5 %s", v.MD5, pr.md5)
	}
	if s.strict.Load() {
		if pr.serial != v.Serial {
			return nil, core.Invalid("the state's serial %d does not match the serial %d given", pr.serial, v.Serial)
		}
		if v.Lineage != "" && pr.lineage != "" && pr.lineage != v.Lineage {
			return nil, core.Invalid("the state's lineage %q does not match the lineage %q given", pr.lineage, v.Lineage)
		}
	}
	return pr, nil
}

// checkAgainst refuses a version that would roll the workspace's state
// back or replace it with another lineage, unless force is set. md5 is the
// new content's ("" when not known yet); pr, when known, is the content,
// whose own serial and lineage are checked against the current content's.
func checkAgainst(cur *Version, serial int64, lineage, md5 string, pr *parsed, force bool) error {
	if cur == nil || force {
		return nil
	}
	if lineage != "" && cur.Lineage != "" && lineage != cur.Lineage {
		return core.Conflict("lineage %q differs from the current state's lineage %q; set force to replace the state", lineage, cur.Lineage)
	}
	if serial < cur.Serial {
		return core.Conflict("serial %d is lower than the current state's serial %d", serial, cur.Serial)
	}
	if serial == cur.Serial && md5 != "" && md5 != cur.StateMD5 {
		return core.Conflict("serial %d is the current state's serial, but the content differs; increment the serial", serial)
	}
	if pr != nil {
		if pr.lineage != "" && cur.StateLineage != "" && pr.lineage != cur.StateLineage {
			return core.Conflict("the state's lineage %q differs from the current state's lineage %q; set force to replace the state", pr.lineage, cur.StateLineage)
		}
		if pr.serial < cur.StateSerial {
			return core.Conflict("the state's serial %d is lower than the current state's serial %d", pr.serial, cur.StateSerial)
		}
		if pr.serial == cur.StateSerial && pr.md5 != cur.StateMD5 {
			return core.Conflict("the state's serial %d is the current state's serial, but the content differs", pr.serial)
		}
	}
	return nil
}

// putBlob stores data under a fresh key, recorded as an orphan until a
// transaction adopts it.
func (s *Service) putBlob(ctx context.Context, id, kind string, data []byte) (string, error) {
	key := fmt.Sprintf("state-versions/%s/%s-%s", id, kind, core.RandomString(12))
	if _, err := s.db.Exec(ctx, `INSERT INTO state_blob_orphans (blob_key, created_at) VALUES (?, ?)`, key, core.Micros(core.Now())); err != nil {
		return "", fmt.Errorf("recording blob %s: %w", key, err)
	}
	if err := s.blobs.Put(ctx, key, data); err != nil {
		return "", err
	}
	return key, nil
}

// dropBlobs deletes blobs a failed request wrote (best effort; the orphan
// records let the garbage collector finish the job).
func (s *Service) dropBlobs(keys ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range keys {
		if err := s.blobs.Delete(ctx, k); err != nil {
			continue
		}
		_, _ = s.db.Exec(ctx, `DELETE FROM state_blob_orphans WHERE blob_key = ?`, k)
	}
}

// errUploadTooSlow: the garbage collector took a blob's orphan record
// before the version that would adopt it was committed.
var errUploadTooSlow = core.Conflict("the upload took too long and was discarded; create a new state version")

// adopt removes the orphan records of keys inside tx; a record the garbage
// collector already took means the blob may be gone.
func adopt(ctx context.Context, tx store.Q, keys []string) error {
	for _, k := range keys {
		res, err := tx.Exec(ctx, `DELETE FROM state_blob_orphans WHERE blob_key = ?`, k)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errUploadTooSlow
		}
	}
	return nil
}

// lockHead locks the workspace's head row and returns its current version
// (nil when none). A workspace with a current version, the usual case
// (every run's apply), costs one statement: the head locked and its
// version read together; a first version creates the head row.
func (s *Service) lockHead(ctx context.Context, tx *store.Tx, workspaceID string) (*Version, error) {
	lock := ""
	if tx.Driver().Name() == "postgres" {
		lock = " FOR UPDATE OF h"
	}
	v, err := scanVersion(tx.QueryRow(ctx, `SELECT `+headVersionCols+` FROM state_heads h JOIN state_versions v ON v.id = h.current_id WHERE h.workspace_id = ?`+lock, workspaceID))
	if err == nil || !store.IsNoRows(err) {
		return v, err
	}
	if tx.Driver().Name() == "postgres" {
		if _, err := tx.Exec(ctx, `INSERT INTO state_heads (workspace_id, current_id) VALUES (?, '') ON CONFLICT (workspace_id) DO NOTHING`, workspaceID); err != nil {
			return nil, err
		}
	} else if _, err := tx.Exec(ctx, `INSERT OR IGNORE INTO state_heads (workspace_id, current_id) VALUES (?, '')`, workspaceID); err != nil {
		return nil, err
	}
	var cur string
	if err := tx.QueryRow(ctx, `SELECT current_id FROM state_heads WHERE workspace_id = ?`+store.ForUpdate(tx), workspaceID).Scan(&cur); err != nil {
		return nil, err
	}
	if cur == "" {
		return nil, nil
	}
	// A current version appeared while this waited for the lock.
	return getVersion(ctx, tx, cur, false)
}

// finalize records the content of the pending version v and makes v
// current, inside tx (which holds the head lock). keys are the blobs to
// adopt.
func (s *Service) finalize(ctx context.Context, tx *store.Tx, v *Version, pr *parsed, stateKey string, keys []string) error {
	if err := adopt(ctx, tx, keys); err != nil {
		return err
	}
	summary := finalFields(v, pr, stateKey)
	_, err := tx.Exec(ctx, `UPDATE state_versions SET status = ?, lineage = ?, state_key = ?, json_state_key = ?, size = ?, state_md5 = ?, state_serial = ?,
		state_lineage = ?, format_version = ?, terraform_version = ?, summary = ?, finalized_at = ? WHERE id = ?`,
		string(v.Status), v.Lineage, v.StateKey, v.JSONStateKey, v.Size, v.StateMD5, v.StateSerial,
		v.StateLineage, v.FormatVersion, v.TerraformVersion, summary, core.Micros(*v.FinalizedAt), v.ID)
	if err != nil {
		return fmt.Errorf("finalizing state version %s: %w", v.ID, err)
	}
	outs, err := s.outputRows(v, pr)
	if err != nil {
		return err
	}
	if err := insertOutputs(ctx, tx, outs); err != nil {
		return err
	}
	return makeCurrent(ctx, tx, v)
}

// finalFields fills in v's content fields from the parsed state (v becomes
// finalized) and returns the summary's JSON.
func finalFields(v *Version, pr *parsed, stateKey string) string {
	now := core.Now()
	v.Status, v.FinalizedAt, v.StateKey = StatusFinalized, &now, stateKey
	v.Size, v.StateMD5, v.StateSerial, v.StateLineage = pr.size, pr.md5, pr.serial, pr.lineage
	v.FormatVersion, v.TerraformVersion, v.Summary = pr.formatVersion, pr.terraformVersion, pr.summary
	if v.Lineage == "" {
		v.Lineage = pr.lineage
	}
	summary, _ := json.Marshal(v.Summary)
	return string(summary)
}

// outputRows are the rows of state_version_outputs for v's outputs (id,
// state_version_id, name, sensitive, type, detailed_type, value), values
// sealed.
func (s *Service) outputRows(v *Version, pr *parsed) ([][]any, error) {
	rows := make([][]any, 0, len(pr.outputs))
	for _, o := range pr.outputs {
		o.ID, o.StateVersionID = core.NewID(core.PrefixStateOutput), v.ID
		value, err := s.Keys.SealString(SealedColumns[0].Purpose, string(o.Value))
		if err != nil {
			return nil, err
		}
		rows = append(rows, []any{o.ID, v.ID, o.Name, o.Sensitive, o.Type, string(o.DetailedType), value})
	}
	return rows, nil
}

// insertOutput starts the INSERT of outputRows' rows; each row is
// (?, ?, ?, ?, ?, ?, ?).
const insertOutput = `INSERT INTO state_version_outputs (id, state_version_id, name, sensitive, type, detailed_type, value) VALUES `

// insertOutputs stores outputRows' rows, one statement each.
func insertOutputs(ctx context.Context, tx *store.Tx, rows [][]any) error {
	for _, o := range rows {
		if _, err := tx.Exec(ctx, insertOutput+`(?, ?, ?, ?, ?, ?, ?)`, o...); err != nil {
			return fmt.Errorf("storing output %s: %w", o[2], err)
		}
	}
	return nil
}

// discardOlder makes the pending versions created before v (other than v)
// discarded: they can no longer become current once v is.
const discardOlder = `UPDATE state_versions SET status = ? WHERE workspace_id = ? AND status = ? AND created_at <= ? AND id <> ?`

func discardOlderArgs(v *Version) []any {
	return []any{string(StatusDiscarded), v.WorkspaceID, string(StatusPending), core.Micros(v.CreatedAt), v.ID}
}

// makeCurrent moves the workspace's head to v and discards older pending
// versions: on PostgreSQL in one statement.
func makeCurrent(ctx context.Context, tx *store.Tx, v *Version) error {
	if tx.Driver().Name() == "postgres" {
		_, err := tx.Exec(ctx, `WITH head AS (UPDATE state_heads SET current_id = ? WHERE workspace_id = ?) `+discardOlder,
			append([]any{v.ID, v.WorkspaceID}, discardOlderArgs(v)...)...)
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE state_heads SET current_id = ? WHERE workspace_id = ?`, v.ID, v.WorkspaceID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, discardOlder, discardOlderArgs(v)...)
	return err
}

// insertFinal stores the new version v with its content, finalized, and
// makes it current, inside tx (which holds the head lock): what
// insertVersion and finalize do for a pending version, in one INSERT. On
// PostgreSQL the blobs' adoption, the version, its outputs, the head and
// the discarded pending versions are one statement (a run's apply waits
// for it).
func (s *Service) insertFinal(ctx context.Context, tx *store.Tx, v *Version, pr *parsed, stateKey string, keys []string) error {
	jo, err := s.sealedJSONOutputs(v)
	if err != nil {
		return err
	}
	summary := finalFields(v, pr, stateKey)
	outs, err := s.outputRows(v, pr)
	if err != nil {
		return err
	}
	insert := `INSERT INTO state_versions (id, workspace_id, status, serial, lineage, md5, forced, run_id, created_by, json_outputs, created_at,
		state_key, json_state_key, size, state_md5, state_serial, state_lineage, format_version, terraform_version, summary, finalized_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertArgs := []any{v.ID, v.WorkspaceID, string(v.Status), v.Serial, v.Lineage, v.MD5, v.Force, v.RunID, v.CreatedBy, jo, core.Micros(v.CreatedAt),
		v.StateKey, v.JSONStateKey, v.Size, v.StateMD5, v.StateSerial, v.StateLineage, v.FormatVersion, v.TerraformVersion, summary, core.Micros(*v.FinalizedAt)}
	if tx.Driver().Name() != "postgres" {
		if err := adopt(ctx, tx, keys); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insert, insertArgs...); err != nil {
			return fmt.Errorf("creating state version: %w", err)
		}
		if err := insertOutputs(ctx, tx, outs); err != nil {
			return err
		}
		return makeCurrent(ctx, tx, v)
	}
	// One statement: every part is a data-modifying WITH, which
	// PostgreSQL runs whether or not the final SELECT reads it; the count
	// of adopted orphan records says whether the blobs are still ours.
	var q strings.Builder
	var args []any
	q.WriteString(`WITH adopted AS (DELETE FROM state_blob_orphans WHERE blob_key IN (`)
	for i, k := range keys {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("?")
		args = append(args, k)
	}
	q.WriteString(`) RETURNING blob_key), version AS (` + insert + `)`)
	args = append(args, insertArgs...)
	if len(outs) > 0 {
		q.WriteString(`, outputs AS (` + insertOutput)
		for i, o := range outs {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?)")
			args = append(args, o...)
		}
		q.WriteString(`)`)
	}
	q.WriteString(`, head AS (UPDATE state_heads SET current_id = ? WHERE workspace_id = ?), discarded AS (` + discardOlder + `)
		SELECT count(*) FROM adopted`)
	args = append(args, v.ID, v.WorkspaceID)
	args = append(args, discardOlderArgs(v)...)
	var n int
	if err := tx.QueryRow(ctx, q.String(), args...).Scan(&n); err != nil {
		return fmt.Errorf("creating state version: %w", err)
	}
	if n != len(keys) {
		// The transaction is rolled back: nothing of v is kept.
		return errUploadTooSlow
	}
	return nil
}

// Upload stores the raw state of a pending version (the PUT to its upload
// URL) and finalizes it. Uploading the same content again is a no-op.
func (s *Service) Upload(ctx context.Context, id string, data []byte) (*Version, error) {
	v, err := getVersion(ctx, s.db, id, true)
	if err != nil {
		return nil, err
	}
	switch v.Status {
	case StatusDiscarded:
		return nil, core.Conflict("state version %s was discarded", id)
	case StatusFinalized:
		if v.StateMD5 == md5hex(data) {
			return v, nil
		}
		return nil, core.Conflict("state version %s already has other content", id)
	}
	pr, err := s.checkContent(v, data)
	if err != nil {
		return nil, err
	}
	key, err := s.putBlob(ctx, v.ID, "state", data)
	if err != nil {
		return nil, err
	}
	done := false
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := s.lockHead(ctx, tx, v.WorkspaceID)
		if err != nil {
			return err
		}
		now, err := getVersion(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if now.Status == StatusFinalized && now.StateMD5 == pr.md5 {
			v, done = now, true // a concurrent identical upload won
			return nil
		}
		if now.Status != StatusPending {
			return core.Conflict("state version %s is %s", id, now.Status)
		}
		v = now
		if err := checkAgainst(cur, v.Serial, v.Lineage, pr.md5, pr, v.Force); err != nil {
			return err
		}
		return s.finalize(ctx, tx, v, pr, key, []string{key})
	})
	if err != nil || done {
		s.dropBlobs(key)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// UploadJSON stores the JSON state (terraform show -json) of a version. It
// may arrive before or after the raw state; a later upload replaces it.
func (s *Service) UploadJSON(ctx context.Context, id string, data []byte) error {
	v, err := getVersion(ctx, s.db, id, false)
	if err != nil {
		return err
	}
	if v.Status == StatusDiscarded {
		return core.Conflict("state version %s was discarded", id)
	}
	if err := validateJSONState(data, s.MaxSize()); err != nil {
		return err
	}
	key, err := s.putBlob(ctx, v.ID, "json-state", data)
	if err != nil {
		return err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		var old string
		if err := tx.QueryRow(ctx, `SELECT json_state_key FROM state_versions WHERE id = ?`+store.ForUpdate(tx), id).Scan(&old); err != nil {
			if store.IsNoRows(err) {
				return core.NotFound("state version %s not found", id)
			}
			return err
		}
		if err := adopt(ctx, tx, []string{key}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE state_versions SET json_state_key = ? WHERE id = ?`, key, id); err != nil {
			return err
		}
		if old != "" {
			_, err := tx.Exec(ctx, `INSERT INTO state_blob_orphans (blob_key, created_at) VALUES (?, 0)`, old)
			return err
		}
		return nil
	})
	if err != nil {
		s.dropBlobs(key)
	}
	return err
}

func md5hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

const versionCols = `id, workspace_id, status, serial, lineage, md5, forced, run_id, created_by, json_outputs, state_key, json_state_key,
	size, state_md5, state_serial, state_lineage, format_version, terraform_version, summary, created_at, finalized_at`

// headVersionCols are versionCols of the state_versions row v, beside a
// joined table.
var headVersionCols = "v." + strings.Join(strings.Split(strings.Join(strings.Fields(versionCols), " "), ", "), ", v.")

func scanVersion(sc interface{ Scan(...any) error }) (*Version, error) {
	var v Version
	var status, summary string
	var jsonOutputs sql.NullString
	var created int64
	var finalized sql.NullInt64
	if err := sc.Scan(&v.ID, &v.WorkspaceID, &status, &v.Serial, &v.Lineage, &v.MD5, &v.Force, &v.RunID, &v.CreatedBy, &jsonOutputs,
		&v.StateKey, &v.JSONStateKey, &v.Size, &v.StateMD5, &v.StateSerial, &v.StateLineage, &v.FormatVersion, &v.TerraformVersion,
		&summary, &created, &finalized); err != nil {
		return nil, err
	}
	v.Status = Status(status)
	if jsonOutputs.Valid {
		v.jsonOutputs = []byte(jsonOutputs.String)
	}
	if err := json.Unmarshal([]byte(summary), &v.Summary); err != nil {
		return nil, fmt.Errorf("decoding summary of state version %s: %w", v.ID, err)
	}
	v.CreatedAt = core.FromMicros(created)
	if finalized.Valid {
		t := core.FromMicros(finalized.Int64)
		v.FinalizedAt = &t
	}
	return &v, nil
}

// sealedJSONOutputs is v's json-state-outputs as stored: sealed, or nil.
func (s *Service) sealedJSONOutputs(v *Version) (any, error) {
	if v.jsonOutputs == nil {
		return nil, nil
	}
	return s.Keys.SealString(SealedColumns[1].Purpose, string(v.jsonOutputs))
}

func (s *Service) insertVersion(ctx context.Context, q store.Q, v *Version) error {
	jo, err := s.sealedJSONOutputs(v)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO state_versions (id, workspace_id, status, serial, lineage, md5, forced, run_id, created_by, json_outputs, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.WorkspaceID, string(v.Status), v.Serial, v.Lineage, v.MD5, v.Force, v.RunID, v.CreatedBy, jo, core.Micros(v.CreatedAt))
	if err != nil {
		return fmt.Errorf("creating state version: %w", err)
	}
	return nil
}

func getVersion(ctx context.Context, q store.Q, id string, lock bool) (*Version, error) {
	if !core.HasPrefix(id, core.PrefixStateVersion) {
		return nil, core.NotFound("state version %s not found", id)
	}
	if db, ok := q.(*store.DB); ok && !lock {
		// Outside a transaction the row may come from the request memo:
		// the authorization guard and the handler read the same version.
		v, err := core.Memoize(ctx, versionKey(id), func() (*Version, error) { return readVersion(ctx, db, id, false) })
		if err != nil {
			return nil, err
		}
		return v.clone(), nil
	}
	return readVersion(ctx, q, id, lock)
}

// versionKey is where the request memo keeps state version id.
func versionKey(id string) string { return "state-version:" + id }

func readVersion(ctx context.Context, q store.Q, id string, lock bool) (*Version, error) {
	query := `SELECT ` + versionCols + ` FROM state_versions WHERE id = ?`
	if lock {
		if _, ok := q.(*store.Tx); ok {
			query += store.ForUpdate(q)
		}
	}
	v, err := scanVersion(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("state version %s not found", id)
	}
	return v, err
}

// Get returns a state version the caller may see.
func (s *Service) Get(ctx context.Context, id string) (*Version, error) {
	v, err := getVersion(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if _, err := s.workspace(ctx, v.WorkspaceID); err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return nil, core.NotFound("state version %s not found", id)
		}
		return nil, err
	}
	return v, nil
}

// Current returns the current state version of a workspace the caller may
// see; none is core.ErrNotFound.
func (s *Service) Current(ctx context.Context, workspaceID string) (*Version, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.currentVersion(ctx, ws.ID)
}

// currentVersion reads a workspace's current version with its head in
// one statement (core.KindNotFound when it has none), without an access
// check, and keeps it in the request memo for the reads of it by ID that
// follow (its outputs, the response).
func (s *Service) currentVersion(ctx context.Context, workspaceID string) (*Version, error) {
	v, err := scanVersion(s.db.QueryRow(ctx, `SELECT `+versionCols+` FROM state_versions WHERE id = (`+headSQL+`)`, workspaceID))
	if store.IsNoRows(err) {
		return nil, core.NotFound("workspace %s has no current state version", workspaceID)
	}
	if err != nil {
		return nil, err
	}
	core.Remember(ctx, versionKey(v.ID), v.clone())
	return v, nil
}

// List returns a page of a workspace's state versions, newest first, and
// the total count.
func (s *Service) List(ctx context.Context, org, workspace string, offset, limit int) ([]*Version, int, error) {
	if org == "" || workspace == "" {
		return nil, 0, core.BadRequest("filter[organization][name] and filter[workspace][name] are both required")
	}
	ws, err := s.workspaceByName(ctx, org, workspace)
	if err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM state_versions WHERE workspace_id = ?`, ws.ID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+versionCols+` FROM state_versions WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`, ws.ID, limit, offset)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []*Version
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, v)
	}
	return out, total, rows.Err()
}

// Content opens a finalized version's raw state (json selects the JSON
// state). It does no access check: callers are capability handlers or have
// checked access with Get.
func (s *Service) Content(ctx context.Context, id string, jsonState bool) (io.ReadCloser, int64, error) {
	v, err := getVersion(ctx, s.db, id, false)
	if err != nil {
		return nil, 0, err
	}
	key := v.StateKey
	if jsonState {
		key = v.JSONStateKey
	}
	switch v.Status {
	case StatusBackingDataDeleted:
		return nil, 0, core.NotFound("state version %s has no content: it was deleted (by its workspace's data retention policy, or for good after a soft delete)", id)
	case StatusBackingDataSoftDeleted:
		return nil, 0, core.NotFound("state version %s's content is soft deleted: a workspace admin may restore it (actions/restore_backing_data)", id)
	}
	if v.Status != StatusFinalized || key == "" {
		return nil, 0, core.NotFound("state version %s has no content yet", id)
	}
	return s.blobs.Reader(ctx, key)
}

const outputCols = `id, state_version_id, name, sensitive, type, detailed_type, value`

func scanOutput(sc interface{ Scan(...any) error }) (*Output, error) {
	var o Output
	var dt, val string
	if err := sc.Scan(&o.ID, &o.StateVersionID, &o.Name, &o.Sensitive, &o.Type, &dt, &val); err != nil {
		return nil, err
	}
	o.DetailedType, o.Value = json.RawMessage(dt), json.RawMessage(val)
	return &o, nil
}

// scanOutput reads an output and opens its sealed value.
func (s *Service) scanOutput(sc interface{ Scan(...any) error }) (*Output, error) {
	o, err := scanOutput(sc)
	if err != nil {
		return nil, err
	}
	v, err := s.Keys.OpenString(SealedColumns[0].Purpose, string(o.Value))
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", o.ID, err)
	}
	o.Value = json.RawMessage(v)
	return o, nil
}

func (s *Service) outputs(ctx context.Context, svID string) ([]*Output, error) {
	return s.outputsOf(ctx, `?`, svID)
}

// outputsOf lists, in name order, the outputs of the version whose ID the
// SQL expression version says (its one argument arg).
func (s *Service) outputsOf(ctx context.Context, version string, arg any) ([]*Output, error) {
	return store.All(ctx, s.db, s.scanOutput, `SELECT `+outputCols+` FROM state_version_outputs WHERE state_version_id = `+version+` ORDER BY name`, arg)
}

// headSQL is a workspace's current version's ID ("" or no row: none); its
// argument is the workspace's ID.
const headSQL = `SELECT current_id FROM state_heads WHERE workspace_id = ?`

// Outputs returns the outputs of a state version the caller may see, with
// their values (sensitive ones included, as HCP Terraform does).
func (s *Service) Outputs(ctx context.Context, svID string) ([]*Output, error) {
	v, err := s.Get(ctx, svID)
	if err != nil {
		return nil, err
	}
	return s.outputs(ctx, v.ID)
}

// Output returns one output the caller may see, with its value.
func (s *Service) Output(ctx context.Context, id string) (*Output, error) {
	if !core.HasPrefix(id, core.PrefixStateOutput) {
		return nil, core.NotFound("state version output %s not found", id)
	}
	o, err := s.scanOutput(s.db.QueryRow(ctx, `SELECT `+outputCols+` FROM state_version_outputs WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("state version output %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.Get(ctx, o.StateVersionID); err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return nil, core.NotFound("state version output %s not found", id)
		}
		return nil, err
	}
	return o, nil
}

// CurrentOutputs returns the outputs of a workspace's current state
// version (values included; the API hides sensitive ones). A workspace
// without state has none.
func (s *Service) CurrentOutputs(ctx context.Context, workspaceID string) ([]*Output, error) {
	if _, err := s.workspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	// Through the head in one statement: the version itself is not needed
	// (a workspace without one has no outputs either).
	return s.outputsOf(ctx, `(`+headSQL+`)`, workspaceID)
}

// CurrentStateVersionID returns the ID of a workspace's current state
// version, "" when it has none. No access check (for other domains).
func (s *Service) CurrentStateVersionID(ctx context.Context, workspaceID string) (string, error) {
	var id string
	err := s.db.QueryRow(ctx, headSQL, workspaceID).Scan(&id)
	if store.IsNoRows(err) {
		return "", nil
	}
	return id, err
}

// CurrentStateVersionIDSQL says CurrentStateVersionID in SQL over a
// workspace's id written ws.id (NULL or empty: none).
func CurrentStateVersionIDSQL() string {
	return `SELECT current_id FROM state_heads WHERE workspace_id = ws.id`
}

// CurrentSummarySQL says, over a workspace row ws, what CurrentSummary
// does but the outputs' values: scalar subqueries for the current
// version's summary (JSON) and its outputs' IDs in name order
// (comma-separated). SummaryOf reads them.
func CurrentSummarySQL() []string {
	current := `(SELECT current_id FROM state_heads WHERE workspace_id = ws.id)`
	return []string{
		`SELECT summary FROM state_versions WHERE id = ` + current,
		`SELECT string_agg(o.id, ',' ORDER BY o.name) FROM state_version_outputs o WHERE o.state_version_id = ` + current,
	}
}

// SummaryOf reads CurrentSummarySQL's values: the current version's
// resource count and its outputs' IDs.
func SummaryOf(vals []sql.NullString) (resources int, outputIDs []string, err error) {
	if len(vals) != 2 || !vals[0].Valid {
		return 0, nil, fmt.Errorf("no summary of the current state version")
	}
	var sum struct {
		ResourceCount int `json:"resource-count"`
	}
	if err := json.Unmarshal([]byte(vals[0].String), &sum); err != nil {
		return 0, nil, fmt.Errorf("decoding the current state version's summary: %w", err)
	}
	if vals[1].String != "" {
		outputIDs = strings.Split(vals[1].String, ",")
	}
	return sum.ResourceCount, outputIDs, nil
}

// ResourceCount returns the number of managed resource instances in a
// workspace's current state (0 without state). No access check.
func (s *Service) ResourceCount(ctx context.Context, workspaceID string) (int, error) {
	v, err := s.currentVersion(ctx, workspaceID)
	if core.KindOf(err) == core.KindNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return v.Summary.ResourceCount, nil
}

// CurrentSummary returns what a workspace read shows of its state: the
// current version's ID ("" without state), its resource count and its
// outputs (with values, sensitive ones included: callers redact). No access
// check: for the workspace domain, which has checked access already. It
// costs one query without state and two with.
func (s *Service) CurrentSummary(ctx context.Context, workspaceID string) (id string, resources int, outs []*Output, err error) {
	v, err := s.currentVersion(ctx, workspaceID)
	if core.KindOf(err) == core.KindNotFound {
		return "", 0, nil, nil
	}
	if err != nil {
		return "", 0, nil, err
	}
	if outs, err = s.outputs(ctx, v.ID); err != nil {
		return "", 0, nil, err
	}
	return v.ID, v.Summary.ResourceCount, outs, nil
}

// CurrentState returns a workspace's current state version and its raw
// state; core.ErrNotFound when it has none. No access check (for runners).
func (s *Service) CurrentState(ctx context.Context, workspaceID string) (*Version, []byte, error) {
	v, err := s.currentVersion(ctx, workspaceID)
	if err != nil {
		return nil, nil, err
	}
	b, err := s.blobs.Get(ctx, v.StateKey)
	if err != nil {
		return nil, nil, err
	}
	return v, b, nil
}

// DiscardPending marks a workspace's pending versions discarded (for
// force-unlock: their uploads will then be refused).
func (s *Service) DiscardPending(ctx context.Context, q store.Q, workspaceID string) error {
	_, err := q.Exec(ctx, `UPDATE state_versions SET status = ? WHERE workspace_id = ? AND status = ?`,
		string(StatusDiscarded), workspaceID, string(StatusPending))
	return err
}

// DeleteWorkspaceStates removes all of a workspace's state versions and
// outputs inside the caller's transaction (workspace deletion). The blobs
// are handed to the garbage collector in the same transaction, so a
// rollback keeps them and a commit frees them.
func (s *Service) DeleteWorkspaceStates(ctx context.Context, q store.Q, workspaceID string) error {
	for _, col := range []string{"state_key", "json_state_key"} {
		if _, err := q.Exec(ctx, `INSERT INTO state_blob_orphans (blob_key, created_at) SELECT `+col+`, 0 FROM state_versions WHERE workspace_id = ? AND `+col+` <> ''`, workspaceID); err != nil {
			return fmt.Errorf("releasing state blobs: %w", err)
		}
	}
	if _, err := q.Exec(ctx, `DELETE FROM state_version_outputs WHERE state_version_id IN (SELECT id FROM state_versions WHERE workspace_id = ?)`, workspaceID); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, `DELETE FROM state_versions WHERE workspace_id = ?`, workspaceID); err != nil {
		return err
	}
	_, err := q.Exec(ctx, `DELETE FROM state_heads WHERE workspace_id = ?`, workspaceID)
	return err
}

// DeleteBackingData deletes the content of a workspace's finalized state
// versions created before cutoff, but for the current one: a data
// retention policy's work (internal/retention). The versions stay, with
// their outputs, as StatusBackingDataDeleted; their blobs go to the
// garbage collector in the same transaction. It returns how many
// versions it emptied. No access check.
func (s *Service) DeleteBackingData(ctx context.Context, workspaceID string, cutoff time.Time) (int, error) {
	n := 0
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		// The head is read (and locked on PostgreSQL) first: a version
		// becoming current meanwhile is newer than the one read.
		current, err := lockedHead(ctx, tx, workspaceID)
		if err != nil {
			return err
		}
		const old = ` FROM state_versions WHERE workspace_id = ? AND status = ? AND created_at < ? AND id <> ?`
		args := []any{workspaceID, string(StatusFinalized), core.Micros(cutoff), current}
		for _, col := range []string{"state_key", "json_state_key"} {
			if _, err := tx.Exec(ctx, `INSERT INTO state_blob_orphans (blob_key, created_at) SELECT `+col+`, 0`+old+` AND `+col+` <> ''`, args...); err != nil {
				return fmt.Errorf("releasing state blobs: %w", err)
			}
		}
		res, err := tx.Exec(ctx, `UPDATE state_versions SET status = ?, state_key = '', json_state_key = '' WHERE id IN (SELECT id`+old+`)`,
			append([]any{string(StatusBackingDataDeleted)}, args...)...)
		if err != nil {
			return err
		}
		c, err := res.RowsAffected()
		n = int(c)
		return err
	})
	return n, err
}

// lockedHead is a workspace's current version's ID ("" for none), read
// with headSQL and locked on PostgreSQL until tx ends.
func lockedHead(ctx context.Context, tx *store.Tx, workspaceID string) (string, error) {
	var id string
	err := tx.QueryRow(ctx, headSQL+store.ForUpdate(tx), workspaceID).Scan(&id)
	if store.IsNoRows(err) {
		return "", nil
	}
	return id, err
}

// Backing data actions (Terraform Enterprise's): a workspace admin sets a
// version's content aside (soft delete; never the current version's),
// restores it, or deletes it for good once set aside. The route guard
// asks WorkspaceUpdate of the caller.
const (
	SoftDeleteBackingData        = "soft_delete_backing_data"
	RestoreBackingData           = "restore_backing_data"
	PermanentlyDeleteBackingData = "permanently_delete_backing_data"
)

// backingDataMoves are the backing data actions' status changes (from, to).
var backingDataMoves = map[string][2]Status{
	SoftDeleteBackingData:        {StatusFinalized, StatusBackingDataSoftDeleted},
	RestoreBackingData:           {StatusBackingDataSoftDeleted, StatusFinalized},
	PermanentlyDeleteBackingData: {StatusBackingDataSoftDeleted, StatusBackingDataDeleted},
}

// ManageBackingData applies one of the backing data actions to version id
// (core.KindConflict, "transition not allowed", when its status does not
// allow it).
func (s *Service) ManageBackingData(ctx context.Context, id, action string) (*Version, error) {
	move, ok := backingDataMoves[action]
	if !ok {
		return nil, core.NotFound("no backing data action %q", action)
	}
	from, to := move[0], move[1]
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	var v *Version
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if v, err = getVersion(ctx, tx, id, true); err != nil {
			return err
		}
		if v.Status != from {
			return &core.Error{Kind: core.KindConflict, Title: "transition not allowed",
				Detail: fmt.Sprintf("state version %s is %s: %s needs a %s version", id, v.Status, action, from)}
		}
		if action == SoftDeleteBackingData {
			current, err := lockedHead(ctx, tx, v.WorkspaceID)
			if err != nil {
				return err
			}
			if current == id {
				return &core.Error{Kind: core.KindConflict, Title: "transition not allowed",
					Detail: fmt.Sprintf("state version %s is its workspace's current state: its backing data cannot be deleted", id)}
			}
		}
		if action == PermanentlyDeleteBackingData {
			for _, k := range []string{v.StateKey, v.JSONStateKey} {
				if k == "" {
					continue
				}
				if _, err := tx.Exec(ctx, `INSERT INTO state_blob_orphans (blob_key, created_at) VALUES (?, 0)`, k); err != nil {
					return fmt.Errorf("releasing state blobs: %w", err)
				}
			}
			v.StateKey, v.JSONStateKey = "", ""
		}
		v.Status = to
		_, err = tx.Exec(ctx, `UPDATE state_versions SET status = ?, state_key = ?, json_state_key = ? WHERE id = ?`, string(v.Status), v.StateKey, v.JSONStateKey, id)
		return err
	})
	return v, err
}

// CollectGarbage deletes blobs recorded as orphans before olderThan ago
// and returns how many it removed. The record goes first, in its own
// statement, so an upload still holding it fails rather than finalizing a
// version over a deleted blob.
func (s *Service) CollectGarbage(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := core.Micros(core.Now().Add(-olderThan))
	keys, err := store.Strings(ctx, s.db, `SELECT blob_key FROM state_blob_orphans WHERE created_at < ? ORDER BY created_at LIMIT 500`, cutoff)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, k := range keys {
		res, err := s.db.Exec(ctx, `DELETE FROM state_blob_orphans WHERE blob_key = ?`, k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c, _ := res.RowsAffected(); c != 1 {
			continue
		}
		if err := s.blobs.Delete(ctx, k); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// RunGarbageCollector collects orphaned state blobs every interval until
// ctx ends: a loop on the server's lifecycle, run once per cluster.
func (s *Service) RunGarbageCollector(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := s.CollectGarbage(ctx, OrphanAge); err != nil && ctx.Err() == nil {
			slog.Warn("state garbage collection", "removed", n, "error", err)
		}
	}
}
