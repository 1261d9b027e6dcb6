package seal

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Re-encryption moves every sealed value to a new data key, online:
//
//  1. Target returns the data key to re-seal under: a new one (wrapped by
//     the KEK that wraps the newest existing key), or, when an earlier
//     re-encryption did not finish, the one it made, so that running the
//     command again resumes it.
//  2. Reseal (columns) and the blob store's Reseal (blobs) re-seal every
//     value not sealed under it, in small batches; a column value is
//     replaced only if it is still the one read (compare and swap), so a
//     server writing at the same time is never overwritten.
//  3. Finish records that the target's re-encryption is complete.
//
// Running servers open values sealed under the new key by loading it on
// first sight (Keyring.key) and from then on seal under it too. Old data
// keys stay in seal_data_keys: a value a server sealed under an old key
// while the walk ran is re-sealed by the next re-encryption.

func reencryptName(id string) string { return "reencrypt " + id }

// Target makes the data key a re-encryption seals under the active one
// and returns its id; resumed is true when it is the unfinished target of
// an earlier run.
func (k *Keyring) Target(ctx context.Context, db *store.DB) (id string, resumed bool, err error) {
	rows, err := dataKeys(ctx, db)
	if err != nil {
		return "", false, err
	}
	if len(rows) == 0 {
		return "", false, fmt.Errorf("the database holds no data keys yet: start the server once first")
	}
	newest := rows[len(rows)-1]
	started, err := Done(ctx, db, "started "+reencryptName(newest.id))
	if err != nil {
		return "", false, err
	}
	finished, err := Done(ctx, db, reencryptName(newest.id))
	if err != nil {
		return "", false, err
	}
	if started && !finished {
		k.mu.Lock()
		defer k.mu.Unlock()
		return newest.id, true, k.add(rows)
	}
	// The KEK that wraps the newest key wraps the new one.
	var kek *KEK
	for i := range k.keks {
		if k.keks[i].ID == newest.kekID {
			kek = &k.keks[i]
		}
	}
	if kek == nil {
		return "", false, fmt.Errorf("wrong key-encryption key: data key %s is wrapped with key %s", newest.id, newest.kekID)
	}
	next := 0
	for _, r := range rows {
		if n, err := strconv.Atoi(strings.TrimPrefix(r.id, "dk")); err == nil && n > next {
			next = n
		}
	}
	id = "dk" + strconv.Itoa(next+1)
	dk := make([]byte, 32)
	if _, err := rand.Read(dk); err != nil {
		return "", false, err
	}
	wrapped, err := wrap(*kek, id, dk)
	if err != nil {
		return "", false, err
	}
	err = db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO seal_data_keys (id, wrapped, kek_id, created_at) VALUES (?, ?, ?, ?)`,
			id, wrapped, kek.ID, core.Micros(core.Now())); err != nil {
			return fmt.Errorf("storing the new data key: %w", err)
		}
		return MarkDone(ctx, tx, "started "+reencryptName(id))
	})
	if err != nil {
		return "", false, err
	}
	if rows, err = dataKeys(ctx, db); err != nil {
		return "", false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.add(rows); err != nil {
		return "", false, err
	}
	if k.active != id {
		return "", false, fmt.Errorf("a data key newer than %s appeared meanwhile (another re-encryption?); run the command again", id)
	}
	return id, false, nil
}

// Finish records that the re-encryption to id is complete.
func Finish(ctx context.Context, db *store.DB, id string) error {
	return MarkDone(ctx, db, reencryptName(id))
}

// reencryptBatch is how many rows one transaction re-seals.
const reencryptBatch = 200

// Reseal re-seals every sealed value of cols that is not sealed under
// the active data key, and returns how many it re-sealed. Plain values
// (not sealed yet) are Migrate's and are left alone.
func (k *Keyring) Reseal(ctx context.Context, db *store.DB, cols []Column) (int, error) {
	active, _ := k.current()
	current := stringPrefix + active + "."
	total := 0
	for _, c := range cols {
		after := ""
		for {
			type row struct{ id, v string }
			rows, err := store.All(ctx, db, func(sc store.Scanner) (row, error) {
				var r row
				err := sc.Scan(&r.id, &r.v)
				return r, err
			}, `SELECT `+c.IDColumn+`, `+c.Column+` FROM `+c.Table+` WHERE `+c.IDColumn+` > ? AND `+c.Column+` LIKE ? AND `+c.Column+` NOT LIKE ? ORDER BY `+c.IDColumn+` LIMIT `+strconv.Itoa(reencryptBatch),
				after, stringPrefix+"%", current+"%")
			if err != nil {
				return total, fmt.Errorf("re-sealing %s.%s: %w", c.Table, c.Column, err)
			}
			if len(rows) == 0 {
				break
			}
			err = db.Tx(ctx, func(tx *store.Tx) error {
				for _, r := range rows {
					plain, err := k.OpenString(c.Purpose, r.v)
					if err != nil {
						return fmt.Errorf("row %s: %w", r.id, err)
					}
					sealed, err := k.SealString(c.Purpose, plain)
					if err != nil {
						return err
					}
					// Only if nobody changed it since it was read.
					res, err := tx.Exec(ctx, `UPDATE `+c.Table+` SET `+c.Column+` = ? WHERE `+c.IDColumn+` = ? AND `+c.Column+` = ?`, sealed, r.id, r.v)
					if err != nil {
						return err
					}
					if n, _ := res.RowsAffected(); n > 0 {
						total++
					}
				}
				return nil
			})
			if err != nil {
				return total, fmt.Errorf("re-sealing %s.%s: %w", c.Table, c.Column, err)
			}
			after = rows[len(rows)-1].id
		}
	}
	return total, nil
}

// KeyID returns the data key a sealed value (a string sealed by
// SealString, or a blob's first bytes) is sealed under; ok is false for a
// plain value.
func KeyID(v []byte) (id string, ok bool) {
	if IsSealedHeader(v) {
		if len(v) <= len(Magic) || len(v) < len(Magic)+1+int(v[len(Magic)]) {
			return "", false
		}
		return string(v[len(Magic)+1 : len(Magic)+1+int(v[len(Magic)])]), true
	}
	s := string(v)
	if !strings.HasPrefix(s, stringPrefix) {
		return "", false
	}
	id, _, ok = strings.Cut(strings.TrimPrefix(s, stringPrefix), ".")
	return id, ok
}

// Active is the id of the data key new values are sealed under.
func (k *Keyring) Active() string {
	id, _ := k.current()
	return id
}
