// Package seal encrypts Terrace's secrets at rest: sensitive column values
// (variables, SSH keys, notification tokens) and blobs (state, plans,
// configuration archives, logs).
//
// It is envelope encryption. Values are sealed with AES-256-GCM under a
// data key; data keys live in the seal_data_keys table, each wrapped
// (AES-256-GCM) by the key-encryption key (KEK), which never touches the
// database: it comes from --kek / TERRACE_KEK / TERRACE_KEK_FILE or is
// generated into <data-dir>/kek (mode 0600) on the first start. Rotating
// the KEK (Rotate, `terrace keys rotate`) re-wraps the data keys only, so
// running servers, which hold the unwrapped data keys in memory, carry on.
//
// The API for a domain that keeps a secret in a TEXT column:
//
//	sealed, err := keyring.SealString(purpose, plaintext) // before INSERT/UPDATE
//	plain, err := keyring.OpenString(purpose, sealed)     // after SELECT
//
// purpose names the column ("variables.value") and is bound into the
// ciphertext, so a value copied into another column does not open. A
// domain declares its sealed columns as Column values; the server passes
// them to Keyring.Migrate at start, which seals rows written before
// encryption at rest existed. Blobs use SealWriter and OpenReader (a
// chunked stream format, so large state files stream).
package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// KEK is a key-encryption key: 32 bytes.
type KEK struct {
	key []byte
	// ID is a fingerprint of the key (not the key), recorded beside each
	// data key it wraps so a mismatch can be named.
	ID string
}

// ParseKEK reads a key written as base64 (standard or URL alphabet) or
// hex; it must decode to 32 bytes.
func ParseKEK(s string) (KEK, error) {
	s = strings.TrimSpace(s)
	var b []byte
	for _, dec := range []func(string) ([]byte, error){base64.StdEncoding.DecodeString, base64.URLEncoding.DecodeString, base64.RawStdEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString} {
		if d, err := dec(s); err == nil && len(d) == 32 {
			b = d
			break
		}
	}
	if b == nil {
		return KEK{}, errors.New("the key-encryption key must be 32 bytes written as base64 or hex (e.g. `openssl rand -base64 32`)")
	}
	return newKEK(b), nil
}

func newKEK(b []byte) KEK {
	sum := sha256.Sum256(append([]byte("terrace key-encryption key id\x00"), b...))
	return KEK{key: b, ID: hex.EncodeToString(sum[:8])}
}

// GenerateKEK returns a new random key.
func GenerateKEK() KEK {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return newKEK(b)
}

// String is the key as base64, for writing it to a file.
func (k KEK) String() string { return base64.StdEncoding.EncodeToString(k.key) }

// KEKFile is the key's file in a data dir, and KEKNextFile the one
// `terrace keys rotate` writes before it re-wraps the data keys (renamed
// over KEKFile afterwards; Open tries both, so a rotation interrupted
// between the two steps still starts).
const (
	KEKFile     = "kek"
	KEKNextFile = "kek.next"
)

// ReadKEKFile reads a key file; a missing file is os.ErrNotExist.
func ReadKEKFile(path string) (KEK, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return KEK{}, err
	}
	k, err := ParseKEK(string(b))
	if err != nil {
		return KEK{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// WriteKEKFile writes k to path with mode 0600, atomically and durably:
// the data keys it wraps are committed to the database right after, so a
// key file lost to a power failure would leave every sealed value
// unreadable.
func WriteKEKFile(path string, k KEK) error {
	return core.WriteFileAtomic(path, []byte(k.String()+"\n"), 0o600)
}

// Keyring holds the unwrapped data keys. It is safe for concurrent use.
// A nil *Keyring seals nothing: SealString and OpenString pass values
// through (for unit tests of domains that build services without a
// server); the server always has one.
type Keyring struct {
	mu     sync.RWMutex
	keys   map[string]cipher.AEAD
	active string
	// db and keks let the keyring load a data key added after it was
	// opened (by `terrace keys reencrypt` while servers run).
	db   *store.DB
	keks []KEK
}

const dataKeyID = "dk1"

// Source says where the KEK comes from, for Open.
type Source struct {
	// Configured is the key given by flag or environment ("" for none).
	Configured string
	// DataDir is where a key is generated on the first start (when
	// Configured is empty) and looked for afterwards.
	DataDir string
}

// Load returns the keys Open may use: the configured one, or those in
// the data dir. created is true when a new key was generated (only when
// the database holds no data key yet).
func (src Source) load(hasDataKeys bool) (keks []KEK, created bool, err error) {
	if src.Configured != "" {
		k, err := ParseKEK(src.Configured)
		if err != nil {
			return nil, false, fmt.Errorf("--kek / TERRACE_KEK: %w", err)
		}
		return []KEK{k}, false, nil
	}
	for _, name := range []string{KEKFile, KEKNextFile} {
		k, err := ReadKEKFile(filepath.Join(src.DataDir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		keks = append(keks, k)
	}
	if len(keks) > 0 {
		return keks, false, nil
	}
	if hasDataKeys {
		return nil, false, fmt.Errorf("missing key-encryption key: the database holds encrypted data keys but no key was given (--kek, TERRACE_KEK or TERRACE_KEK_FILE) and %s does not exist; start with the key this database was created with", filepath.Join(src.DataDir, KEKFile))
	}
	k := GenerateKEK()
	if err := os.MkdirAll(src.DataDir, 0o700); err != nil {
		return nil, false, err
	}
	if err := WriteKEKFile(filepath.Join(src.DataDir, KEKFile), k); err != nil {
		return nil, false, fmt.Errorf("writing the generated key-encryption key: %w", err)
	}
	return []KEK{k}, true, nil
}

type dataKeyRow struct {
	id, wrapped, kekID string
}

func dataKeys(ctx context.Context, q store.Q) ([]dataKeyRow, error) {
	return store.All(ctx, q, func(sc store.Scanner) (dataKeyRow, error) {
		var r dataKeyRow
		err := sc.Scan(&r.id, &r.wrapped, &r.kekID)
		return r, err
	}, `SELECT id, wrapped, kek_id FROM seal_data_keys ORDER BY created_at, id`)
}

// Open loads the data keys from db, unwrapping them with the KEK from src;
// on the first start it creates the data key (and, without a configured
// KEK, generates one into the data dir). A KEK that does not open the
// stored data keys, or a missing one, is an error saying so.
func Open(ctx context.Context, db *store.DB, src Source) (*Keyring, error) {
	rows, err := dataKeys(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("reading data keys: %w", err)
	}
	keks, _, err := src.load(len(rows) > 0)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		dk := make([]byte, 32)
		_, _ = rand.Read(dk)
		wrapped, err := wrap(keks[0], dataKeyID, dk)
		if err != nil {
			return nil, err
		}
		// Replicas starting together: the first insert wins, the others
		// read it back below.
		if _, err := db.Exec(ctx, `INSERT INTO seal_data_keys (id, wrapped, kek_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			dataKeyID, wrapped, keks[0].ID, core.Micros(core.Now())); err != nil {
			return nil, fmt.Errorf("storing the data key: %w", err)
		}
		if rows, err = dataKeys(ctx, db); err != nil {
			return nil, fmt.Errorf("reading data keys: %w", err)
		}
	}
	k := &Keyring{keys: map[string]cipher.AEAD{}, db: db, keks: keks}
	if err := k.add(rows); err != nil {
		return nil, err
	}
	return k, nil
}

// add unwraps the data keys of rows it does not hold yet; the newest
// (rows are in creation order) becomes the active one. The caller holds
// k.mu or owns k alone.
func (k *Keyring) add(rows []dataKeyRow) error {
	for _, r := range rows {
		if _, ok := k.keys[r.id]; !ok {
			dk, err := unwrapAny(k.keks, r)
			if err != nil {
				return err
			}
			aead, err := newAEAD(dk)
			if err != nil {
				return err
			}
			k.keys[r.id] = aead
		}
		k.active = r.id
	}
	return nil
}

// reload reads data keys added since the keyring was opened.
func (k *Keyring) reload() error {
	if k.db == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := dataKeys(ctx, k.db)
	if err != nil {
		return fmt.Errorf("reading data keys: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.add(rows)
}

func unwrapAny(keks []KEK, r dataKeyRow) ([]byte, error) {
	var ids []string
	for _, kek := range keks {
		ids = append(ids, kek.ID)
		if kek.ID != r.kekID {
			continue
		}
		dk, err := unwrap(kek, r.id, r.wrapped)
		if err != nil {
			return nil, fmt.Errorf("wrong key-encryption key: data key %s does not open with key %s (the stored data key is damaged, or a different key has the same fingerprint)", r.id, kek.ID)
		}
		return dk, nil
	}
	return nil, fmt.Errorf("wrong key-encryption key: data key %s was wrapped with key %s but Terrace was started with key %s; start it with the key-encryption key it used before (--kek, TERRACE_KEK or TERRACE_KEK_FILE, or <data-dir>/%s)", r.id, r.kekID, strings.Join(ids, ", "), KEKFile)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func wrap(kek KEK, id string, dk []byte) (string, error) {
	aead, err := newAEAD(kek.key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, dk, []byte("terrace data key "+id))), nil
}

func unwrap(kek KEK, id, wrapped string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(wrapped)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(kek.key)
	if err != nil {
		return nil, err
	}
	if len(b) < aead.NonceSize() {
		return nil, errors.New("wrapped data key too short")
	}
	return aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte("terrace data key "+id))
}

// Rotate re-wraps every data key that old opens under next, in one
// transaction, and returns how many it re-wrapped. Data keys and the data
// they seal do not change, so servers already running are unaffected;
// each server must be given next when it next starts.
func Rotate(ctx context.Context, db *store.DB, old, next KEK) (int, error) {
	n := 0
	err := db.Tx(ctx, func(tx *store.Tx) error {
		n = 0
		rows, err := dataKeys(ctx, tx)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return errors.New("the database holds no data keys yet: start the server once first")
		}
		for _, r := range rows {
			if r.kekID == next.ID {
				continue // already rotated (a repeated command)
			}
			dk, err := unwrapAny([]KEK{old}, r)
			if err != nil {
				return err
			}
			w, err := wrap(next, r.id, dk)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE seal_data_keys SET wrapped = ?, kek_id = ? WHERE id = ?`, w, next.ID, r.id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// KEKIDs returns the fingerprint of the KEK each data key is wrapped with.
func KEKIDs(ctx context.Context, db *store.DB) (map[string]string, error) {
	rows, err := dataKeys(ctx, db)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.id] = r.kekID
	}
	return out, nil
}

func (k *Keyring) key(id string) (cipher.AEAD, error) {
	k.mu.RLock()
	a, ok := k.keys[id]
	k.mu.RUnlock()
	if ok {
		return a, nil
	}
	// Sealed under a data key added since this keyring was opened (a
	// re-encryption running beside this server): load it, and seal under
	// it from now on too.
	if err := k.reload(); err != nil {
		return nil, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if a, ok = k.keys[id]; !ok {
		return nil, fmt.Errorf("sealed with unknown data key %q", id)
	}
	return a, nil
}

func (k *Keyring) current() (string, cipher.AEAD) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.active, k.keys[k.active]
}

// stringPrefix starts every sealed string: "tsl1." + data key id + "." +
// base64url(nonce || ciphertext).
const stringPrefix = "tsl1."

// SealString seals plain for the column named by purpose.
func (k *Keyring) SealString(purpose, plain string) (string, error) {
	if k == nil {
		return plain, nil
	}
	id, aead := k.current()
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	ct := aead.Seal(nonce, nonce, []byte(plain), []byte(purpose))
	return stringPrefix + id + "." + base64.RawURLEncoding.EncodeToString(ct), nil
}

// OpenString opens a value sealed by SealString for the same purpose. A
// value without the sealed prefix is returned as it is: a row written
// before encryption at rest, which Migrate seals at the next start.
func (k *Keyring) OpenString(purpose, s string) (string, error) {
	if k == nil || !strings.HasPrefix(s, stringPrefix) {
		return s, nil
	}
	b, err := k.openString(purpose, s)
	if err != nil {
		return "", fmt.Errorf("opening sealed %s: %w", purpose, err)
	}
	return string(b), nil
}

func (k *Keyring) openString(purpose, s string) ([]byte, error) {
	id, body, ok := strings.Cut(strings.TrimPrefix(s, stringPrefix), ".")
	if !ok {
		return nil, errors.New("malformed sealed value")
	}
	aead, err := k.key(id)
	if err != nil {
		return nil, err
	}
	ct, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(ct) < aead.NonceSize() {
		return nil, errors.New("malformed sealed value")
	}
	pt, err := aead.Open(nil, ct[:aead.NonceSize()], ct[aead.NonceSize():], []byte(purpose))
	if err != nil {
		return nil, errors.New("the value does not open with its data key (damaged or moved from another column)")
	}
	return pt, nil
}

// IsSealed reports whether s opens as a value sealed for purpose.
func (k *Keyring) IsSealed(purpose, s string) bool {
	if !strings.HasPrefix(s, stringPrefix) {
		return false
	}
	_, err := k.openString(purpose, s)
	return err == nil
}

// Column is a TEXT column whose values a domain seals: Migrate seals the
// rows written before encryption at rest existed.
type Column struct {
	Table, IDColumn, Column string
	// Purpose is what the domain passes to SealString and OpenString.
	Purpose string
}

// Migrate seals every value of cols that is not sealed yet, once: a row
// in seal_migrations records that it is done. Each column is converted in
// its own transaction.
func (k *Keyring) Migrate(ctx context.Context, db *store.DB, cols []Column) (int, error) {
	total := 0
	sort.Slice(cols, func(i, j int) bool { return cols[i].Purpose < cols[j].Purpose })
	for _, c := range cols {
		name := "column " + c.Purpose
		var n int
		err := db.Tx(ctx, func(tx *store.Tx) error {
			n = 0
			if done, err := Done(ctx, tx, name); err != nil || done {
				return err
			}
			type row struct{ id, v string }
			rows, err := store.All(ctx, tx, func(sc store.Scanner) (row, error) {
				var r row
				err := sc.Scan(&r.id, &r.v)
				return r, err
			}, `SELECT `+c.IDColumn+`, `+c.Column+` FROM `+c.Table+` WHERE `+c.Column+` IS NOT NULL`+store.ForUpdate(tx))
			if err != nil {
				return err
			}
			for _, r := range rows {
				if k.IsSealed(c.Purpose, r.v) {
					continue
				}
				sealed, err := k.SealString(c.Purpose, r.v)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE `+c.Table+` SET `+c.Column+` = ? WHERE `+c.IDColumn+` = ?`, sealed, r.id); err != nil {
					return err
				}
				n++
			}
			return MarkDone(ctx, tx, name)
		})
		if err != nil {
			return total, fmt.Errorf("sealing %s.%s: %w", c.Table, c.Column, err)
		}
		total += n
	}
	return total, nil
}

// Done reports whether the one-off conversion name has run, and MarkDone
// records that it has.
func Done(ctx context.Context, q store.Q, name string) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM seal_migrations WHERE name = ?`, name).Scan(&n)
	return n > 0, err
}

// MarkDone records that the conversion name has run.
func MarkDone(ctx context.Context, q store.Q, name string) error {
	_, err := q.Exec(ctx, `INSERT INTO seal_migrations (name, done_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, core.Micros(core.Now()))
	return err
}
