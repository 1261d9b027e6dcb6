package dyncreds

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/url"
	"regexp"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/runner"
)

// vaultFiles are a Vault configuration's run files: its CA certificate
// (TFC_VAULT_ENCODED_CACERT, when set) and the login the runner makes
// before terraform starts (runner.CategoryVaultLogin), which writes the
// Vault token to its file "token". The default configuration's environment
// variables are the Vault provider's own (VAULT_ADDR, VAULT_NAMESPACE,
// VAULT_CACERT; VAULT_TOKEN the runner sets after its login).
func vaultFiles(c Config, role, _, _ string) ([]runner.Variable, map[string]string, []runner.Variable, error) {
	addr, err := c.vaultAddr()
	if err != nil {
		return nil, nil, nil, err
	}
	path, err := c.vaultAuthPath()
	if err != nil {
		return nil, nil, nil, err
	}
	ns := c.get("NAMESPACE")
	if strings.ContainsAny(ns, "\r\n") {
		return nil, nil, nil, core.Invalid("%s: a Vault namespace is one line", c.name("NAMESPACE"))
	}
	ca, err := c.vaultCA()
	if err != nil {
		return nil, nil, nil, err
	}
	login := runner.VaultLogin{Address: addr, Namespace: ns, AuthPath: path, Role: role, JWTFile: c.path("jwt")}
	entry := map[string]string{"token_filename": c.path("token"), "address": addr, "namespace": ns, "ca_cert_file": ""}
	var files, env []runner.Variable
	env = append(env, runner.Variable{Key: "VAULT_ADDR", Value: addr, Category: "env"})
	if ns != "" {
		env = append(env, runner.Variable{Key: "VAULT_NAMESPACE", Value: ns, Category: "env"})
	}
	if ca != "" {
		files = append(files, runner.Variable{Key: c.key("ca.pem"), Value: ca, Category: runner.CategoryFile})
		login.CACertFile, entry["ca_cert_file"] = c.path("ca.pem"), c.path("ca.pem")
		env = append(env, runner.Variable{Key: "VAULT_CACERT", Value: c.path("ca.pem"), Category: "env", Expand: true})
	}
	if c.Tag == "" {
		login.TokenEnv = "VAULT_TOKEN"
	}
	b, err := json.Marshal(login)
	if err != nil {
		return nil, nil, nil, err
	}
	files = append(files, runner.Variable{Key: c.key("token"), Value: string(b), Category: runner.CategoryVaultLogin})
	return files, entry, env, nil
}

// vaultAddr is TFC_VAULT_ADDR: an http or https URL of a Vault server,
// without a trailing slash.
func (c Config) vaultAddr() (string, error) {
	raw := c.get("ADDR")
	if raw == "" {
		return "", core.Invalid("%s is true, but Vault's address is not set: set %s (https://vault.example.com:8200)", c.authVar(), c.name("ADDR"))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", core.Invalid("%s: %q is not a Vault server's http or https address", c.name("ADDR"), raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// vaultPathRE is a Vault path (where an auth method or a secrets engine
// is mounted, a role's name): segments of letters, digits, dots, dashes
// and underscores.
var vaultPathRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)

// vaultPath says p is a Vault path that stays where it is put: no "." or
// ".." segment.
func vaultPath(p string) bool {
	return vaultPathRE.MatchString(p) && !strings.Contains("/"+p+"/", "/../") && !strings.Contains("/"+p+"/", "/./")
}

// vaultAuthPath is TFC_VAULT_AUTH_PATH, where the JWT auth method is
// mounted (under auth/): jwt unless set.
func (c Config) vaultAuthPath() (string, error) {
	p := strings.Trim(c.get("AUTH_PATH"), "/")
	if p == "" {
		return "jwt", nil
	}
	if !vaultPath(p) {
		return "", core.Invalid("%s: %q is not the path of an auth method", c.name("AUTH_PATH"), p)
	}
	return p, nil
}

// vaultCA is TFC_VAULT_ENCODED_CACERT decoded: PEM certificates, "" when
// unset.
func (c Config) vaultCA() (string, error) {
	enc := strings.Join(strings.Fields(c.get("ENCODED_CACERT")), "")
	if enc == "" {
		return "", nil
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", core.Invalid("%s is not base64 (encode the PEM certificate: base64 -w0 ca.pem)", c.name("ENCODED_CACERT"))
	}
	n := 0
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return "", core.Invalid("%s: a certificate does not parse: %v", c.name("ENCODED_CACERT"), err)
		}
		n++
	}
	if n == 0 {
		return "", core.Invalid("%s holds no PEM certificate", c.name("ENCODED_CACERT"))
	}
	return string(raw), nil
}

// vaultAWSFiles are a Vault-backed AWS configuration's: the read the
// runner makes of Vault's AWS secrets engine (runner.CategoryVaultRead),
// as the default Vault configuration logged in, for the phase's Vault
// role (TFC_VAULT_BACKED_AWS_<PHASE>_VAULT_ROLE, else RUN_VAULT_ROLE),
// into an AWS shared credentials file: <mount>/creds/<role> for an
// iam_user role, <mount>/sts/<role> (with the phase's
// TFC_VAULT_BACKED_AWS_…_ROLE_ARN when set) for assumed_role and
// federation_token. The default configuration's file is
// AWS_SHARED_CREDENTIALS_FILE.
func vaultAWSFiles(c Config, role, phase, _ string) ([]runner.Variable, map[string]string, []runner.Variable, error) {
	v := Config{p: vault, env: c.env}
	if !strings.EqualFold(strings.TrimSpace(c.env[v.authVar()]), "true") {
		return nil, nil, nil, core.Invalid("%s is true, but it reads from Vault as the default Vault configuration, which is off: set %s and its variables", c.authVar(), v.authVar())
	}
	addr, err := v.vaultAddr()
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := v.vaultCA()
	if err != nil {
		return nil, nil, nil, err
	}
	mount := strings.Trim(c.get("MOUNT_PATH"), "/")
	if mount == "" {
		mount = "aws"
	}
	if !vaultPath(mount) {
		return nil, nil, nil, core.Invalid("%s: %q is not the path of a secrets engine", c.name("MOUNT_PATH"), mount)
	}
	if !vaultPath(role) {
		return nil, nil, nil, core.Invalid("%s: %q is not a Vault role's name", c.name(strings.ToUpper(phase)+"_VAULT_ROLE")+" or "+c.name("RUN_VAULT_ROLE"), role)
	}
	// The default Vault configuration's files (vaultFiles).
	read := runner.VaultRead{Address: addr, Namespace: v.get("NAMESPACE"), TokenFile: v.path("token")}
	if ca != "" {
		read.CACertFile = v.path("ca.pem")
	}
	switch typ := c.get("AUTH_TYPE"); typ {
	case "iam_user":
		read.Method, read.Path = "GET", mount+"/creds/"+role
	case "assumed_role", "federation_token":
		read.Method, read.Path = "POST", mount+"/sts/"+role
		arn := c.get(strings.ToUpper(phase) + "_ROLE_ARN")
		if arn == "" {
			arn = c.get("RUN_ROLE_ARN")
		}
		if typ == "assumed_role" && arn != "" {
			read.Data = map[string]string{"role_arn": arn}
		}
	default:
		return nil, nil, nil, core.Invalid("%s: %q is not iam_user, assumed_role or federation_token", c.name("AUTH_TYPE"), typ)
	}
	b, err := json.Marshal(read)
	if err != nil {
		return nil, nil, nil, err
	}
	path := c.path("credentials")
	return []runner.Variable{{Key: c.key("credentials"), Value: string(b), Category: runner.CategoryVaultRead}},
		map[string]string{"shared_credentials_file": path},
		[]runner.Variable{{Key: "AWS_SHARED_CREDENTIALS_FILE", Value: path, Category: "env", Expand: true}}, nil
}
