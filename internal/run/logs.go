package run

import (
	"bytes"
	"context"
	"fmt"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Logs are framed as terraform's cloud backend expects: STX, the output,
// ETX when the phase has ended. While a phase runs its log lives in
// log_chunks (so any replica can serve it); when it ends the chunks are
// folded into one blob.
const (
	stx = "\x02"
	etx = "\x03"
)

func logKey(id string) string { return "logs/" + id }

// startLog opens a phase's log; unless fresh (never opened before), what
// an earlier attempt left is cleared first. A log wrongly called fresh
// fails loudly (its first chunk exists), never mixes two attempts.
func (s *Service) startLog(ctx context.Context, q store.Q, logID string, fresh bool) error {
	if !fresh {
		if _, err := q.Exec(ctx, `DELETE FROM log_chunks WHERE log_id = ?`, logID); err != nil {
			return err
		}
	}
	_, err := q.Exec(ctx, `INSERT INTO log_chunks (log_id, seq, data) VALUES (?, 0, ?)`, logID, []byte(stx))
	return err
}

// AppendLog adds output to a running phase's log. Appends to one log are
// serialized on its first chunk (the STX every open log has), so writers
// racing for the next sequence number wait for each other instead of
// colliding on PostgreSQL, where two transactions could read the same MAX.
func (s *Service) AppendLog(ctx context.Context, logID string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	return s.DB.Tx(ctx, func(tx *store.Tx) error {
		var first int64
		err := tx.QueryRow(ctx, `SELECT seq FROM log_chunks WHERE log_id = ? AND seq = 0`+store.ForUpdate(tx), logID).Scan(&first)
		if store.IsNoRows(err) {
			return core.Conflict("log %s is not open", logID)
		}
		if err != nil {
			return err
		}
		var seq int64
		if err := tx.QueryRow(ctx, `SELECT MAX(seq) FROM log_chunks WHERE log_id = ?`, logID).Scan(&seq); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO log_chunks (log_id, seq, data) VALUES (?, ?, ?)`, logID, seq+1, data); err != nil {
			return fmt.Errorf("appending to log %s: %w", logID, err)
		}
		return nil
	})
}

func (s *Service) chunks(ctx context.Context, q store.Q, logID string) ([]byte, bool, error) {
	rows, err := q.Query(ctx, `SELECT data FROM log_chunks WHERE log_id = ? ORDER BY seq`, logID)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var buf bytes.Buffer
	found := false
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, false, err
		}
		buf.Write(b)
		found = true
	}
	return buf.Bytes(), found, rows.Err()
}

// endLog closes a log: ETX, then the whole log moves to the blob store.
func (s *Service) endLog(ctx context.Context, logID string, tail string) error {
	if err := s.foldLog(ctx, logID, tail); err != nil {
		return err
	}
	return dropChunks(ctx, s.DB, logID)
}

// foldLog writes a log's chunks, tail and ETX to the blob store: the first
// half of endLog. The log is closed once dropChunks removes the chunks
// (until then reads serve the chunks); a phase's report does that in the
// transaction that records its outcome, which saves a transaction.
func (s *Service) foldLog(ctx context.Context, logID string, tail string) error {
	data, found, err := s.chunks(ctx, s.DB, logID)
	if err != nil {
		return err
	}
	if !found {
		data = []byte(stx)
	}
	data = append(data, tail...)
	data = append(data, etx...)
	return s.Blobs.Put(ctx, logKey(logID), data)
}

// dropChunks removes a folded log's chunks: reads then serve the blob.
func dropChunks(ctx context.Context, q store.Q, logID string) error {
	_, err := q.Exec(ctx, `DELETE FROM log_chunks WHERE log_id = ?`, logID)
	return err
}

// appendToEndedLog adds text before the ETX of a log endLog has folded.
func (s *Service) appendToEndedLog(ctx context.Context, logID, text string) error {
	data, err := s.Blobs.Get(ctx, logKey(logID))
	if err != nil {
		return err
	}
	data = append(bytes.TrimSuffix(data, []byte(etx)), text...)
	return s.Blobs.Put(ctx, logKey(logID), append(data, etx...))
}

// ReadLog returns up to limit bytes of a phase's log from offset.
func (s *Service) ReadLog(ctx context.Context, logID string, offset, limit int64) ([]byte, error) {
	data, found, err := s.chunks(ctx, s.DB, logID)
	if err != nil {
		return nil, err
	}
	if !found {
		data, err = s.Blobs.Get(ctx, logKey(logID))
		if core.KindOf(err) == core.KindNotFound {
			data, err = nil, nil // not started yet
		}
		if err != nil {
			return nil, err
		}
	}
	if offset >= int64(len(data)) {
		return nil, nil
	}
	end := int64(len(data))
	if limit > 0 && offset+limit < end {
		end = offset + limit
	}
	return data[offset:end], nil
}
