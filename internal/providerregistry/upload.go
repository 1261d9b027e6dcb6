package providerregistry

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// shasumsLine is a line of a SHA256SUMS file as terraform reads it: a
// SHA-256 and a file name, separated by white space (sha256sum's text-mode
// output). terraform takes the name literally: the '*' with which
// sha256sum marks a binary-mode line would be part of it. The SHA-256 is
// 64 digits (checked apart: see core.Pattern).
var shasumsLine = regexp.MustCompile(`^([0-9a-fA-F]+)\s+(\S+)$`)

// parseShasums reads a SHA256SUMS file: filename -> lowercase SHA-256.
func parseShasums(text string) (map[string]string, error) {
	if !utf8.ValidString(text) {
		return nil, invalid("SHA256SUMS is not text")
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 4096), 4096)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := shasumsLine.FindStringSubmatch(line)
		if m == nil || len(m[1]) != 64 {
			return nil, invalid("SHA256SUMS line %d is not \"<sha256>  <filename>\": %.80q", n, line)
		}
		if strings.HasPrefix(m[2], "*") {
			return nil, invalid("SHA256SUMS line %d names %s in binary mode (\"*\"): terraform reads the name with the star and would find no hash for %s; write the file in text mode (sha256sum without -b)", n, m[2], m[2][1:])
		}
		if _, dup := out[m[2]]; dup {
			return nil, invalid("SHA256SUMS lists %s twice", m[2])
		}
		out[m[2]] = strings.ToLower(m[1])
	}
	if err := sc.Err(); err != nil {
		return nil, invalid("SHA256SUMS has a line longer than 4096 bytes")
	}
	if len(out) == 0 {
		return nil, invalid("SHA256SUMS lists no file")
	}
	return out, nil
}

// checkListed checks SHA256SUMS lists the platform's filename with its
// shasum.
func checkListed(sums map[string]string, p *Platform) error {
	sum, ok := sums[p.Filename]
	if !ok {
		return invalid("SHA256SUMS does not list %s, the file of the %s_%s platform", p.Filename, p.OS, p.Arch)
	}
	if sum != strings.ToLower(p.Shasum) {
		return invalid("SHA256SUMS gives %s for %s, but the %s_%s platform's shasum is %s", sum, p.Filename, p.OS, p.Arch, p.Shasum)
	}
	return nil
}

// readLimited reads at most limit bytes of body (413 beyond).
func readLimited(body io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, core.BadRequest("reading the upload: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("%s is larger than the limit of %d bytes", what, limit)}
	}
	if len(b) == 0 {
		return nil, invalid("%s is empty", what)
	}
	return b, nil
}

// UploadShasums stores a version's SHA256SUMS after checking it is well
// formed and lists every platform of the version with its shasum. A
// signature that does not verify the new file is dropped. The caller has
// proved it may (a verified capability URL).
func (s *Service) UploadShasums(ctx context.Context, versionID string, body io.Reader) (*Version, error) {
	b, err := readLimited(body, s.opts.MaxShasumsBytes, "SHA256SUMS")
	if err != nil {
		return nil, err
	}
	text := string(b)
	sums, err := parseShasums(text)
	if err != nil {
		return nil, err
	}
	v, err := lookupVersion(ctx, s.db, versionID, false)
	if err != nil {
		return nil, err
	}
	org, err := s.orgOfVersion(ctx, v)
	if err != nil {
		return nil, err
	}
	keepSig := false
	if v.ShasumsSigUploaded() {
		if k, err := lookupKey(ctx, s.db, org, v.KeyID); err == nil && verify(k.ASCIIArmor, text, v.ShasumsSig) == nil {
			keepSig = true
		}
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		// The platforms are checked under the version's lock, which
		// CreatePlatform takes to check a new platform against the file
		// and insert it: either sees what the other wrote.
		cur, err := lookupVersion(ctx, tx, versionID, true)
		if err != nil {
			return err
		}
		platforms, err := platformsOf(ctx, tx, cur.ID)
		if err != nil {
			return err
		}
		for _, p := range platforms {
			if err := checkListed(sums, p); err != nil {
				return err
			}
		}
		sig := ""
		if keepSig && string(cur.ShasumsSig) == string(v.ShasumsSig) {
			sig = base64.StdEncoding.EncodeToString(cur.ShasumsSig)
		}
		_, err = tx.Exec(ctx, `UPDATE registry_provider_versions SET shasums = ?, shasums_sig = ?, updated_at = ? WHERE id = ?`, text, sig, core.Micros(core.Now()), cur.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return lookupVersion(ctx, s.db, versionID, false)
}

func (s *Service) orgOfVersion(ctx context.Context, v *Version) (string, error) {
	var org string
	err := s.db.QueryRow(ctx, `SELECT organization_name FROM registry_providers WHERE id = ?`, v.ProviderID).Scan(&org)
	if store.IsNoRows(err) {
		return "", core.NotFound("provider version %q not found", v.ID)
	}
	return org, err
}

// UploadSignature stores the detached signature of a version's SHA256SUMS
// after checking it with the version's key, which the namespace must hold.
func (s *Service) UploadSignature(ctx context.Context, versionID string, body io.Reader) (*Version, error) {
	b, err := readLimited(body, s.opts.MaxSignatureBytes, "the SHA256SUMS signature")
	if err != nil {
		return nil, err
	}
	sig, err := binarySignature(b)
	if err != nil {
		return nil, err
	}
	v, err := lookupVersion(ctx, s.db, versionID, false)
	if err != nil {
		return nil, err
	}
	if !v.ShasumsUploaded() {
		return nil, invalid("upload the version's SHA256SUMS (shasums-upload) before its signature")
	}
	org, err := s.orgOfVersion(ctx, v)
	if err != nil {
		return nil, err
	}
	k, err := lookupKey(ctx, s.db, org, v.KeyID)
	if core.KindOf(err) == core.KindNotFound {
		return nil, invalid("namespace %q has no GPG key with key ID %s, which the version names: add the key (POST /api/registry/private/v2/gpg-keys) and upload the signature again", org, v.KeyID)
	}
	if err != nil {
		return nil, err
	}
	if err := verify(k.ASCIIArmor, v.Shasums, sig); err != nil {
		return nil, invalid("the signature does not verify SHA256SUMS with GPG key %s: %v", k.KeyID, err)
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := lookupVersion(ctx, tx, versionID, true)
		if err != nil {
			return err
		}
		if cur.Shasums != v.Shasums {
			return core.Conflict("SHA256SUMS changed during the upload: upload the signature again")
		}
		_, err = tx.Exec(ctx, `UPDATE registry_provider_versions SET shasums_sig = ?, updated_at = ? WHERE id = ?`, base64.StdEncoding.EncodeToString(sig), core.Micros(core.Now()), cur.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return lookupVersion(ctx, s.db, versionID, false)
}

func lookupPlatform(ctx context.Context, q store.Q, id string, lock bool) (*Platform, error) {
	query := `SELECT ` + platformCols + ` FROM registry_provider_platforms WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	p, err := scanPlatform(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("provider platform %q not found", id)
	}
	return p, err
}

// stagingGrace is how long an upload in progress may take before a sweep
// may delete its half-written blob.
const stagingGrace = 24 * time.Hour

// UploadBinary stores a platform's zip if its SHA-256 is the platform's
// shasum; otherwise nothing is stored.
func (s *Service) UploadBinary(ctx context.Context, platformID string, body io.Reader) (*Platform, error) {
	p, err := lookupPlatform(ctx, s.db, platformID, false)
	if err != nil {
		return nil, err
	}
	key := "registry-provider-platforms/" + p.ID + "/" + core.RandomString(16) + ".zip"
	// Record the staging blob first so that a crash leaves it to a sweep.
	if err := s.garbage().Add(ctx, s.db, key, core.Now().Add(stagingGrace)); err != nil {
		return nil, err
	}
	h := sha256.New()
	br := &bodyReader{r: body}
	size, err := s.blobs.PutReader(ctx, key, io.TeeReader(br, h), s.opts.MaxBinaryBytes)
	if err != nil {
		s.garbage().Collect(ctx, key)
		if br.err != nil {
			return nil, core.BadRequest("reading the upload: %v", br.err)
		}
		if core.KindOf(err) == core.KindTooLarge {
			return nil, &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("the provider zip is larger than the limit of %d bytes", s.opts.MaxBinaryBytes)}
		}
		return nil, err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != strings.ToLower(p.Shasum) {
		s.garbage().Collect(ctx, key)
		return nil, invalid("the uploaded file's SHA-256 is %s, but the %s_%s platform's shasum is %s: nothing was stored", sum, p.OS, p.Arch, p.Shasum)
	}
	var old string
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := lookupPlatform(ctx, tx, platformID, true)
		if err != nil {
			return err
		}
		old = cur.blobKey
		if old != "" {
			if err := s.garbage().Add(ctx, tx, old, core.Now()); err != nil {
				return err
			}
		}
		if err := s.garbage().Forget(ctx, tx, key); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE registry_provider_platforms SET blob_key = ?, size = ?, updated_at = ? WHERE id = ?`, key, size, core.Micros(core.Now()), cur.ID)
		return err
	})
	if err != nil {
		s.garbage().Collect(ctx, key)
		return nil, err
	}
	if old != "" {
		s.garbage().Collect(ctx, old)
	}
	return lookupPlatform(ctx, s.db, platformID, false)
}

// bodyReader remembers a read error of the request body.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

// openBinary streams a platform's zip if sha still names it (the
// capability download; no access check).
func (s *Service) openBinary(ctx context.Context, platformID, sha string) (io.ReadCloser, int64, error) {
	p, err := lookupPlatform(ctx, s.db, platformID, false)
	if err != nil {
		return nil, 0, err
	}
	if !p.BinaryUploaded() || strings.ToLower(p.Shasum) != sha {
		return nil, 0, core.NotFound("provider zip not found")
	}
	return s.blobs.Reader(ctx, p.blobKey)
}

// versionFile returns a version's SHA256SUMS or its signature if dig is
// still its digest (the capability download; no access check).
func (s *Service) versionFile(ctx context.Context, versionID, dig string, sig bool) ([]byte, error) {
	v, err := lookupVersion(ctx, s.db, versionID, false)
	if err != nil {
		return nil, err
	}
	b := []byte(v.Shasums)
	if sig {
		b = v.ShasumsSig
	}
	if len(b) == 0 || digest(b) != dig {
		return nil, core.NotFound("file not found")
	}
	return b, nil
}
