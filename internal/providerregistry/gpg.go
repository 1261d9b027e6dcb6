package providerregistry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

const (
	publicKeyBlock = "PGP PUBLIC KEY BLOCK"
	signatureBlock = "PGP SIGNATURE"
)

// ParsePublicKey reads an ASCII-armored GPG public key and returns its key
// ID (16 uppercase hex digits, as gpg --list-keys --keyid-format long
// prints it). It refuses anything but exactly one public key: a private
// key block (whose secret must never be stored), several blocks, several
// keys, a key with a secret subkey, or a key that does not parse.
func ParsePublicKey(ascii string) (string, error) {
	if strings.TrimSpace(ascii) == "" {
		return "", invalid("ascii-armor is required: the ASCII-armored GPG public key (gpg --armor --export KEY_ID)")
	}
	if n := strings.Count(ascii, "-----BEGIN PGP"); n != 1 {
		if strings.Contains(ascii, "PRIVATE KEY BLOCK") {
			return "", invalid("ascii-armor holds a private key: upload the public key only (gpg --armor --export KEY_ID), and keep the private key secret")
		}
		return "", invalid("ascii-armor must hold exactly one armored public key block, not %d", n)
	}
	block, err := armor.Decode(strings.NewReader(ascii))
	if err != nil {
		return "", invalid("ascii-armor is not an ASCII-armored GPG key: %v", err)
	}
	if block.Type != publicKeyBlock {
		if strings.Contains(block.Type, "PRIVATE") || strings.Contains(block.Type, "SECRET") {
			return "", invalid("ascii-armor holds a private key: upload the public key only (gpg --armor --export KEY_ID), and keep the private key secret")
		}
		return "", invalid("ascii-armor is a %q block, not a %q", block.Type, publicKeyBlock)
	}
	ents, err := openpgp.ReadKeyRing(block.Body)
	if err != nil {
		return "", invalid("ascii-armor is not a valid GPG public key: %v", err)
	}
	if len(ents) != 1 {
		return "", invalid("ascii-armor must hold exactly one public key, not %d", len(ents))
	}
	// A private key is refused however it is labelled, its primary key's
	// secret or a subkey's (a public primary key with a secret subkey
	// parses as a public key).
	private := ents[0].PrivateKey != nil
	for _, sk := range ents[0].Subkeys {
		private = private || sk.PrivateKey != nil
	}
	if private {
		return "", invalid("ascii-armor holds a private key: upload the public key only (gpg --armor --export KEY_ID)")
	}
	return strings.ToUpper(ents[0].PrimaryKey.KeyIdString()), nil
}

// verify checks a detached signature (binary) of shasums with the key.
func verify(asciiArmor, shasums string, sig []byte) error {
	ring, err := openpgp.ReadArmoredKeyRing(strings.NewReader(asciiArmor))
	if err != nil {
		return fmt.Errorf("reading the key: %w", err)
	}
	if _, err := openpgp.CheckDetachedSignature(ring, strings.NewReader(shasums), bytes.NewReader(sig), nil); err != nil {
		return err
	}
	return nil
}

// binarySignature returns the binary form of a detached signature given
// in binary or ASCII-armored form.
func binarySignature(b []byte) ([]byte, error) {
	if !bytes.Contains(b[:min(len(b), 512)], []byte("-----BEGIN PGP")) {
		return b, nil
	}
	block, err := armor.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, invalid("the signature is not a valid ASCII-armored signature: %v", err)
	}
	if block.Type != signatureBlock {
		return nil, invalid("the signature is a %q block, not a %q", block.Type, signatureBlock)
	}
	out, err := io.ReadAll(block.Body)
	if err != nil {
		return nil, invalid("the signature is not a valid ASCII-armored signature: %v", err)
	}
	return out, nil
}

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The GPG keys of namespaces.

const keyCols = `id, organization_name, key_id, ascii_armor, created_at, updated_at`

func scanKey(sc store.Scanner) (*GPGKey, error) {
	var k GPGKey
	var created, updated int64
	if err := sc.Scan(&k.ID, &k.Namespace, &k.KeyID, &k.ASCIIArmor, &created, &updated); err != nil {
		return nil, err
	}
	k.CreatedAt, k.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &k, nil
}

// lookupKey returns the key of a namespace with the key ID (any case).
func lookupKey(ctx context.Context, q store.Q, namespace, keyID string) (*GPGKey, error) {
	k, err := scanKey(q.QueryRow(ctx, `SELECT `+keyCols+` FROM registry_gpg_keys WHERE organization_name = ? AND key_id = ?`, namespace, strings.ToUpper(keyID)))
	if store.IsNoRows(err) {
		return nil, core.NotFound("GPG key %s not found in namespace %q", keyID, namespace)
	}
	return k, err
}

// CreateKey adds a public key to a namespace (an organization) of the
// private registry.
func (s *Service) CreateKey(ctx context.Context, namespace, asciiArmor string) (*GPGKey, error) {
	if namespace == "" {
		return nil, invalid("namespace is required: the organization whose providers the key signs")
	}
	if err := manage(ctx, namespace); err != nil {
		return nil, err
	}
	if err := s.orgs.Exists(ctx, namespace); err != nil {
		return nil, err
	}
	if len(asciiArmor) > DefaultMaxArmorBytes {
		return nil, invalid("ascii-armor is larger than the limit of %d bytes", DefaultMaxArmorBytes)
	}
	keyID, err := ParsePublicKey(asciiArmor)
	if err != nil {
		return nil, err
	}
	now := core.Now()
	k := &GPGKey{ID: core.NewID(PrefixGPGKey), Namespace: namespace, KeyID: keyID, ASCIIArmor: asciiArmor, CreatedAt: now, UpdatedAt: now}
	_, err = s.db.Exec(ctx, `INSERT INTO registry_gpg_keys (id, organization_name, key_id, ascii_armor, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, k.Namespace, k.KeyID, k.ASCIIArmor, core.Micros(now), core.Micros(now))
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Conflict("namespace %q already has the GPG key %s", namespace, keyID)
	}
	if err != nil {
		return nil, fmt.Errorf("adding GPG key: %w", err)
	}
	return k, nil
}

// ListKeys returns at most limit of the keys of the namespaces from
// offset on, and how many there are. Every namespace must be an
// organization the caller sees.
func (s *Service) ListKeys(ctx context.Context, namespaces []string, offset, limit int) ([]*GPGKey, int, error) {
	if len(namespaces) == 0 {
		return nil, 0, core.BadRequest("filter[namespace] is required: the organizations whose keys to list")
	}
	for _, ns := range namespaces {
		if err := access(ctx, ns); err != nil {
			return nil, 0, err
		}
	}
	in, args := store.In(namespaces)
	return store.Page(ctx, s.db, scanKey, keyCols, "registry_gpg_keys", `organization_name IN (`+in+`)`, `organization_name, created_at, id`, offset, limit, args...)
}

// GetKey returns a key of a namespace.
func (s *Service) GetKey(ctx context.Context, namespace, keyID string) (*GPGKey, error) {
	if err := access(ctx, namespace); err != nil {
		return nil, err
	}
	return lookupKey(ctx, s.db, namespace, keyID)
}

// errNamespaceNotAuthorized words a refused target namespace as HCP
// Terraform does (go-tfe recognizes the text).
func errNamespaceNotAuthorized(ns string) error {
	return core.Forbidden("namespace not authorized: you may not manage the private registry of %q", ns)
}

// MoveKey moves a key to another namespace: the caller must manage both.
func (s *Service) MoveKey(ctx context.Context, namespace, keyID, newNamespace string) (*GPGKey, error) {
	k, err := s.GetKey(ctx, namespace, keyID)
	if err != nil {
		return nil, err
	}
	if err := manage(ctx, namespace); err != nil {
		return nil, err
	}
	if newNamespace == "" {
		return nil, invalid("namespace is required")
	}
	if newNamespace == k.Namespace {
		return k, nil
	}
	if manage(ctx, newNamespace) != nil || s.orgs.Exists(ctx, newNamespace) != nil {
		return nil, errNamespaceNotAuthorized(newNamespace)
	}
	now := core.Now()
	_, err = s.db.Exec(ctx, `UPDATE registry_gpg_keys SET organization_name = ?, updated_at = ? WHERE id = ?`, newNamespace, core.Micros(now), k.ID)
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Conflict("namespace %q already has the GPG key %s", newNamespace, k.KeyID)
	}
	if err != nil {
		return nil, err
	}
	k.Namespace, k.UpdatedAt = newNamespace, now
	return k, nil
}

// DeleteKey removes a key from a namespace. Versions it signed are no
// longer offered to terraform (their signature cannot be checked).
func (s *Service) DeleteKey(ctx context.Context, namespace, keyID string) error {
	k, err := s.GetKey(ctx, namespace, keyID)
	if err != nil {
		return err
	}
	if err := manage(ctx, namespace); err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `DELETE FROM registry_gpg_keys WHERE id = ?`, k.ID)
	return err
}
