package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// Vault is a real Vault server for tests: HashiCorp Vault (built by
// tools/vault/build.sh, `make vault`) in dev mode, in memory, serving
// TLS with a CA of its own on 127.0.0.1.
type Vault struct {
	// Addr is https://127.0.0.1:<port>.
	Addr string
	// CA is the PEM certificate Vault's TLS certificate chains to.
	CA []byte
	// Root is the root token.
	Root string
	// HTTP trusts CA.
	HTTP *http.Client
	// LogPath is the server's output.
	LogPath string
	// Bin is the vault binary, also Vault's own CLI client.
	Bin string
}

// StartVault starts Vault in dev mode for the test and stops it when the
// test ends. Without the binary the test fails when CI is set (CI builds
// it with `make vault`) and is skipped elsewhere, with a message saying
// how to build it.
func StartVault(t testing.TB) *Vault {
	t.Helper()
	bin := needTool(t, "TERRACE_TEST_VAULT", "vault", "the Vault server the Vault dynamic credentials test logs in to")
	addr, certs := freeAddr(t), t.TempDir()
	v := &Vault{Addr: "https://" + addr, Root: "root-" + core.RandomString(16), Bin: bin}
	cmd := exec.Command(bin, "server", "-dev", "-dev-tls", "-dev-tls-cert-dir="+certs, "-dev-listen-address="+addr,
		"-dev-root-token-id="+v.Root, "-dev-no-store-token")
	// Its own home: dev mode writes nothing there with -dev-no-store-token,
	// and nothing of the user's (a ~/.vault-token) is read.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "VAULT_ADDR=", "VAULT_TOKEN=")
	v.LogPath = startServer(t, "vault", cmd, addr)
	caFile := filepath.Join(certs, "vault-ca.pem")
	var err error
	if v.CA, err = os.ReadFile(caFile); err != nil {
		t.Fatalf("vault's CA certificate: %v", err)
	}
	v.HTTP = httpClient(t, caFile)
	// Listening is not yet unsealed and serving: wait for its health.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := v.HTTP.Get(v.Addr + "/v1/sys/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return v
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(v.LogPath)
			t.Fatalf("vault at %s was not healthy within 30s (%v):\n%s", v.Addr, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Call makes one call to Vault's HTTP API as token (the root token when
// ""), encoding body as JSON when not nil, and returns the status and the
// decoded answer (nil when empty).
func (v *Vault) Call(t testing.TB, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	if token == "" {
		token = v.Root
	}
	status, data := callJSON(t, v.HTTP, method, v.Addr+"/v1/"+path, body, "X-Vault-Token", token)
	var out map[string]any
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: %d: %.300s", method, path, status, data)
		}
	}
	return status, out
}

// callJSON makes one call to a server's HTTP API with body encoded as
// JSON (none when nil) and the header pairs given (name, value, …), and
// returns the status and the answer.
func callJSON(t testing.TB, c *http.Client, method, url string, body any, header ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, data
}

// Must is Call as the root token, failing the test on any status but 2xx.
func (v *Vault) Must(t testing.TB, method, path string, body any) map[string]any {
	t.Helper()
	status, out := v.Call(t, "", method, path, body)
	if status/100 != 2 {
		t.Fatalf("vault: %s %s: %d %v", method, path, status, out)
	}
	return out
}

// JSONString is the string at keys inside a decoded answer ("" when absent).
func JSONString(m map[string]any, keys ...string) string {
	var cur any = m
	for _, k := range keys {
		mm, _ := cur.(map[string]any)
		cur = mm[k]
	}
	s, _ := cur.(string)
	return s
}
