package seal

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The stream format of a sealed blob:
//
//	magic (8 bytes) | len(key id) (1 byte) | key id | nonce prefix (7 bytes)
//	chunk 0 | chunk 1 | … | final chunk
//
// Each chunk seals up to ChunkSize bytes of plaintext (AES-GCM, 16-byte
// tag) with the nonce prefix || big-endian chunk counter (4 bytes) || 1
// for the final chunk, 0 otherwise, and the header as additional data;
// so chunks cannot be reordered, dropped or cut off at the end. Empty
// plaintext is one empty final chunk. The magic starts with 0x89, which
// begins neither JSON, gzip nor UTF-8 text, so a blob written before
// encryption at rest is told apart.
const (
	Magic     = "\x89TSB1\r\n\x00"
	ChunkSize = 64 << 10
	tagSize   = 16
)

func header(id string, prefix []byte) []byte {
	h := make([]byte, 0, len(Magic)+1+len(id)+len(prefix))
	h = append(h, Magic...)
	h = append(h, byte(len(id)))
	h = append(h, id...)
	return append(h, prefix...)
}

func chunkNonce(prefix []byte, n uint32, final bool) []byte {
	nonce := make([]byte, 12)
	copy(nonce, prefix)
	binary.BigEndian.PutUint32(nonce[7:], n)
	if final {
		nonce[11] = 1
	}
	return nonce
}

// SealWriter returns a writer that seals what is written to it into w;
// Close writes the final chunk (it does not close w).
func (k *Keyring) SealWriter(w io.Writer) (io.WriteCloser, error) {
	id, aead := k.current()
	prefix := make([]byte, 7)
	if _, err := rand.Read(prefix); err != nil {
		return nil, err
	}
	h := header(id, prefix)
	if _, err := w.Write(h); err != nil {
		return nil, err
	}
	return &sealWriter{w: w, aead: aead, ad: h, prefix: prefix, buf: make([]byte, 0, ChunkSize)}, nil
}

type sealWriter struct {
	w      io.Writer
	aead   cipher.AEAD
	ad     []byte
	prefix []byte
	n      uint32
	buf    []byte
	out    []byte
	closed bool
}

func (s *sealWriter) Write(p []byte) (int, error) {
	if s.closed {
		return 0, errors.New("write after close")
	}
	written := 0
	for len(p) > 0 {
		// A full buffer is flushed only once more data arrives, so the
		// last chunk is always the one Close marks final.
		if len(s.buf) == ChunkSize {
			if err := s.flush(false); err != nil {
				return written, err
			}
		}
		c := copy(s.buf[len(s.buf):ChunkSize], p)
		s.buf = s.buf[:len(s.buf)+c]
		p = p[c:]
		written += c
	}
	return written, nil
}

func (s *sealWriter) flush(final bool) error {
	if s.n == ^uint32(0) {
		return errors.New("blob too large to seal")
	}
	s.out = s.aead.Seal(s.out[:0], chunkNonce(s.prefix, s.n, final), s.buf, s.ad)
	s.n++
	s.buf = s.buf[:0]
	_, err := s.w.Write(s.out)
	return err
}

func (s *sealWriter) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.flush(true)
}

// IsSealedHeader reports whether b (the first bytes of a blob) starts with
// the sealed-blob magic.
func IsSealedHeader(b []byte) bool { return bytes.HasPrefix(b, []byte(Magic)) }

// OpenReader reads a sealed blob from r and returns its plaintext as a
// stream; the header must be complete. A damaged, truncated or reordered
// blob is an error from Read, never wrong plaintext.
func (k *Keyring) OpenReader(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, ChunkSize+tagSize+1)
	h, err := readHeader(br)
	if err != nil {
		return nil, err
	}
	id := string(h[len(Magic)+1 : len(h)-7])
	aead, err := k.key(id)
	if err != nil {
		return nil, err
	}
	return &openReader{r: br, aead: aead, ad: h, prefix: h[len(h)-7:], in: make([]byte, ChunkSize+tagSize)}, nil
}

func readHeader(br *bufio.Reader) ([]byte, error) {
	fixed := make([]byte, len(Magic)+1)
	if _, err := io.ReadFull(br, fixed); err != nil {
		return nil, fmt.Errorf("reading sealed blob header: %w", err)
	}
	if !IsSealedHeader(fixed) {
		return nil, errors.New("not a sealed blob")
	}
	rest := make([]byte, int(fixed[len(Magic)])+7)
	if _, err := io.ReadFull(br, rest); err != nil {
		return nil, fmt.Errorf("reading sealed blob header: %w", err)
	}
	return append(fixed, rest...), nil
}

// HeaderSize is the size of a sealed blob's header read from its first
// bytes (at least len(Magic)+1 of them).
func HeaderSize(first []byte) int { return len(Magic) + 1 + int(first[len(Magic)]) + 7 }

// PlainSize is the plaintext size of a sealed blob of size total whose
// header is headerSize bytes, or -1 if total cannot be such a blob.
func PlainSize(total int64, headerSize int) int64 {
	payload := total - int64(headerSize)
	if payload < tagSize {
		return -1
	}
	chunks := (payload + ChunkSize + tagSize - 1) / (ChunkSize + tagSize)
	return payload - chunks*tagSize
}

type openReader struct {
	r      *bufio.Reader
	aead   cipher.AEAD
	ad     []byte
	prefix []byte
	n      uint32
	in     []byte
	plain  []byte
	done   bool
	err    error
}

func (o *openReader) Read(p []byte) (int, error) {
	for len(o.plain) == 0 {
		if o.err != nil {
			return 0, o.err
		}
		if o.done {
			return 0, io.EOF
		}
		o.err = o.next()
	}
	c := copy(p, o.plain)
	o.plain = o.plain[c:]
	return c, nil
}

func (o *openReader) next() error {
	m, err := io.ReadFull(o.r, o.in)
	final := false
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		final = true
	case err != nil:
		return err
	default:
		if _, perr := o.r.Peek(1); perr == io.EOF {
			final = true
		} else if perr != nil {
			return perr
		}
	}
	pt, oerr := o.aead.Open(o.in[:0], chunkNonce(o.prefix, o.n, final), o.in[:m], o.ad)
	if oerr != nil {
		return errors.New("sealed blob is damaged or truncated")
	}
	o.n++
	o.plain = pt
	o.done = final
	return nil
}

// SealBytes seals b in the stream format.
func (k *Keyring) SealBytes(b []byte) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/ChunkSize*tagSize + 64)
	w, err := k.SealWriter(&out)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// OpenBytes opens a whole sealed blob.
func (k *Keyring) OpenBytes(b []byte) ([]byte, error) {
	r, err := k.OpenReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
