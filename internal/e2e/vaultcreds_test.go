package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// vaultLogin is a login the Vault server's audit log recorded, with the
// token it issued.
type vaultLogin struct{ Mount, Role, Token string }

// vaultAudit reads a raw audit log (log_raw): the logins (in order) and
// the tokens revoked with revoke-self.
func vaultAudit(t *testing.T, path string) (logins []vaultLogin, revoked map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	revoked = map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			Auth struct {
				ClientToken string `json:"client_token"`
			} `json:"auth"`
			Request struct {
				Path string `json:"path"`
			} `json:"request"`
			Response struct {
				Auth struct {
					ClientToken string            `json:"client_token"`
					Metadata    map[string]string `json:"metadata"`
				} `json:"auth"`
			} `json:"response"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Type != "response" || e.Error != "" {
			continue
		}
		switch {
		case e.Request.Path == "auth/token/revoke-self":
			revoked[e.Auth.ClientToken] = true
		case strings.HasPrefix(e.Request.Path, "auth/") && strings.HasSuffix(e.Request.Path, "/login") && e.Response.Auth.ClientToken != "":
			logins = append(logins, vaultLogin{Mount: strings.TrimSuffix(strings.TrimPrefix(e.Request.Path, "auth/"), "/login"),
				Role: e.Response.Auth.Metadata["role"], Token: e.Response.Auth.ClientToken})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return logins, revoked
}

// vaultTrusts has Vault trust Terrace's workload identity tokens: per
// mount a JWT auth method that reads Terrace's discovery document (over
// Terrace's TLS) and the roles given (bound audiences, claims, policies;
// the subject the workspace).
func vaultTrusts(t *testing.T, v *testenv.Vault, e *testenv.Env, mounts map[string]map[string]map[string]any) {
	t.Helper()
	terraceCA, err := os.ReadFile(e.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for mount, roles := range mounts {
		v.Must(t, http.MethodPost, "sys/auth/"+mount, map[string]string{"type": "jwt"})
		v.Must(t, http.MethodPost, "auth/"+mount+"/config", map[string]string{"oidc_discovery_url": e.URL, "oidc_discovery_ca_pem": string(terraceCA), "bound_issuer": e.URL})
		for role, body := range roles {
			body["role_type"], body["user_claim"], body["token_ttl"] = "jwt", "terraform_full_workspace", "20m"
			v.Must(t, http.MethodPost, "auth/"+mount+"/role/"+role, body)
		}
	}
}

func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// TestVaultDynamicCredentials: HCP Terraform's Vault dynamic credentials
// against a real Vault (dev mode, TLS with its own CA). Vault trusts
// Terrace as an OIDC issuer (its JWT auth method reads Terrace's discovery
// document and keys) and has a role per phase bound to the workspace; a
// tagged configuration (OTHER) logs in at another mount with its own role
// and audience. The runner logs in before each phase: the plan reads its
// Vault token from the file tfc_vault_dynamic_credentials names; the apply
// uses Vault's own CLI with nothing but the environment the run gets
// (VAULT_ADDR, VAULT_TOKEN, VAULT_CACERT) to read a secret its role may
// read and write one only the apply's role may write, and the alias's
// token file to look itself up. Vault's raw audit log shows each login's
// role and token: each is revoked when its phase ends, and never shows in
// a log. A workspace that Vault's role is not bound to gets a run that
// errors with Vault's reason.
func TestVaultDynamicCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	t.Parallel()
	ctx := context.Background()
	v := testenv.StartVault(t)
	audit := filepath.Join(t.TempDir(), "audit.log")
	v.Must(t, http.MethodPut, "sys/audit/raw", map[string]any{"type": "file", "options": map[string]string{"file_path": audit, "log_raw": "true"}})

	ca := base64.StdEncoding.EncodeToString(v.CA)
	e, ws, _ := cloudWorkspace(t, "secrets", map[string]string{
		"TFC_VAULT_PROVIDER_AUTH": "true", "TFC_VAULT_ADDR": v.Addr, "TFC_VAULT_AUTH_PATH": "terrace", "TFC_VAULT_ENCODED_CACERT": ca,
		"TFC_VAULT_PLAN_ROLE": "reader", "TFC_VAULT_APPLY_ROLE": "writer",
		"TFC_VAULT_PROVIDER_AUTH_OTHER": "true", "TFC_VAULT_ADDR_OTHER": v.Addr, "TFC_VAULT_AUTH_PATH_OTHER": "other", "TFC_VAULT_ENCODED_CACERT_OTHER": ca,
		"TFC_VAULT_RUN_ROLE_OTHER": "other", "TFC_VAULT_WORKLOAD_IDENTITY_AUDIENCE_OTHER": "vault.other",
	})
	c := e.Client
	// Vault trusts Terrace's tokens: two JWT mounts, roles bound to the
	// workspace and phase, and policies over a KV secret.
	password := "pw-" + core.RandomString(12)
	v.Must(t, http.MethodPost, "secret/data/app", map[string]any{"data": map[string]string{"password": password}})
	v.Must(t, http.MethodPut, "sys/policies/acl/read-app", map[string]string{"policy": `path "secret/data/app" { capabilities = ["read"] }`})
	v.Must(t, http.MethodPut, "sys/policies/acl/write-applied", map[string]string{"policy": `path "secret/data/applied" { capabilities = ["create", "update"] }`})
	vaultTrusts(t, v, e, map[string]map[string]map[string]any{
		"terrace": {
			"reader": {"bound_audiences": []string{"vault.workload.identity"}, "token_policies": []string{"read-app"},
				"bound_claims": map[string]string{"terraform_workspace_id": ws.ID, "terraform_run_phase": "plan"}},
			"writer": {"bound_audiences": []string{"vault.workload.identity"}, "token_policies": []string{"read-app", "write-applied"},
				"bound_claims": map[string]string{"terraform_workspace_id": ws.ID, "terraform_run_phase": "apply"}},
		},
		"other": {
			"other": {"bound_audiences": []string{"vault.other"}, "token_policies": []string{"read-app"},
				"bound_claims": map[string]string{"terraform_workspace_id": ws.ID}},
		},
	})

	out := t.TempDir()
	cv := uploadConfig(ctx, t, c, ws.ID, fmt.Sprintf(`
variable "tfc_vault_dynamic_credentials" {
  type = object({
    default = object({ token_filename = string, address = string, namespace = string, ca_cert_file = string })
    aliases = map(object({ token_filename = string, address = string, namespace = string, ca_cert_file = string }))
  })
}
locals {
  v     = var.tfc_vault_dynamic_credentials
  other = var.tfc_vault_dynamic_credentials.aliases["OTHER"]
}
# The phase's Vault token, as the file names it (a hash: the token is
# masked wherever it shows).
output "token_hash" {
  value = sha256(file(local.v.default.token_filename))
}
output "other_address" {
  value = local.other.address
}
resource "terraform_data" "vault" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      '%[1]s' kv get -field=password secret/app > '%[2]s/password.txt'
      '%[1]s' kv put secret/applied run="$TFC_RUN_ID" > /dev/null
      VAULT_TOKEN="$(cat '${local.other.token_filename}')" VAULT_ADDR='${local.other.address}' VAULT_CACERT='${local.other.ca_cert_file}' \
        '%[1]s' token lookup -format=json > '%[2]s/other.json'
      sha256sum < '${local.v.default.token_filename}' | cut -c1-64 > '%[2]s/file_hash.txt'
      printf %%s "$VAULT_TOKEN" | sha256sum | cut -c1-64 > '%[2]s/env_hash.txt'
      echo "the vault token is $VAULT_TOKEN"
    EOT
  }
}
`, v.Bin, out))
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	logs := func() string { return strings.Join(phaseLogs(ctx, t, e, r), "\n") }
	if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, c, r.ID), logs())
	}

	// Vault's audit log: the plan's logins, then the apply's, each token
	// revoked.
	logins, revoked := vaultAudit(t, audit)
	var got []string
	for _, l := range logins {
		got = append(got, l.Mount+":"+l.Role)
	}
	if strings.Join(got, ",") != "terrace:reader,other:other,terrace:writer,other:other" {
		t.Fatalf("Vault's logins (mount:role): %v", got)
	}
	for _, l := range logins {
		if !revoked[l.Token] {
			t.Errorf("the %s token (mount %s) was not revoked with revoke-self", l.Role, l.Mount)
		}
		if status, _ := v.Call(t, "", http.MethodPost, "auth/token/lookup", map[string]string{"token": l.Token}); status == http.StatusOK {
			t.Errorf("the %s token (mount %s) still works after the run", l.Role, l.Mount)
		}
	}
	reader, writer := logins[0].Token, logins[2].Token

	// The plan's token file held the reader's token (an output keeps its
	// planned value through the apply); the apply's, and its VAULT_TOKEN,
	// the writer's.
	raw, err := c.Plans.ReadJSONOutput(ctx, r.Plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	var pj struct {
		OutputChanges map[string]struct {
			After any `json:"after"`
		} `json:"output_changes"`
	}
	if err := json.Unmarshal(raw, &pj); err != nil {
		t.Fatal(err)
	}
	if got := pj.OutputChanges["token_hash"].After; got != tokenHash(reader) {
		t.Errorf("the plan's token file: hash %v, want the reader token's", got)
	}
	outs, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]any{}
	for _, o := range outs.Items {
		byName[o.Name] = o.Value
	}
	if byName["token_hash"] != tokenHash(reader) || byName["other_address"] != v.Addr {
		t.Errorf("the apply's outputs: %v (want the reader token's hash, as planned, and %s)", byName, v.Addr)
	}

	for _, f := range []string{"file_hash.txt", "env_hash.txt"} {
		if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || strings.TrimSpace(string(b)) != tokenHash(writer) {
			t.Errorf("the apply's %s: %q (%v), want the writer token's hash", f, b, err)
		}
	}

	// What Vault's CLI did with the apply's environment.
	if b, err := os.ReadFile(filepath.Join(out, "password.txt")); err != nil || strings.TrimSpace(string(b)) != password {
		t.Errorf("the secret the apply read: %q (%v)", b, err)
	}
	if applied := v.Must(t, http.MethodGet, "secret/data/applied", nil); testenv.JSONString(applied, "data", "data", "run") != r.ID {
		t.Errorf("the secret the apply wrote: %v", applied)
	}
	var other map[string]any
	if b, err := os.ReadFile(filepath.Join(out, "other.json")); err != nil || json.Unmarshal(b, &other) != nil ||
		testenv.JSONString(other, "data", "meta", "role") != "other" {
		t.Errorf("the alias's token looked itself up: %s (%v)", b, err)
	}
	l := logs()
	for _, tok := range []string{reader, writer, logins[1].Token, logins[3].Token} {
		if strings.Contains(l, tok) {
			t.Errorf("a Vault token shows in the run's logs:\n%s", l)
		}
	}
	if !strings.Contains(l, "the vault token is ***") {
		t.Errorf("the apply log does not show the masked token:\n%s", l)
	}

	// A workspace the roles are not bound to: Vault refuses its login, and
	// the run says why.
	intruder, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("intruder")})
	if err != nil {
		t.Fatal(err)
	}
	for k, val := range map[string]string{"TFC_VAULT_PROVIDER_AUTH": "true", "TFC_VAULT_ADDR": v.Addr, "TFC_VAULT_AUTH_PATH": "terrace",
		"TFC_VAULT_ENCODED_CACERT": ca, "TFC_VAULT_RUN_ROLE": "reader"} {
		if _, err := c.Variables.Create(ctx, intruder.ID, tfe.VariableCreateOptions{Key: tfe.String(k), Value: tfe.String(val), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}
	}
	r = createRun(ctx, t, c, intruder.ID, uploadConfig(ctx, t, c, intruder.ID, `resource "terraform_data" "x" {}`).ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunErrored {
		t.Fatalf("a run of a workspace Vault's role is not bound to ended %s", r.Status)
	}
	if why := strings.Join(phaseLogs(ctx, t, e, r), "\n"); !strings.Contains(why, `logging in to Vault at `+v.Addr+` (auth/terrace, role "reader")`) ||
		!strings.Contains(why, "terraform_workspace_id") {
		t.Errorf("the refused login's run does not say why: %s", why)
	}
}

// TestVaultBackedAWSCredentials: HCP Terraform's Vault-backed AWS
// credentials against a real Vault. The runner logs in to Vault (the
// default Vault configuration; a JWT role per phase) and reads AWS
// credentials from Vault's AWS secrets engine (assumed_role: Vault itself
// calls STS AssumeRole, at a stand-in on 127.0.0.1 that records each
// call) for the phase's Vault role and role ARN, into an AWS shared
// credentials file. The AWS SDK for Go, given only the apply's environment
// (AWS_SHARED_CREDENTIALS_FILE), finds the apply's keys; the plan's file
// held the plan's; the secret key never shows in a log.
func TestVaultBackedAWSCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var assumed []string // role ARNs
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		if err := r.ParseForm(); err == nil && r.Form.Get("Action") == "GetCallerIdentity" {
			// Vault's check of its root credentials before each use.
			fmt.Fprint(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>
<Arn>arn:aws:iam::111111111111:user/vault</Arn><UserId>AIDAVAULT</UserId><Account>111111111111</Account></GetCallerIdentityResult>
<ResponseMetadata><RequestId>req-id</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
			return
		}
		if r.Form.Get("Action") != "AssumeRole" {
			http.Error(w, "not an AssumeRole", http.StatusBadRequest)
			return
		}
		mu.Lock()
		assumed = append(assumed, r.Form.Get("RoleArn"))
		n := len(assumed)
		mu.Unlock()
		fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>
<Credentials><AccessKeyId>ASIAVAULT%d</AccessKeyId><SecretAccessKey>vault-secret-%d-%s</SecretAccessKey><SessionToken>session-%d</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>%s/session</Arn><AssumedRoleId>AROA:%d</AssumedRoleId></AssumedRoleUser></AssumeRoleResult>
<ResponseMetadata><RequestId>req-%d</RequestId></ResponseMetadata></AssumeRoleResponse>`,
			n, n, core.RandomString(8), n, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), r.Form.Get("RoleArn"), n, n)
	}))
	t.Cleanup(sts.Close)

	v := testenv.StartVault(t)
	const planARN, applyARN = "arn:aws:iam::111111111111:role/plan", "arn:aws:iam::111111111111:role/apply"
	e, ws, exe := cloudWorkspace(t, "vault-aws", map[string]string{
		"TFC_VAULT_PROVIDER_AUTH": "true", "TFC_VAULT_ADDR": v.Addr, "TFC_VAULT_ENCODED_CACERT": base64.StdEncoding.EncodeToString(v.CA),
		"TFC_VAULT_PLAN_ROLE": "plan", "TFC_VAULT_APPLY_ROLE": "apply",
		"TFC_VAULT_BACKED_AWS_AUTH": "true", "TFC_VAULT_BACKED_AWS_AUTH_TYPE": "assumed_role", "TFC_VAULT_BACKED_AWS_MOUNT_PATH": "cloud",
		"TFC_VAULT_BACKED_AWS_RUN_VAULT_ROLE": "deployer", "TFC_VAULT_BACKED_AWS_PLAN_ROLE_ARN": planARN, "TFC_VAULT_BACKED_AWS_APPLY_ROLE_ARN": applyARN,
	})
	c := e.Client
	v.Must(t, http.MethodPost, "sys/mounts/cloud", map[string]string{"type": "aws"})
	v.Must(t, http.MethodPost, "cloud/config/root", map[string]any{"access_key": "AKIAVAULTROOT", "secret_key": "root-secret", "region": "us-east-1",
		"sts_endpoint": sts.URL, "iam_endpoint": sts.URL, "max_retries": 0})
	v.Must(t, http.MethodPost, "cloud/roles/deployer", map[string]any{"credential_type": "assumed_role", "role_arns": []string{planARN, applyARN}})
	v.Must(t, http.MethodPut, "sys/policies/acl/aws", map[string]string{"policy": `path "cloud/sts/deployer" { capabilities = ["update"] }`})
	vaultTrusts(t, v, e, map[string]map[string]map[string]any{"jwt": {
		"plan": {"bound_audiences": []string{"vault.workload.identity"}, "token_policies": []string{"aws"},
			"bound_claims": map[string]string{"terraform_workspace_id": ws.ID, "terraform_run_phase": "plan"}},
		"apply": {"bound_audiences": []string{"vault.workload.identity"}, "token_policies": []string{"aws"},
			"bound_claims": map[string]string{"terraform_workspace_id": ws.ID, "terraform_run_phase": "apply"}},
	}})

	out := t.TempDir()
	cv := uploadConfig(ctx, t, c, ws.ID, fmt.Sprintf(`
variable "tfc_vault_backed_aws_dynamic_credentials" {
  type = object({
    default = object({ shared_credentials_file = string })
    aliases = map(object({ shared_credentials_file = string }))
  })
}
output "plan_key" {
  value = regex("aws_access_key_id = (\\S+)", file(var.tfc_vault_backed_aws_dynamic_credentials.default.shared_credentials_file))[0]
}
resource "terraform_data" "aws" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      %[1]s=default '%[2]s' > '%[3]s/default.txt'
      echo "the secret is $(sed -n 's/^aws_secret_access_key = //p' "$AWS_SHARED_CREDENTIALS_FILE")"
    EOT
  }
}
`, awsHelperVar, exe, out))
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	logs := func() string { return strings.Join(phaseLogs(ctx, t, e, r), "\n") }
	if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, c, r.ID), logs())
	}
	mu.Lock()
	got := append([]string{}, assumed...)
	mu.Unlock()
	if strings.Join(got, ",") != planARN+","+applyARN {
		t.Fatalf("STS AssumeRole calls Vault made: %v, want the plan's role then the apply's", got)
	}
	outs, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
	if err != nil || len(outs.Items) != 1 || outs.Items[0].Value != "ASIAVAULT1" {
		t.Errorf("the plan's credentials file: %+v (%v)", outs, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "default.txt")); err != nil || strings.TrimSpace(string(b)) != "ASIAVAULT2" {
		t.Errorf("the AWS SDK's access key in the apply: %q (%v)", b, err)
	}
	if l := logs(); strings.Contains(l, "vault-secret-2-") || !strings.Contains(l, "the secret is ***") {
		t.Errorf("the apply log does not mask the secret key:\n%s", l)
	}
}
