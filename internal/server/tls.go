package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// ensureTLS returns the certificate to serve. Without a configured
// certificate it makes (once) a private CA and a certificate for localhost,
// 127.0.0.1 and ::1 signed by it, kept in <data-dir>/tls. ca.pem is what
// clients trust (SSL_CERT_FILE).
func ensureTLS(dataDir, certFile, keyFile string, extraHosts ...string) (tls.Certificate, string, error) {
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return tls.Certificate{}, "", errors.New("--tls-cert and --tls-key must be given together")
		}
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		return c, "", err
	}
	dir := filepath.Join(dataDir, "tls")
	caPath := filepath.Join(dir, "ca.pem")
	crt, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if c, err := tls.LoadX509KeyPair(crt, key); err == nil {
		return c, caPath, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, "", err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: "Terrace local CA", Organization: []string{"Terrace"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: randSerial(),
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"Terrace"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	for _, h := range extraHosts {
		if h == "" || h == "localhost" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !ip.IsLoopback() {
				leafTmpl.IPAddresses = append(leafTmpl.IPAddresses, ip)
			}
		} else {
			leafTmpl.DNSNames = append(leafTmpl.DNSNames, h)
		}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	leafKeyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	caKeyDER, _ := x509.MarshalECPrivateKey(caKey)
	files := []struct {
		path  string
		block *pem.Block
		mode  os.FileMode
	}{
		{filepath.Join(dir, "ca-key.pem"), &pem.Block{Type: "EC PRIVATE KEY", Bytes: caKeyDER}, 0o600},
		{key, &pem.Block{Type: "EC PRIVATE KEY", Bytes: leafKeyDER}, 0o600},
		{crt, &pem.Block{Type: "CERTIFICATE", Bytes: leafDER}, 0o644},
		{caPath, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}, 0o644},
	}
	for _, f := range files {
		if err := core.WriteFileAtomic(f.path, pem.EncodeToMemory(f.block), f.mode); err != nil {
			return tls.Certificate{}, "", fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	c, err := tls.LoadX509KeyPair(crt, key)
	return c, caPath, err
}

func randSerial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
