package state

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// SystemWorkspaces is implemented by a Workspaces binding that can read a
// workspace without a caller (for CreateFromRun).
type SystemWorkspaces interface {
	System(ctx context.Context, id string) (*Workspace, error)
}

// CreateFromRun stores a state terraform wrote during run runID's apply
// (an intermediate snapshot or the final state) as a new state version.
// There is no caller: the job protocol has already checked that the
// runner holds the run's job, and here the run must hold the workspace's
// lock. The state is parsed once, here: serial, lineage and MD5 come from
// the content. A state equal to the current version is not stored again.
func (s *Service) CreateFromRun(ctx context.Context, workspaceID, runID string, raw []byte) (*Version, error) {
	b := s.ws.Load()
	sys, ok := any(nil), false
	if b != nil {
		sys = b.Workspaces
		_, ok = sys.(SystemWorkspaces)
	}
	if !ok {
		return nil, core.NotFound("workspace %s not found", workspaceID)
	}
	pr, err := parseState(raw, s.MaxSize(), nil)
	if err != nil {
		return nil, err
	}
	v := &Version{ID: core.NewID(core.PrefixStateVersion), WorkspaceID: workspaceID, Status: StatusPending, RunID: runID, CreatedAt: core.Now()}
	v.Serial, v.Lineage, v.MD5 = pr.serial, pr.lineage, pr.md5
	// The workspace's lock is read while the blob is stored: an apply's
	// report waits for both. A blob stored for a run that turns out not to
	// hold the lock is dropped again.
	var ws *Workspace
	var wsErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		ws, wsErr = sys.(SystemWorkspaces).System(ctx, workspaceID)
	}()
	stateKey, err := s.putBlob(ctx, v.ID, "state", raw)
	<-read
	if err == nil && wsErr == nil && ws.LockedBy != runID {
		wsErr = core.Conflict("run %s does not hold the lock of workspace %s", runID, ws.ID)
	}
	if wsErr != nil {
		if err == nil {
			s.dropBlobs(stateKey)
		}
		return nil, wsErr
	}
	if err != nil {
		return nil, err
	}
	v.WorkspaceID = ws.ID
	same := (*Version)(nil)
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := s.lockHead(ctx, tx, ws.ID)
		if err != nil {
			return err
		}
		if cur != nil && cur.StateMD5 == pr.md5 {
			same = cur
			return nil
		}
		if err := checkAgainst(cur, v.Serial, v.Lineage, pr.md5, pr, false); err != nil {
			return err
		}
		return s.insertFinal(ctx, tx, v, pr, stateKey, []string{stateKey})
	})
	if err != nil || same != nil {
		s.dropBlobs(stateKey)
	}
	if err != nil {
		return nil, err
	}
	if same != nil {
		return same, nil
	}
	return v, nil
}
