package runner

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

// CategoryVaultLogin is a Variable that has the runner log in to Vault
// before terraform starts (internal/dyncreds: Vault's dynamic provider
// credentials): Key is the run file the Vault token goes to, Value a
// VaultLogin as JSON. The token is masked like a sensitive variable and
// revoked when the phase ends. A runner that predates it does not get
// such a job (jobapi's FeatureVaultLogin).
const CategoryVaultLogin = "vault-login"

// VaultLogin is a login to Vault with a workload identity token through
// Vault's JWT auth method.
type VaultLogin struct {
	Address   string `json:"address"` // Vault's, without a trailing slash
	Namespace string `json:"namespace,omitempty"`
	// AuthPath is where the JWT auth method is mounted (under auth/).
	AuthPath string `json:"auth_path"`
	Role     string `json:"role"`
	// JWTFile is the run file (FilesDir) holding the token to log in
	// with; CACertFile, when set, the PEM certificates Vault's TLS
	// certificate must chain to instead of the system's.
	JWTFile    string `json:"jwt_file"`
	CACertFile string `json:"ca_cert_file,omitempty"`
	// TokenEnv, when set, is the environment variable that gets the
	// Vault token (VAULT_TOKEN for the default configuration).
	TokenEnv string `json:"token_env,omitempty"`
}

// vaultTimeout bounds each call to Vault.
const vaultTimeout = 30 * time.Second

// vaultSession is a Vault token a job logged in for, to revoke.
type vaultSession struct {
	srv         *vaultServer
	role, token string
}

// vaultServer is a Vault server as the runner calls it: its address and
// namespace, and a client that trusts its CA.
type vaultServer struct {
	addr, namespace string
	client          *http.Client
}

// vaultLogin logs in as v (a CategoryVaultLogin variable) says, writes
// the Vault token to the run file v.Key, sets its environment variable
// and masks it from then on.
func (j *jobExec) vaultLogin(ctx context.Context, v Variable) error {
	var l VaultLogin
	if err := json.Unmarshal([]byte(v.Value), &l); err != nil {
		return fmt.Errorf("vault login %s: %w", v.Key, err)
	}
	jwt, err := os.ReadFile(j.expand(l.JWTFile))
	if err != nil {
		return fmt.Errorf("logging in to Vault at %s: reading the workload identity token: %w", l.Address, err)
	}
	srv, err := j.vaultServer(l.Address, l.Namespace, l.CACertFile)
	if err != nil {
		return fmt.Errorf("logging in to Vault at %s: %w", l.Address, err)
	}
	body, _ := json.Marshal(map[string]string{"role": l.Role, "jwt": strings.TrimSpace(string(jwt))})
	var resp struct {
		Auth *struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	err = srv.call(ctx, http.MethodPost, "/v1/auth/"+l.AuthPath+"/login", "", body, &resp)
	if err == nil && (resp.Auth == nil || resp.Auth.ClientToken == "") {
		err = fmt.Errorf("answered without a token")
	}
	if err != nil {
		srv.client.CloseIdleConnections()
		return fmt.Errorf("logging in to Vault at %s (auth/%s, role %q): %w", l.Address, l.AuthPath, l.Role, err)
	}
	token := resp.Auth.ClientToken
	j.vault = append(j.vault, vaultSession{srv: srv, role: l.Role, token: token})
	j.addSecrets(token)
	if err := j.writeRunFile(Variable{Key: v.Key, Value: token}); err != nil {
		return err
	}
	if l.TokenEnv != "" {
		j.env = append(j.env, l.TokenEnv+"="+token)
	}
	j.log.Info("logged in to Vault", "address", l.Address, "auth_path", l.AuthPath, "role", l.Role)
	return nil
}

// revokeVault revokes the Vault tokens the job logged in for: a phase's
// token lives no longer than the phase, revoked before the phase is
// reported. A token Vault will not revoke expires with its TTL; the
// failure is logged.
func (j *jobExec) revokeVault(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), vaultTimeout)
	defer cancel()
	for _, s := range j.vault {
		if err := s.srv.call(ctx, http.MethodPost, "/v1/auth/token/revoke-self", s.token, nil, nil); err != nil {
			j.log.Warn("revoking a Vault token", "address", s.srv.addr, "role", s.role, "error", err)
		}
		s.srv.client.CloseIdleConnections()
	}
	j.vault = nil
}

// vaultServer is the Vault server at addr (namespace ns), trusting the
// certificates of caFile (a run file, FilesDir) when set, else the
// system's. Its client's connections are closed when it is done with
// (CloseIdleConnections), not left to idle out.
func (j *jobExec) vaultServer(addr, ns, caFile string) (*vaultServer, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(j.expand(caFile))
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in the CA file")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &vaultServer{addr: addr, namespace: ns, client: &http.Client{Transport: tr, Timeout: vaultTimeout}}, nil
}

// call makes one call to Vault's HTTP API as token ("" for none),
// decoding the answer into out (when set); a failure says what Vault said
// (its errors list).
func (s *vaultServer) call(ctx context.Context, method, path, token string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.namespace != "" {
		req.Header.Set("X-Vault-Namespace", s.namespace)
	}
	if token != "" {
		req.Header.Set("X-Vault-Token", token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Errors []string `json:"errors"`
		}
		if json.Unmarshal(data, &e) == nil && len(e.Errors) > 0 {
			return fmt.Errorf("answered %s: %s", resp.Status, strings.Join(e.Errors, "; "))
		}
		return fmt.Errorf("answered %s", resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("its answer: %w", err)
		}
	}
	return nil
}

// addSecrets masks secrets in the logs and the plan JSON from now on.
func (j *jobExec) addSecrets(secrets ...string) {
	for _, s := range secrets {
		if len(s) >= 3 {
			j.secrets = append(j.secrets, s)
		}
	}
	sort.SliceStable(j.secrets, func(a, b int) bool { return len(j.secrets[a]) > len(j.secrets[b]) })
	if j.out != nil {
		j.out.setSecrets(j.secrets)
	}
}

// CategoryVaultRead is a Variable that has the runner read AWS
// credentials from Vault's AWS secrets engine after its Vault login
// (internal/dyncreds: Vault-backed AWS credentials): Key is the run file
// the AWS shared credentials file goes to, Value a VaultRead as JSON. The
// keys are masked; they go with the Vault token that read them (Vault
// revokes a token's leases with it) or expire (STS).
const CategoryVaultRead = "vault-read"

// VaultRead is a read of AWS credentials from Vault.
type VaultRead struct {
	Address    string `json:"address"`
	Namespace  string `json:"namespace,omitempty"`
	CACertFile string `json:"ca_cert_file,omitempty"`
	// TokenFile is the run file of the Vault login's token (FilesDir).
	TokenFile string `json:"token_file"`
	// Method and Path (under /v1/) are the call: GET <mount>/creds/<role>
	// or POST <mount>/sts/<role>, with Data.
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Data   map[string]string `json:"data,omitempty"`
}

// vaultRead reads AWS credentials as v (a CategoryVaultRead variable)
// says and writes them as the default profile of an AWS shared
// credentials file, the run file v.Key.
func (j *jobExec) vaultRead(ctx context.Context, v Variable) error {
	var rd VaultRead
	if err := json.Unmarshal([]byte(v.Value), &rd); err != nil {
		return fmt.Errorf("vault read %s: %w", v.Key, err)
	}
	fail := func(err error) error {
		return fmt.Errorf("reading AWS credentials from Vault at %s (%s): %w", rd.Address, rd.Path, err)
	}
	token, err := os.ReadFile(j.expand(rd.TokenFile))
	if err != nil {
		return fail(fmt.Errorf("the Vault login's token: %w", err))
	}
	srv, err := j.vaultServer(rd.Address, rd.Namespace, rd.CACertFile)
	if err != nil {
		return fail(err)
	}
	defer srv.client.CloseIdleConnections()
	var body []byte
	if rd.Data != nil {
		body, _ = json.Marshal(rd.Data)
	}
	var resp struct {
		Data struct {
			AccessKey     string `json:"access_key"`
			SecretKey     string `json:"secret_key"`
			SecurityToken string `json:"security_token"`
		} `json:"data"`
	}
	if err := srv.call(ctx, rd.Method, "/v1/"+rd.Path, strings.TrimSpace(string(token)), body, &resp); err != nil {
		return fail(err)
	}
	d := resp.Data
	if d.AccessKey == "" || d.SecretKey == "" {
		return fail(fmt.Errorf("no access key in the answer"))
	}
	j.addSecrets(d.SecretKey, d.SecurityToken)
	creds := "[default]\naws_access_key_id = " + OneLine(d.AccessKey) + "\naws_secret_access_key = " + OneLine(d.SecretKey) + "\n"
	if d.SecurityToken != "" {
		creds += "aws_session_token = " + OneLine(d.SecurityToken) + "\n"
	}
	return j.writeRunFile(Variable{Key: v.Key, Value: creds})
}

// OneLine keeps a value on its line of a credentials or config file
// (AWS's, whose values end at the line's end).
func OneLine(s string) string { return strings.NewReplacer("\n", "", "\r", "").Replace(s) }
