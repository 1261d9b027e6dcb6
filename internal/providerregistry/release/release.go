// Package release builds what a provider release publishes to a registry,
// as goreleaser's terraform-provider template does: the zip of each
// platform, the SHA256SUMS file listing them and its detached GPG
// signature. Tests use it to publish to Terrace's provider registry with a
// key made on the spot; it holds nothing specific to tests.
package release

import (
	"archive/zip"
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Key is a GPG key pair that signs releases.
type Key struct {
	entity *openpgp.Entity
}

// keyConfig makes version 4 EdDSA keys and SHA-256 signatures, which every
// terraform since 0.13 verifies, and which are quick to make.
var keyConfig = &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, DefaultHash: crypto.SHA256}

// NewKey makes a signing key for name <email>.
func NewKey(name, email string) (*Key, error) {
	e, err := openpgp.NewEntity(name, "", email, keyConfig)
	if err != nil {
		return nil, fmt.Errorf("making a GPG key: %w", err)
	}
	return &Key{entity: e}, nil
}

// KeyID is the key's ID as gpg prints it (16 uppercase hex digits).
func (k *Key) KeyID() string { return strings.ToUpper(k.entity.PrimaryKey.KeyIdString()) }

// PublicArmor is the ASCII-armored public key (gpg --armor --export).
func (k *Key) PublicArmor() (string, error) {
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		return "", err
	}
	if err := k.entity.Serialize(w); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return buf.String() + "\n", nil
}

// PrivateArmor is the ASCII-armored private key (gpg --armor
// --export-secret-keys): what must never be uploaded.
func (k *Key) PrivateArmor() (string, error) {
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PrivateKeyType, nil)
	if err != nil {
		return "", err
	}
	if err := k.entity.SerializePrivate(w, keyConfig); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return buf.String() + "\n", nil
}

// Sign returns the binary detached signature of data (gpg --detach-sign),
// the form terraform reads.
func (k *Key) Sign(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := openpgp.DetachSign(&buf, k.entity, bytes.NewReader(data), keyConfig); err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return buf.Bytes(), nil
}

// Zip packs files (name -> content) into a zip, executables (mode 0755).
func Zip(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := &zip.FileHeader{Name: n, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SHA256 is the lowercase hex SHA-256 of b.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Shasums is the SHA256SUMS file of the zips (filename -> content), as
// sha256sum writes it.
func Shasums(zips map[string][]byte) []byte {
	names := make([]string, 0, len(zips))
	for n := range zips {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", SHA256(zips[n]), n)
	}
	return []byte(b.String())
}
