package providerregistry

import (
	"bytes"
	"crypto"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// TestParsePublicKeyRefusesSecretSubkey: a block labelled public whose
// primary key is public but whose subkey carries its secret is a private
// key too; stored, it would be served to every member and, in each
// providers.v1 download answer, to terraform.
func TestParsePublicKeyRefusesSecretSubkey(t *testing.T) {
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, DefaultHash: crypto.SHA256}
	e, err := openpgp.NewEntity("Acme", "", "ops@acme.test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	must(err)
	must(e.PrimaryKey.Serialize(w))
	for _, id := range e.Identities {
		must(id.UserId.Serialize(w))
		must(id.SelfSignature.Serialize(w))
	}
	if len(e.Subkeys) == 0 {
		t.Fatal("the key has no subkey")
	}
	for _, sk := range e.Subkeys {
		must(sk.PrivateKey.Serialize(w))
		must(sk.Sig.Serialize(w))
	}
	must(w.Close())
	mixed := buf.String()
	_, err = ParsePublicKey(mixed)
	if err == nil || !strings.Contains(err.Error(), "private key") {
		t.Fatalf("a public key block with a secret subkey: %v, want a refusal naming a private key", err)
	}
	if strings.Contains(err.Error(), mixed[40:80]) {
		t.Fatalf("the refusal repeats the key: %v", err)
	}

	// The same key without the subkey's secret is taken.
	var pub bytes.Buffer
	w, err = armor.Encode(&pub, openpgp.PublicKeyType, nil)
	must(err)
	must(e.Serialize(w))
	must(w.Close())
	if id, err := ParsePublicKey(pub.String()); err != nil || id != strings.ToUpper(e.PrimaryKey.KeyIdString()) {
		t.Fatalf("the public key: %q %v", id, err)
	}
}
