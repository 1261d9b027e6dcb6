package run

import (
	"bytes"
	"context"
	"database/sql"
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
		if err := dropChunks(ctx, q, logID); err != nil { // what an earlier attempt left
			return err
		}
	}
	w := openLog(logID)
	_, err := q.Exec(ctx, w.sql, w.args...)
	return err
}

// openLog is the write that opens a log: its first chunk, the STX.
func openLog(logID string) write {
	return write{`INSERT INTO log_chunks (log_id, seq, data) VALUES (?, 0, ?)`, []any{logID, []byte(stx)}}
}

// pgNextSeq and pgAppendChunk are AppendLog's statement on PostgreSQL, as
// parts of a WITH (arguments: the log ID twice, then the log ID and the
// data). GREATEST with the last chunk there: a replica of the version
// before last_seq (a rolling upgrade) appends without moving it.
const (
	pgNextSeq = `n AS (UPDATE log_chunks SET last_seq = GREATEST(last_seq, (SELECT MAX(c.seq) FROM log_chunks c WHERE c.log_id = ?)) + 1
		WHERE log_id = ? AND seq = 0 RETURNING last_seq)`
	pgAppendChunk = `INSERT INTO log_chunks (log_id, seq, data) SELECT ?, last_seq, ? FROM n`
)

// AppendLog adds output to a running phase's log, in one statement (a
// round trip on the critical path: a runner's last chunk comes just
// before its report). Appends to one log are serialized: on PostgreSQL
// the statement takes the next sequence number from the log's first
// chunk (the STX every open log has, its last_seq column), whose row lock
// makes racing writers wait for each other and whose re-read after the
// wait gives each its own number; SQLite runs one write at a time, so
// MAX(seq) read in the same statement is the last one.
func (s *Service) AppendLog(ctx context.Context, logID string, data []byte) error {
	return s.appendLog(ctx, s.DB, logID, data)
}

// AppendLogIn is AppendLog inside q's transaction: the end of a log that
// commits with the status that ends its run (a module test run's), so
// that a reader who sees the status reads the end too; CloseLog folds the
// log after the commit.
func (s *Service) AppendLogIn(ctx context.Context, q store.Q, logID string, data []byte) error {
	return s.appendLog(ctx, q, logID, data)
}

func (s *Service) appendLog(ctx context.Context, q store.Q, logID string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	var res sql.Result
	var err error
	if s.DB.Driver().Name() == "postgres" {
		res, err = q.Exec(ctx, `WITH `+pgNextSeq+` `+pgAppendChunk, logID, logID, logID, data)
	} else {
		res, err = q.Exec(ctx, `INSERT INTO log_chunks (log_id, seq, data)
			SELECT ?, (SELECT MAX(seq) FROM log_chunks WHERE log_id = ?) + 1, ? WHERE EXISTS (SELECT 1 FROM log_chunks WHERE log_id = ? AND seq = 0)`,
			logID, logID, data, logID)
	}
	if err != nil {
		return fmt.Errorf("appending to log %s: %w", logID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return core.Conflict("log %s is not open", logID)
	}
	return nil
}

func (s *Service) chunks(ctx context.Context, q store.Q, logID string) ([]byte, bool, error) {
	return s.chunksOf(ctx, q, `SELECT data FROM log_chunks WHERE log_id = ? ORDER BY seq`, logID)
}

// chunksOf concatenates the chunks query returns (found: there was one).
func (s *Service) chunksOf(ctx context.Context, q store.Q, query string, args ...any) ([]byte, bool, error) {
	rows, err := q.Query(ctx, query, args...)
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
//
// The tail (the end of the output, which comes with the report) is also
// appended to the chunks first, so that readers of the running log have
// it before the phase's outcome is committed: go-tfe's log reader, after
// ten reads with nothing new, asks whether the phase is done and stops
// if it is, so output that reached readers only with the folded blob
// could be lost to a reader whose empty read came just before the
// outcome (terraform's apply output was, under load). On PostgreSQL the
// append and the read of the chunks before it are one statement.
func (s *Service) foldLog(ctx context.Context, logID string, tail string) error {
	var data []byte
	var found bool
	var err error
	switch {
	case tail == "":
		data, found, err = s.chunks(ctx, s.DB, logID)
	case s.DB.Driver().Name() == "postgres":
		// The SELECT sees the statement's snapshot: the chunks before
		// the tail's.
		data, found, err = s.chunksOf(ctx, s.DB, `WITH `+pgNextSeq+`, tail AS (`+pgAppendChunk+`)
			SELECT data FROM log_chunks WHERE log_id = ? ORDER BY seq`, logID, logID, logID, []byte(tail), logID)
	default:
		if data, found, err = s.chunks(ctx, s.DB, logID); err == nil && found {
			err = s.AppendLog(ctx, logID, []byte(tail))
		}
	}
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

// dropChunks removes a log's chunks: a folded log's (reads then serve the
// blob), or what an earlier attempt left of a log opened again.
func dropChunks(ctx context.Context, q store.Q, logID string) error {
	w := dropLog(logID)
	_, err := q.Exec(ctx, w.sql, w.args...)
	return err
}

// dropLog is dropChunks as a write that goes with a run's (a report's
// outcome).
func dropLog(logID string) write {
	return write{`DELETE FROM log_chunks WHERE log_id = ?`, []any{logID}}
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

// OpenLog opens a log that is not a run phase's (a module test run's,
// internal/moduletest) inside q's transaction: its readers get STX until
// output comes. AppendLog adds to it, CloseLog ends it, ReadLog and the
// capability URL of /logs/{id} serve it.
func (s *Service) OpenLog(ctx context.Context, q store.Q, logID string) error {
	return s.startLog(ctx, q, logID, true)
}

// CloseLog ends a log OpenLog opened, whose last output AppendLogIn wrote
// with its run's final status: ETX, and the whole log moves to the blob
// store.
func (s *Service) CloseLog(ctx context.Context, logID string) error {
	return s.endLog(ctx, logID, "")
}

// DeleteLogs removes, inside q's transaction, the logs whose IDs idsSQL
// selects (a column named id: another domain's logs, a deleted module's
// test runs): their chunks at once, their blobs through the run ledger
// (run_garbage, swept later, so a rolled-back deletion loses nothing).
// (SQLite needs the WHERE of an INSERT … SELECT … ON CONFLICT: its
// parser would read ON as a join's.)
func DeleteLogs(ctx context.Context, q store.Q, idsSQL string, args ...any) error {
	if _, err := q.Exec(ctx, `INSERT INTO run_garbage (blob_key, not_before) SELECT 'logs/' || x.id, ? FROM (`+idsSQL+`) x WHERE true ON CONFLICT (blob_key) DO NOTHING`,
		append([]any{core.Micros(core.Now())}, args...)...); err != nil {
		return fmt.Errorf("deleting logs: %w", err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM log_chunks WHERE log_id IN (`+idsSQL+`)`, args...); err != nil {
		return fmt.Errorf("deleting logs: %w", err)
	}
	return nil
}
