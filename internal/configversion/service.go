package configversion

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
)

// Defaults for Options.
const (
	DefaultMaxUploadBytes   = 100 << 20
	DefaultMaxUnpackedBytes = slug.DefaultMaxBytes
	DefaultUploadURLTTL     = 2 * time.Hour
	// stagingGrace is how long an upload in progress may take before a
	// sweep may delete its half-written blob.
	stagingGrace = 24 * time.Hour
)

// Options configure a Service; zero values take the defaults.
type Options struct {
	// MaxUploadBytes bounds the compressed upload (default 100 MB).
	MaxUploadBytes int64
	// MaxUnpackedBytes bounds what the archive unpacks to (default 100 MB).
	MaxUnpackedBytes int64
	// UploadURLTTL is how long an upload URL stays valid (default 2 h).
	UploadURLTTL time.Duration
	// TempDir is where archives are unpacked for validation (default os.TempDir()).
	TempDir string
	Logger  *slog.Logger
}

// Service manages configuration versions.
type Service struct {
	db     *store.DB
	blobs  *blob.Store
	signer *blob.Signer
	ws     Workspaces
	opts   Options

	onUpload     UploadHook
	archiveCheck ArchiveCheck
	inUse        InUse
	moduleAccess func(ctx context.Context, moduleID string) error
}

// NewService returns a configuration version service.
func NewService(db *store.DB, blobs *blob.Store, signer *blob.Signer, ws Workspaces, opts Options) *Service {
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if opts.MaxUnpackedBytes <= 0 {
		opts.MaxUnpackedBytes = DefaultMaxUnpackedBytes
	}
	if opts.UploadURLTTL <= 0 {
		opts.UploadURLTTL = DefaultUploadURLTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Service{db: db, blobs: blobs, signer: signer, ws: ws, opts: opts}
}

// SetUploadHook wires the run domain's hook (called when a version with
// auto-queue-runs becomes uploaded).
func (s *Service) SetUploadHook(h UploadHook) { s.onUpload = h }

// SetArchiveCheck wires the run domain's check that no active run uses a
// version about to be archived.
func (s *Service) SetArchiveCheck(c ArchiveCheck) { s.archiveCheck = c }

// SetInUse wires the run domain's check that a version is referenced by a run.
func (s *Service) SetInUse(f InUse) { s.inUse = f }

// UploadPath is the inner capability path of a version's upload URL.
func UploadPath(id string) string { return "/configuration-versions/" + id + "/upload" }

// UploadURL returns a fresh capability URL to PUT the version's archive to.
func (s *Service) UploadURL(cv *ConfigurationVersion) string {
	return s.signer.URL(http.MethodPut, UploadPath(cv.ID), s.opts.UploadURLTTL)
}

// workspace returns the workspace if the caller may see it.
func (s *Service) workspace(ctx context.Context, id string) (*Workspace, error) {
	if !core.HasPrefix(id, core.PrefixWorkspace) {
		return nil, core.NotFound("workspace %q not found", id)
	}
	ws, err := s.ws.Get(ctx, id)
	if err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return nil, core.NotFound("workspace %q not found", id)
		}
		return nil, err
	}
	if err := auth.CheckOrganization(ctx, ws.Organization); err != nil {
		return nil, core.NotFound("workspace %q not found", id)
	}
	// A run token reaches only its own workspace.
	if p := auth.FromContext(ctx); p != nil && p.Kind == auth.KindRun && p.WorkspaceID != ws.ID {
		return nil, core.NotFound("workspace %q not found", id)
	}
	return ws, nil
}

func (s *Service) checkQueueRun(ctx context.Context, ws *Workspace) error {
	if c, ok := s.ws.(QueueRunChecker); ok {
		return c.CheckQueueRun(ctx, ws)
	}
	return nil
}

// Create makes a pending version in a workspace the caller may see.
func (s *Service) Create(ctx context.Context, workspaceID string, opts CreateOptions) (*ConfigurationVersion, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if err := s.checkQueueRun(ctx, ws); err != nil {
		return nil, err
	}
	now := core.Now()
	cv := &ConfigurationVersion{
		ID:            core.NewID(core.PrefixConfigVersion),
		WorkspaceID:   ws.ID,
		Status:        StatusPending,
		Source:        SourceAPI,
		AutoQueueRuns: true,
		CreatedAt:     now,
		UpdatedAt:     now,
	}
	if p := auth.FromContext(ctx); p != nil {
		cv.CreatedByToken = p.TokenID
	}
	if opts.Source != "" {
		cv.Source = opts.Source
	}
	if opts.AutoQueueRuns != nil {
		cv.AutoQueueRuns = *opts.AutoQueueRuns
	}
	if opts.Speculative != nil {
		cv.Speculative = *opts.Speculative
	}
	if opts.Provisional != nil {
		cv.Provisional = *opts.Provisional
	}
	ingress := ""
	if opts.Ingress != nil {
		cv.Ingress = opts.Ingress
		b, _ := json.Marshal(opts.Ingress)
		ingress = string(b)
	}
	var currentSince *int64
	if !cv.Speculative && !cv.Provisional {
		v := core.Micros(now)
		currentSince = &v
	}
	return cv, s.insert(ctx, cv, currentSince, ingress)
}

func (s *Service) insert(ctx context.Context, cv *ConfigurationVersion, currentSince *int64, ingress string) error {
	ts, _ := json.Marshal(cv.StatusTimestamps)
	_, err := s.db.Exec(ctx, `INSERT INTO configuration_versions (id, workspace_id, status, source, auto_queue_runs, speculative, provisional, current_since, status_timestamps, created_at, updated_at, created_by_token, ingress) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		cv.ID, cv.WorkspaceID, string(cv.Status), cv.Source, cv.AutoQueueRuns, cv.Speculative, cv.Provisional, currentSince, string(ts), core.Micros(cv.CreatedAt), core.Micros(cv.UpdatedAt), cv.CreatedByToken, ingress)
	if err != nil {
		return fmt.Errorf("creating configuration version: %w", err)
	}
	return nil
}

// CreateForModule makes a pending version owned by a private registry
// module: a test run's configuration (internal/moduletest, which checked
// the caller may run the module's tests). Its workspace_id is the
// module's ID; it queues no run, is no workspace's current version, and
// goes with the module (DeleteWorkspaceConfigurationVersions with the
// module's ID). Uploads take the same checks as any version's.
func (s *Service) CreateForModule(ctx context.Context, moduleID string) (*ConfigurationVersion, error) {
	now := core.Now()
	cv := &ConfigurationVersion{ID: core.NewID(core.PrefixConfigVersion), WorkspaceID: moduleID, Status: StatusPending,
		Source: SourceAPI, Speculative: true, CreatedAt: now, UpdatedAt: now}
	if p := auth.FromContext(ctx); p != nil {
		cv.CreatedByToken = p.TokenID
	}
	return cv, s.insert(ctx, cv, nil, "")
}

const cols = `id, workspace_id, status, source, auto_queue_runs, speculative, provisional, error, error_message, blob_key, sha256, size, status_timestamps, created_at, updated_at, created_by_token, ingress`

func scan(sc interface{ Scan(...any) error }) (*ConfigurationVersion, error) {
	var cv ConfigurationVersion
	var status, ts, ingress string
	var created, updated int64
	if err := sc.Scan(&cv.ID, &cv.WorkspaceID, &status, &cv.Source, &cv.AutoQueueRuns, &cv.Speculative, &cv.Provisional,
		&cv.Error, &cv.ErrorMessage, &cv.blobKey, &cv.SHA256, &cv.Size, &ts, &created, &updated, &cv.CreatedByToken, &ingress); err != nil {
		return nil, err
	}
	if ingress != "" {
		cv.Ingress = new(Ingress)
		if err := json.Unmarshal([]byte(ingress), cv.Ingress); err != nil {
			return nil, fmt.Errorf("decoding ingress attributes of %s: %w", cv.ID, err)
		}
	}
	cv.Status = Status(status)
	if err := json.Unmarshal([]byte(ts), &cv.StatusTimestamps); err != nil {
		return nil, fmt.Errorf("decoding status timestamps of %s: %w", cv.ID, err)
	}
	cv.CreatedAt, cv.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &cv, nil
}

// Lookup returns a version without an access check, for other domains
// (inside their transactions) and the capability upload. Prefer Get.
func Lookup(ctx context.Context, q store.Q, id string) (*ConfigurationVersion, error) {
	return lookup(ctx, q, id, false)
}

func lookup(ctx context.Context, q store.Q, id string, lock bool) (*ConfigurationVersion, error) {
	if !core.HasPrefix(id, core.PrefixConfigVersion) {
		return nil, core.NotFound("configuration version %q not found", id)
	}
	if db, ok := q.(*store.DB); ok && !lock {
		// Outside a transaction the row may come from the request memo:
		// a run's creation names the version to the guard and to the run
		// domain.
		cv, err := core.Memoize(ctx, "configuration-version:"+id, func() (*ConfigurationVersion, error) {
			return read(ctx, db, id, false)
		})
		if err != nil {
			return nil, err
		}
		return cv.clone(), nil
	}
	return read(ctx, q, id, lock)
}

// clone returns a copy of cv that shares nothing a caller could change.
func (cv *ConfigurationVersion) clone() *ConfigurationVersion {
	c := *cv
	for _, t := range []**time.Time{&c.StatusTimestamps.StartedAt, &c.StatusTimestamps.FinishedAt, &c.StatusTimestamps.ErroredAt, &c.StatusTimestamps.ArchivedAt} {
		if *t != nil {
			v := **t
			*t = &v
		}
	}
	if c.Ingress != nil {
		in := *c.Ingress
		c.Ingress = &in
	}
	return &c
}

func read(ctx context.Context, q store.Q, id string, lock bool) (*ConfigurationVersion, error) {
	query := `SELECT ` + cols + ` FROM configuration_versions WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	cv, err := scan(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("configuration version %q not found", id)
	}
	return cv, err
}

// Get returns a version the caller may see.
func (s *Service) Get(ctx context.Context, id string) (*ConfigurationVersion, error) {
	cv, err := Lookup(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if !core.HasPrefix(cv.WorkspaceID, core.PrefixWorkspace) {
		// A module's test configuration (CreateForModule).
		if s.moduleAccess == nil || s.moduleAccess(ctx, cv.WorkspaceID) != nil {
			return nil, core.NotFound("configuration version %q not found", id)
		}
		return cv, nil
	}
	if _, err := s.workspace(ctx, cv.WorkspaceID); err != nil {
		return nil, core.NotFound("configuration version %q not found", id)
	}
	return cv, nil
}

// SetModuleAccess wires the module test domain's check that the caller
// may see a module's test configurations (Get of a version CreateForModule
// made).
func (s *Service) SetModuleAccess(f func(ctx context.Context, moduleID string) error) {
	s.moduleAccess = f
}

// List returns a page of a workspace's versions, newest first, and the total count.
func (s *Service) List(ctx context.Context, workspaceID string, offset, limit int) ([]*ConfigurationVersion, int, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM configuration_versions WHERE workspace_id = ?`, ws.ID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+cols+` FROM configuration_versions WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`, ws.ID, limit, offset)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := []*ConfigurationVersion{}
	for rows.Next() {
		cv, err := scan(rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, cv)
	}
	return out, total, rows.Err()
}

// CurrentID returns the ID of the workspace's current configuration
// version ("" when none): the newest one that is neither speculative nor
// an unpromoted provisional one, and not errored or archived. The
// workspace domain shows it as current-configuration-version.
func CurrentID(ctx context.Context, q store.Q, workspaceID string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM configuration_versions WHERE workspace_id = ? AND current_since IS NOT NULL AND status NOT IN (?, ?, ?, ?) ORDER BY current_since DESC, id DESC LIMIT 1`,
		workspaceID, string(StatusErrored), string(StatusArchived), string(StatusSoftDeleted), string(StatusPermanentlyDeleted)).Scan(&id)
	if store.IsNoRows(err) {
		return "", nil
	}
	return id, err
}

// CurrentIDSQL says CurrentID in SQL over a workspace's id written ws.id.
func CurrentIDSQL() string {
	return `SELECT id FROM configuration_versions WHERE workspace_id = ws.id AND current_since IS NOT NULL AND status NOT IN ('` +
		string(StatusErrored) + `', '` + string(StatusArchived) + `', '` + string(StatusSoftDeleted) + `', '` + string(StatusPermanentlyDeleted) +
		`') ORDER BY current_since DESC, id DESC LIMIT 1`
}

// Backing data actions (Terraform Enterprise's): a workspace admin sets a
// version's archive aside (soft delete: never the current version's, nor
// one an active run uses), restores it, or deletes it for good once set
// aside. The route guard asks WorkspaceUpdate of the caller.
const (
	SoftDeleteBackingData        = "soft_delete_backing_data"
	RestoreBackingData           = "restore_backing_data"
	PermanentlyDeleteBackingData = "permanently_delete_backing_data"
)

// backingDataMoves are the backing data actions' status changes (from, to).
var backingDataMoves = map[string][2]Status{
	SoftDeleteBackingData:        {StatusUploaded, StatusSoftDeleted},
	RestoreBackingData:           {StatusSoftDeleted, StatusUploaded},
	PermanentlyDeleteBackingData: {StatusSoftDeleted, StatusPermanentlyDeleted},
}

// ManageBackingData applies one of the backing data actions to version id
// (core.KindConflict, "transition not allowed", when its status does not
// allow it).
func (s *Service) ManageBackingData(ctx context.Context, id, action string) (*ConfigurationVersion, error) {
	move, ok := backingDataMoves[action]
	if !ok {
		return nil, core.NotFound("no backing data action %q", action)
	}
	cv, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if action == SoftDeleteBackingData && s.archiveCheck != nil {
		if err := s.archiveCheck(ctx, cv); err != nil {
			return nil, err
		}
	}
	var oldKey string
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if cv, err = lookup(ctx, tx, id, true); err != nil {
			return err
		}
		if cv.Status != move[0] {
			return &core.Error{Kind: core.KindConflict, Title: "transition not allowed",
				Detail: fmt.Sprintf("configuration version %s is %s: %s needs a version that is %s", id, cv.Status, action, move[0])}
		}
		if action == SoftDeleteBackingData {
			current, err := CurrentID(ctx, tx, cv.WorkspaceID)
			if err != nil {
				return err
			}
			if current == cv.ID {
				return &core.Error{Kind: core.KindConflict, Title: "transition not allowed",
					Detail: fmt.Sprintf("configuration version %s is its workspace's current configuration: its backing data cannot be deleted", id)}
			}
		}
		now := core.Now()
		if action == PermanentlyDeleteBackingData && cv.blobKey != "" {
			if err := addGarbage(ctx, tx, cv.blobKey, now); err != nil {
				return err
			}
			oldKey, cv.blobKey = cv.blobKey, ""
		}
		cv.Status = move[1]
		_, err := tx.Exec(ctx, `UPDATE configuration_versions SET status = ?, blob_key = ?, updated_at = ? WHERE id = ?`,
			string(cv.Status), cv.blobKey, core.Micros(now), cv.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.collect(ctx, oldKey)
	return cv, nil
}

// ArchiveOlder archives a workspace's uploaded versions created before
// cutoff that are neither current nor used by an active run: a data
// retention policy's work (internal/retention). It returns how many it
// archived. No access check.
func (s *Service) ArchiveOlder(ctx context.Context, workspaceID string, cutoff time.Time) (int, error) {
	old, err := store.All(ctx, s.db, scan, `SELECT `+cols+` FROM configuration_versions WHERE workspace_id = ? AND status = ? AND created_at < ? ORDER BY created_at`,
		workspaceID, string(StatusUploaded), core.Micros(cutoff))
	if err != nil {
		return 0, err
	}
	current, err := CurrentID(ctx, s.db, workspaceID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, cv := range old {
		if cv.ID == current {
			continue // archive would refuse it too, after the runs' check
		}
		if s.archiveCheck != nil {
			if err := s.archiveCheck(ctx, cv); core.KindOf(err) == core.KindConflict {
				continue // a run still uses it: kept until it ends
			} else if err != nil {
				return n, err
			}
		}
		switch err := s.archive(ctx, cv.ID); {
		case core.KindOf(err) == core.KindConflict:
			// Current, or no longer uploaded.
		case err != nil:
			return n, err
		default:
			n++
		}
	}
	return n, nil
}

// Promote makes a provisional version eligible to be current (the run
// domain calls it when a run using it is applied).
func Promote(ctx context.Context, q store.Q, id string) error {
	_, err := q.Exec(ctx, `UPDATE configuration_versions SET current_since = ?, provisional = ? WHERE id = ? AND current_since IS NULL AND speculative = ?`,
		core.Micros(core.Now()), false, id, false)
	return err
}

// Archive returns the version's archive (the uploaded tar.gz bytes). Only
// uploaded versions have one; others are a 404.
func (s *Service) Archive(ctx context.Context, id string) ([]byte, error) {
	rc, _, err := s.OpenArchive(ctx, id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// OpenArchive streams the archive of a version the caller may see and
// gives its size.
func (s *Service) OpenArchive(ctx context.Context, id string) (io.ReadCloser, int64, error) {
	cv, err := s.Get(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	return s.openArchive(ctx, cv)
}

// OpenArchiveUnchecked is OpenArchive without the access check, for server
// components that act without a caller (the run executor).
func (s *Service) OpenArchiveUnchecked(ctx context.Context, id string) (io.ReadCloser, int64, error) {
	cv, err := Lookup(ctx, s.db, id)
	if err != nil {
		return nil, 0, err
	}
	return s.openArchive(ctx, cv)
}

func (s *Service) openArchive(ctx context.Context, cv *ConfigurationVersion) (io.ReadCloser, int64, error) {
	id := cv.ID
	if cv.Status != StatusUploaded || cv.blobKey == "" {
		return nil, 0, core.NotFound("configuration version %q has no uploaded configuration (status %s)", id, cv.Status)
	}
	rc, n, err := s.blobs.Reader(ctx, cv.blobKey)
	if core.KindOf(err) == core.KindNotFound {
		return nil, 0, fmt.Errorf("archive of uploaded configuration version %s is missing: %v", id, err)
	}
	return rc, n, err
}

// MarkArchived archives an uploaded version: its archive is deleted and it
// can no longer be used. The workspace's current version, and versions an
// active run uses (the ArchiveCheck), cannot be archived.
func (s *Service) MarkArchived(ctx context.Context, id string) error {
	cv, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if cv.Status == StatusArchived {
		return nil
	}
	ws, err := s.workspace(ctx, cv.WorkspaceID)
	if err != nil {
		return err
	}
	if err := s.checkQueueRun(ctx, ws); err != nil {
		return err
	}
	if s.archiveCheck != nil {
		if err := s.archiveCheck(ctx, cv); err != nil {
			return err
		}
	}
	return s.archive(ctx, id)
}

// archive archives an uploaded version that is not current (the caller
// checked who asks, and that no active run uses it).
func (s *Service) archive(ctx context.Context, id string) error {
	var oldKey string
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		cv, err := lookup(ctx, tx, id, true)
		if err != nil {
			return err
		}
		switch cv.Status {
		case StatusArchived:
			return nil
		case StatusUploaded:
		default:
			return &core.Error{Kind: core.KindConflict, Title: "transition not allowed",
				Detail: fmt.Sprintf("only uploaded configuration versions can be archived; %s is %s", id, cv.Status)}
		}
		current, err := CurrentID(ctx, tx, cv.WorkspaceID)
		if err != nil {
			return err
		}
		if current == cv.ID {
			return &core.Error{Kind: core.KindConflict, Title: "transition not allowed",
				Detail: "configuration could not be archived because it is current"}
		}
		now := core.Now()
		cv.StatusTimestamps.ArchivedAt = &now
		ts, _ := json.Marshal(cv.StatusTimestamps)
		if cv.blobKey != "" {
			if err := addGarbage(ctx, tx, cv.blobKey, now); err != nil {
				return err
			}
		}
		oldKey = cv.blobKey
		_, err = tx.Exec(ctx, `UPDATE configuration_versions SET status = ?, blob_key = '', status_timestamps = ?, updated_at = ? WHERE id = ?`,
			string(StatusArchived), string(ts), core.Micros(now), cv.ID)
		return err
	})
	if err != nil {
		return err
	}
	s.collect(ctx, oldKey)
	return nil
}

// isRefusal reports whether an upload failed because of the archive itself.
func isRefusal(err error) bool {
	k := core.KindOf(err)
	return k == core.KindInvalid || k == core.KindTooLarge
}

// Upload stores and validates an archive for a version. The caller has
// proved it may (a verified capability URL); no access check is made. A
// refused archive (core.KindInvalid, or core.KindTooLarge over the upload
// limit) makes a pending version errored; an uploaded version stays as it
// was. Re-uploading an uploaded version replaces its archive unless a run
// already uses it (then only identical content is accepted).
func (s *Service) Upload(ctx context.Context, id string, body io.Reader) (*ConfigurationVersion, error) {
	cv, err := Lookup(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if cv.Status == StatusArchived {
		return nil, core.Conflict("configuration version %s is archived", id)
	}
	started := core.Now()
	key := "configuration-versions/" + cv.ID + "/" + core.RandomString(16) + ".tar.gz"
	// Record the staging blob first so that a crash leaves it to a sweep.
	if err := addGarbage(ctx, s.db, key, started.Add(stagingGrace)); err != nil {
		return nil, err
	}
	sum, size, err := s.stage(ctx, key, body)
	if err != nil {
		s.collect(ctx, key)
		if isRefusal(err) {
			s.markErrored(ctx, cv.ID, err)
		}
		return nil, err
	}

	var replaced string
	var becameUploaded bool
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := lookup(ctx, tx, id, true)
		if err != nil {
			return err
		}
		cv = cur
		now := core.Now()
		switch cur.Status {
		case StatusArchived:
			return core.Conflict("configuration version %s is archived", id)
		case StatusUploaded:
			if cur.SHA256 == sum {
				return nil // the same archive again: nothing to do
			}
			if s.inUse != nil {
				used, err := s.inUse(ctx, cur)
				if err != nil {
					return err
				}
				if used {
					return core.Conflict("configuration version %s is already uploaded and used by a run; create a new configuration version", id)
				}
			}
			replaced = cur.blobKey
		default:
			becameUploaded = true
			cur.Status = StatusUploaded
			cur.Error, cur.ErrorMessage = "", ""
			cur.StatusTimestamps.StartedAt = &started
			cur.StatusTimestamps.ErroredAt = nil
		}
		cur.StatusTimestamps.FinishedAt = &now
		cur.blobKey, cur.SHA256, cur.Size, cur.UpdatedAt = key, sum, size, now
		if replaced != "" {
			if err := addGarbage(ctx, tx, replaced, now); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM configuration_version_garbage WHERE blob_key = ?`, key); err != nil {
			return err
		}
		ts, _ := json.Marshal(cur.StatusTimestamps)
		_, err = tx.Exec(ctx, `UPDATE configuration_versions SET status = ?, error = '', error_message = '', blob_key = ?, sha256 = ?, size = ?, status_timestamps = ?, updated_at = ? WHERE id = ?`,
			string(cur.Status), key, sum, size, string(ts), core.Micros(now), cur.ID)
		return err
	})
	if err != nil {
		s.collect(ctx, key)
		return nil, err
	}
	if cv.blobKey != key { // identical re-upload: the staged copy is not needed
		s.collect(ctx, key)
	}
	s.collect(ctx, replaced)
	if becameUploaded && cv.AutoQueueRuns && s.onUpload != nil {
		if err := s.onUpload(context.WithoutCancel(ctx), cv); err != nil {
			cv = s.recordQueueFailure(context.WithoutCancel(ctx), cv, err)
		}
	}
	return cv, nil
}

// stage streams body into the blob at key and validates it by unpacking
// it into a temporary folder. It returns the archive's SHA-256 and size.
func (s *Service) stage(ctx context.Context, key string, body io.Reader) (string, int64, error) {
	h := sha256.New()
	br := &bodyReader{r: body}
	size, err := s.blobs.PutReader(ctx, key, io.TeeReader(br, h), s.opts.MaxUploadBytes)
	if err != nil {
		if br.err != nil {
			// The client went away or sent a broken body: not our failure.
			return "", 0, core.BadRequest("reading the upload: %v", br.err)
		}
		if core.KindOf(err) == core.KindTooLarge {
			return "", 0, &core.Error{Kind: core.KindTooLarge,
				Detail: fmt.Sprintf("configuration archive is larger than the limit of %d bytes", s.opts.MaxUploadBytes)}
		}
		return "", 0, err
	}
	rc, _, err := s.blobs.Reader(ctx, key)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	dir, err := os.MkdirTemp(s.opts.TempDir, "terrace-cv-")
	if err != nil {
		return "", 0, fmt.Errorf("creating a folder to check the archive: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := slug.Unpack(rc, dir, slug.Limits{MaxBytes: s.opts.MaxUnpackedBytes}); err != nil {
		if core.KindOf(err) == core.KindInvalid {
			return "", 0, &core.Error{Kind: core.KindInvalid, Title: "invalid configuration archive",
				Detail: "configuration archive is invalid: " + err.Error()}
		}
		return "", 0, fmt.Errorf("checking configuration archive: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// bodyReader remembers a read error of the request body.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// markErrored records why an upload was refused, unless the version
// already holds a good archive.
func (s *Service) markErrored(ctx context.Context, id string, cause error) {
	code := "invalid-archive"
	if core.KindOf(cause) == core.KindTooLarge {
		code = "archive-too-large"
	}
	ctx = context.WithoutCancel(ctx)
	msg := cause.Error()
	var ce *core.Error
	if errors.As(cause, &ce) && ce.Detail != "" {
		msg = ce.Detail
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		cv, err := lookup(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if cv.Status != StatusPending && cv.Status != StatusErrored {
			return nil
		}
		now := core.Now()
		cv.StatusTimestamps.ErroredAt = &now
		ts, _ := json.Marshal(cv.StatusTimestamps)
		_, err = tx.Exec(ctx, `UPDATE configuration_versions SET status = ?, error = ?, error_message = ?, status_timestamps = ?, updated_at = ? WHERE id = ?`,
			string(StatusErrored), code, msg, string(ts), core.Micros(now), id)
		return err
	})
	if err != nil && core.KindOf(err) != core.KindNotFound {
		s.opts.Logger.ErrorContext(ctx, "recording a refused configuration upload", "configuration_version", id, "error", err)
	}
}

// recordQueueFailure keeps, on an uploaded version, why the run its upload
// should have queued was not created: the version answers it as error
// and error-message (and the workspace, whose current version it is,
// through current-configuration-version). It returns the version as
// recorded.
func (s *Service) recordQueueFailure(ctx context.Context, cv *ConfigurationVersion, cause error) *ConfigurationVersion {
	why := cause.Error()
	if core.KindOf(cause) == core.KindInternal {
		// Internal causes stay in the server log, not in the API.
		s.opts.Logger.ErrorContext(ctx, "queueing a run for an uploaded configuration", "configuration_version", cv.ID, "error", cause)
		why = "an internal error occurred; the server log has the details"
	}
	msg := "The run for this configuration version could not be queued: " + why
	if _, err := s.db.Exec(ctx, `UPDATE configuration_versions SET error = ?, error_message = ?, updated_at = ? WHERE id = ? AND status = ?`,
		ErrorQueueFailed, msg, core.Micros(core.Now()), cv.ID, string(StatusUploaded)); err != nil {
		s.opts.Logger.ErrorContext(ctx, "recording a failed run queueing", "configuration_version", cv.ID, "error", err)
		return cv
	}
	out := *cv
	out.Error, out.ErrorMessage = ErrorQueueFailed, msg
	return &out
}

// CreateFromArchive creates a version in a workspace the caller may see
// and uploads tarGz to it in one call (for server-side producers such as
// no-code provisioning). A refused archive returns the errored version and
// the error.
func (s *Service) CreateFromArchive(ctx context.Context, workspaceID string, tarGz []byte, opts CreateOptions) (*ConfigurationVersion, error) {
	cv, err := s.Create(ctx, workspaceID, opts)
	if err != nil {
		return nil, err
	}
	up, err := s.Upload(ctx, cv.ID, bytes.NewReader(tarGz))
	if err != nil {
		if got, gerr := Lookup(ctx, s.db, cv.ID); gerr == nil {
			return got, err
		}
		return cv, err
	}
	return up, nil
}

func addGarbage(ctx context.Context, q store.Q, key string, notBefore time.Time) error {
	return blob.Garbage{Table: "configuration_version_garbage"}.Add(ctx, q, key, notBefore)
}

// collect deletes a blob that no version points at, and its garbage row;
// on failure the row stays for a later Sweep.
func (s *Service) collect(ctx context.Context, key string) { s.garbage().Collect(ctx, key) }

// Sweep deletes the blobs of deleted and archived versions and of uploads
// abandoned by a crash. It returns how many it deleted.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	return s.garbage().Sweep(ctx)
}

// Ledger is the domain's ledger of archives awaiting deletion, for the
// server's sweep loop (blob.RunAll).
func (s *Service) Ledger() blob.Garbage { return s.garbage() }

// DeleteWorkspaceConfigurationVersions removes a workspace's versions
// inside the workspace's deletion transaction. Their archives are left to
// the next Sweep, so a rolled-back deletion loses nothing.
func DeleteWorkspaceConfigurationVersions(ctx context.Context, q store.Q, workspaceID string) error {
	if _, err := q.Exec(ctx, `INSERT INTO configuration_version_garbage (blob_key, not_before) SELECT blob_key, ? FROM configuration_versions WHERE workspace_id = ? AND blob_key <> '' ON CONFLICT (blob_key) DO NOTHING`,
		core.Micros(core.Now()), workspaceID); err != nil {
		return fmt.Errorf("deleting configuration versions of workspace %s: %w", workspaceID, err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM configuration_versions WHERE workspace_id = ?`, workspaceID); err != nil {
		return fmt.Errorf("deleting configuration versions of workspace %s: %w", workspaceID, err)
	}
	return nil
}

// garbage is the ledger of this domain's blobs awaiting deletion.
func (s *Service) garbage() blob.Garbage {
	return blob.Garbage{DB: s.db, Blobs: s.blobs, Table: "configuration_version_garbage", What: "configuration archive", Logger: s.opts.Logger}
}
