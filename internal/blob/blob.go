// Package blob keeps large opaque objects (state files, configuration
// archives, logs) behind one interface: a folder on disk by default or an
// S3-compatible bucket, both through gocloud.dev/blob. Writes are atomic:
// a reader sees the whole object or none of it.
//
// It also signs capability URLs: expiring, HMAC-signed paths that let a
// client upload or download one object without an Authorization header.
package blob

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob" // registers s3://
	"gocloud.dev/gcerrors"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
)

// Store holds blobs.
type Store struct {
	b *blob.Bucket
	// dir is the folder of a local store ("" for S3): its writes are
	// synced to disk before they count as done (durable).
	dir string
	// keys seals every blob written and opens sealed blobs read (nil:
	// blobs are stored as given). Set once by Seal before use.
	keys *seal.Keyring
}

// Seal makes the store encrypt every blob it writes with keys, and open
// the sealed blobs it reads. Blobs written before (plain) stay readable;
// SealAll converts them. Call it before the store is used.
func (s *Store) Seal(keys *seal.Keyring) { s.keys = keys }

// Open opens the store named by spec: "" or a folder path for local disk,
// or s3://bucket?endpoint=…&region=…&use_path_style=true for S3-compatible
// storage (credentials from the usual AWS environment variables).
func Open(ctx context.Context, spec string) (*Store, error) {
	if strings.HasPrefix(spec, "s3://") {
		bucket, err := blob.OpenBucket(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("opening S3 bucket %s: %w", redact(spec), err)
		}
		return &Store{b: bucket}, nil
	}
	spec = strings.TrimPrefix(spec, "file://")
	if err := os.MkdirAll(spec, 0o700); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(spec)
	if err != nil {
		return nil, err
	}
	// No sidecar: fileblob would write a .attrs file (content type, MD5)
	// beside every blob, which nothing here reads. Blobs written with one
	// before read as they did, and their sidecar goes when they are
	// deleted.
	bucket, err := fileblob.OpenBucket(abs, &fileblob.Options{NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		return nil, fmt.Errorf("opening blob folder %s: %w", abs, err)
	}
	return &Store{b: bucket, dir: abs}, nil
}

func redact(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		return "s3://…"
	}
	u.RawQuery = ""
	return u.String()
}

// Close releases the store.
func (s *Store) Close() error { return s.b.Close() }

// Put writes data under key, replacing any object there.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := s.checkKey(key); err != nil {
		return err
	}
	if s.keys != nil {
		sealed, err := s.keys.SealBytes(data)
		if err != nil {
			return fmt.Errorf("sealing blob %s: %w", key, err)
		}
		data = sealed
	}
	if err := s.b.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("writing blob %s: %w", key, err)
	}
	return s.durable(key)
}

// PutReader streams r under key. More than limit bytes is an error and
// leaves nothing behind (the write is abandoned, not committed).
func (s *Store) PutReader(ctx context.Context, key string, r io.Reader, limit int64) (int64, error) {
	if err := s.checkKey(key); err != nil {
		return 0, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.b.NewWriter(wctx, key, nil)
	if err != nil {
		return 0, fmt.Errorf("writing blob %s: %w", key, err)
	}
	var dst io.Writer = w
	var sw io.WriteCloser
	if s.keys != nil {
		if sw, err = s.keys.SealWriter(w); err != nil {
			cancel()
			_ = w.Close()
			return 0, fmt.Errorf("sealing blob %s: %w", key, err)
		}
		dst = sw
	}
	n, err := io.Copy(dst, io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("upload is larger than the limit of %d bytes", limit)}
	}
	if err != nil {
		cancel() // abandons the write: gocloud discards a writer whose context ended
		_ = w.Close()
		return 0, err
	}
	if sw != nil {
		if err := sw.Close(); err != nil {
			cancel()
			_ = w.Close()
			return 0, fmt.Errorf("sealing blob %s: %w", key, err)
		}
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("writing blob %s: %w", key, err)
	}
	if err := s.durable(key); err != nil {
		return 0, err
	}
	return n, nil
}

// checkKey refuses, before anything is written, a key that a local
// store could not make durable (localKey).
func (s *Store) checkKey(key string) error {
	if s.dir == "" {
		return nil
	}
	if err := localKey(key); err != nil {
		return fmt.Errorf("writing blob %s: %w", key, err)
	}
	return nil
}

// durable makes a blob just written to a local folder survive a crash of
// the machine, and removes a sidecar an earlier write left (below).
// fileblob writes a temporary file and renames it into place without
// syncing either, so after a power loss a state version that the
// database committed could name a file the disk never got (empty, or not
// there). Every writer here stores its blob before the transaction that
// points at it, so syncing before returning is enough: the file's data,
// its name in its folder, and the names of the folders above it up to the
// store's root (fileblob makes a key's folders as needed). An S3 bucket
// has acknowledged a write only once it is durable: nothing to do.
func (s *Store) durable(key string) error {
	if s.dir == "" {
		return nil
	}
	// checkKey let the key in: its file is dir/part/part/…, as fileblob
	// names it.
	parts := append([]string{s.dir}, strings.Split(key, "/")...)
	// A blob written before with fileblob's sidecar (content type, MD5)
	// would keep the old one beside the new content.
	if err := os.Remove(filepath.Join(parts...) + ".attrs"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("writing blob %s: removing its old sidecar: %w", key, err)
	}
	for n := len(parts); n > 0; n-- { // the file, then its folders up to dir
		if err := syncPath(filepath.Join(parts[:n]...)); err != nil {
			return fmt.Errorf("writing blob %s: syncing it to disk: %w", key, err)
		}
	}
	return nil
}

// localKey accepts the keys Terrace makes (IDs and random strings in
// folders): letters, digits, '.', '-' and '_' in '/'-separated parts,
// which fileblob keeps under the same names. fileblob escapes other keys
// into other names, which durable does not follow: they are refused.
func localKey(key string) error {
	for _, part := range strings.Split(key, "/") {
		ok := part != "" && part != "." && part != ".." && !strings.Contains(part, "__")
		for _, c := range part {
			ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_')
		}
		if !ok {
			return fmt.Errorf("the key %q has a part the folder store would escape", key)
		}
	}
	return nil
}

// syncPath flushes a file or folder to disk (a variable for the test that
// makes it fail).
var syncPath = core.SyncPath

// Get reads the whole object at key; a missing object is core.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.b.ReadAll(ctx, key)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, core.NotFound("blob %s not found", key)
		}
		return nil, fmt.Errorf("reading blob %s: %w", key, err)
	}
	if s.keys != nil && seal.IsSealedHeader(b) {
		if b, err = s.keys.OpenBytes(b); err != nil {
			return nil, fmt.Errorf("opening sealed blob %s: %w", key, err)
		}
	}
	return b, nil
}

// Reader opens the object at key for streaming.
func (s *Store) Reader(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	r, err := s.b.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, 0, core.NotFound("blob %s not found", key)
		}
		return nil, 0, fmt.Errorf("reading blob %s: %w", key, err)
	}
	if s.keys == nil {
		return r, r.Size(), nil
	}
	// Tell a sealed blob from a plain one (written before encryption at
	// rest) by its first bytes, then stream the plaintext.
	head := make([]byte, len(seal.Magic)+1)
	m, err := io.ReadFull(r, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		r.Close()
		return nil, 0, fmt.Errorf("reading blob %s: %w", key, err)
	}
	head = head[:m]
	rest := io.MultiReader(bytes.NewReader(head), r)
	if !seal.IsSealedHeader(head) {
		return readCloser{rest, r}, r.Size(), nil
	}
	size := seal.PlainSize(r.Size(), seal.HeaderSize(head))
	pr, err := s.keys.OpenReader(rest)
	if err != nil || size < 0 {
		r.Close()
		return nil, 0, fmt.Errorf("opening sealed blob %s: %w", key, cmp.Or(err, errors.New("bad size")))
	}
	return readCloser{pr, r}, size, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Exists reports whether an object is stored at key.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	return s.b.Exists(ctx, key)
}

// Delete removes the object at key; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.b.Delete(ctx, key)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("deleting blob %s: %w", key, err)
	}
	return nil
}

// SealAll rewrites every plain blob sealed (blobs written before
// encryption at rest) and returns how many it rewrote. Rewrites are
// atomic and keep the plaintext, so readers see the same content before
// and after. Blobs deleted meanwhile are skipped.
func (s *Store) SealAll(ctx context.Context) (int, error) {
	return s.rewrite(ctx, int64(len(seal.Magic)), func(head []byte) bool { return !seal.IsSealedHeader(head) })
}

// Reseal re-seals every blob sealed under a data key other than the
// keyring's active one (a re-encryption, internal/seal), streaming each
// through the keyring; it returns how many it re-sealed. Plain blobs are
// SealAll's.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	if s.keys == nil {
		return 0, errors.New("the blob store has no keys to seal with")
	}
	active := s.keys.Active()
	return s.rewrite(ctx, int64(len(seal.Magic))+256, func(head []byte) bool {
		id, ok := seal.KeyID(head)
		return ok && id != active
	})
}

// rewrite streams every blob whose first n bytes pick it through the
// store again (opening it and sealing it under the active data key) and
// returns how many it rewrote. gocloud commits a write on Close, so
// readers see the old or the new object whole, never a mix; blobs deleted
// meanwhile are skipped.
func (s *Store) rewrite(ctx context.Context, n int64, pick func(head []byte) bool) (int, error) {
	if s.keys == nil {
		return 0, errors.New("the blob store has no keys to seal with")
	}
	done := 0
	it := s.b.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return done, nil
		}
		if err != nil {
			return done, fmt.Errorf("listing blobs: %w", err)
		}
		if obj.IsDir {
			continue
		}
		var head []byte
		r, err := s.b.NewRangeReader(ctx, obj.Key, 0, n, nil)
		if err == nil {
			head, err = io.ReadAll(r)
			r.Close()
		}
		if gcerrors.Code(err) == gcerrors.NotFound {
			continue
		}
		if err != nil {
			return done, fmt.Errorf("reading blob %s: %w", obj.Key, err)
		}
		if !pick(head) {
			continue
		}
		rc, _, err := s.Reader(ctx, obj.Key)
		if core.KindOf(err) == core.KindNotFound {
			continue
		}
		if err != nil {
			return done, err
		}
		_, err = s.PutReader(ctx, obj.Key, rc, 1<<62)
		rc.Close()
		if err != nil {
			return done, fmt.Errorf("rewriting blob %s: %w", obj.Key, err)
		}
		done++
	}
}
