package dyncreds

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/runner"
)

func TestConfigs(t *testing.T) {
	env := map[string]string{
		"TFC_AWS_PROVIDER_AUTH": "True", "TFC_AWS_RUN_ROLE_ARN": "arn:run", "TFC_AWS_APPLY_ROLE_ARN": "arn:apply",
		"TFC_AWS_PROVIDER_AUTH_B": "true", "TFC_AWS_RUN_ROLE_ARN_B": "arn:b", "TFC_AWS_WORKLOAD_IDENTITY_AUDIENCE_B": "aud.b",
		"TFC_AWS_PROVIDER_AUTH_A":   "true", // no role
		"TFC_AWS_PROVIDER_AUTH_OFF": "false", "TFC_AWS_PROVIDER_AUTH_TYPE": "true", "TFC_AWS_PROVIDER_AUTH_BAD-TAG": "true",
		"TFC_AWS_PROVIDER_AUTH_": "true",
		"TFC_GCP_PROVIDER_AUTH":  "true", "TFC_GCP_RUN_SERVICE_ACCOUNT_EMAIL": "tf@p.iam.gserviceaccount.com",
		"TFC_GCP_PROJECT_NUMBER": "123", "TFC_GCP_WORKLOAD_POOL_ID": "pool", "TFC_GCP_WORKLOAD_PROVIDER_ID": "terrace",
		"TFC_GCP_PROVIDER_AUTH_X": "true", "TFC_GCP_RUN_SERVICE_ACCOUNT_EMAIL_X": "not an email", // and no provider
	}
	cs := Configs(env)
	var tags []string
	for _, c := range cs {
		aud, err := c.Audience()
		tags = append(tags, c.Provider()+":"+c.Tag+"="+aud+errText(err))
	}
	if got := strings.Join(tags, ","); got != "aws:=aws.workload.identity,aws:A=aws.workload.identity,aws:B=aud.b,"+
		"gcp:=https://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/terrace,"+
		"gcp:X=https://iam.googleapis.com/!invalid" {
		t.Fatalf("configurations: %s", got)
	}
	for _, tc := range []struct {
		c             Config
		phase, who    string
		wantErrSubstr string
	}{
		{cs[0], "plan", "arn:run", ""},
		{cs[0], "apply", "arn:apply", ""},
		{cs[2], "apply", "arn:b", ""},
		{cs[1], "plan", "", "TFC_AWS_RUN_ROLE_ARN_A (or TFC_AWS_PLAN_ROLE_ARN_A)"},
		{cs[3], "apply", "tf@p.iam.gserviceaccount.com", ""},
		{cs[4], "plan", "", "TFC_GCP_RUN_SERVICE_ACCOUNT_EMAIL_X: \"not an email\" is not a service account's email"},
	} {
		who, err := tc.c.Who(tc.phase)
		if who != tc.who || (err == nil) != (tc.wantErrSubstr == "") || err != nil && (!strings.Contains(err.Error(), tc.wantErrSubstr) || core.KindOf(err) != core.KindInvalid) {
			t.Errorf("%s %q %s: %q, %v", tc.c.Provider(), tc.c.Tag, tc.phase, who, err)
		}
	}
	// mint gives each audience's token, and counts the tokens made.
	minted := 0
	mint := func(audience string) (string, error) {
		minted++
		return map[string]string{"aws.workload.identity": "tok-default", "aud.b": "tok-b",
			"https://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/terrace": "tok-gcp"}[audience], nil
	}
	if _, err := Variables([]Config{cs[4]}, "plan", "run-1", mint); err == nil {
		t.Error("a Google configuration without a service account and provider passed its check")
	}
	if _, err := Variables(cs[:3], "plan", "run-1", mint); err == nil {
		t.Error("variables for a configuration without a role")
	}
	if minted != 0 {
		t.Errorf("%d tokens minted for configurations that cannot work", minted)
	}
	vars, err := Variables([]Config{cs[0], cs[2], cs[3]}, "apply", "run-1", mint)
	if err != nil {
		t.Fatal(err)
	}
	_, byKey := index(vars)
	if v := byKey["aws/default/token"]; v.Value != "tok-default" || !v.Sensitive || v.Category != runner.CategoryFile {
		t.Errorf("the default token file: %+v", v)
	}
	if v := byKey["aws/tag-B/config"]; v.Category != runner.CategoryFile || v.Value !=
		"[default]\nrole_arn = arn:b\nweb_identity_token_file = ${TERRACE_RUN_FILES}/aws/tag-B/token\nrole_session_name = run-1\n" {
		t.Errorf("B's config file: %+v", v)
	}
	if v := byKey["AWS_CONFIG_FILE"]; v.Value != "${TERRACE_RUN_FILES}/aws/default/config" || !v.Expand || v.Category != "env" {
		t.Errorf("AWS_CONFIG_FILE: %+v", v)
	}
	if v := byKey["TF_VAR_tfc_aws_dynamic_credentials"]; !v.Expand || v.Value !=
		`{"default":{"shared_config_file":"${TERRACE_RUN_FILES}/aws/default/config"},"aliases":{"B":{"shared_config_file":"${TERRACE_RUN_FILES}/aws/tag-B/config"}}}` {
		t.Errorf("the AWS input variable: %+v", v)
	}
	var ext map[string]any
	if v := byKey["gcp/default/credentials.json"]; json.Unmarshal([]byte(v.Value), &ext) != nil || ext["type"] != "external_account" ||
		ext["audience"] != "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/terrace" ||
		ext["service_account_impersonation_url"] != "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/tf@p.iam.gserviceaccount.com:generateAccessToken" {
		t.Errorf("the Google credential file: %+v", v)
	}
	if v := byKey["TF_VAR_tfc_gcp_dynamic_credentials"]; !v.Expand || v.Value !=
		`{"default":{"credentials":"${TERRACE_RUN_FILES}/gcp/default/credentials.json"},"aliases":{}}` {
		t.Errorf("the Google input variable: %+v", v)
	}
	if v := byKey["GOOGLE_APPLICATION_CREDENTIALS"]; v.Value != "${TERRACE_RUN_FILES}/gcp/default/credentials.json" || !v.Expand {
		t.Errorf("GOOGLE_APPLICATION_CREDENTIALS: %+v", v)
	}
	if vars, err := Variables(nil, "plan", "run-1", mint); vars != nil || err != nil {
		t.Errorf("no configuration: %v, %v", vars, err)
	}
}

// index is vars' keys, in order and comma-separated, and vars by key.
func index(vars []runner.Variable) (string, map[string]runner.Variable) {
	keys := make([]string, 0, len(vars))
	byKey := map[string]runner.Variable{}
	for _, v := range vars {
		keys = append(keys, v.Key)
		byKey[v.Key] = v
	}
	return strings.Join(keys, ","), byKey
}

func errText(err error) string {
	if core.KindOf(err) == core.KindInvalid {
		return "!invalid"
	} else if err != nil {
		return "!" + err.Error()
	}
	return ""
}

// TestVault: a Vault configuration's checks, and what a phase gets: the
// token to log in with, first; the CA certificate; the login the runner
// makes (the phase's role, the auth method's path, where the Vault token
// goes); Vault's own environment variables for the default configuration;
// and every configuration in the input variable, with all four fields.
func TestVault(t *testing.T) {
	cert := testCert(t)
	ca := base64.StdEncoding.EncodeToString(cert)
	for _, tc := range []struct {
		env  map[string]string
		want string // in the error
	}{
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r"}, "set TFC_VAULT_ADDR"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_ADDR": "vault.test:8200"}, "is not a Vault server's"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_ADDR": "ftp://vault.test"}, "is not a Vault server's"},
		{map[string]string{"TFC_VAULT_ADDR": "https://vault.test"}, "TFC_VAULT_RUN_ROLE (or TFC_VAULT_PLAN_ROLE)"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_ADDR": "https://vault.test", "TFC_VAULT_AUTH_PATH": "jwt/../token"}, "is not the path of an auth method"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_ADDR": "https://vault.test", "TFC_VAULT_AUTH_PATH": "jwt?x=1"}, "is not the path of an auth method"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_ADDR": "https://vault.test", "TFC_VAULT_ENCODED_CACERT": "not base64!"}, "is not base64"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_ADDR": "https://vault.test", "TFC_VAULT_ENCODED_CACERT": base64.StdEncoding.EncodeToString([]byte("hello"))}, "holds no PEM certificate"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_PLAN_ROLE": "r\nx", "TFC_VAULT_ADDR": "https://vault.test"}, "TFC_VAULT_PLAN_ROLE: a role is one line"},
		{map[string]string{"TFC_VAULT_RUN_ROLE": "r", "TFC_VAULT_NAMESPACE": "a\nb", "TFC_VAULT_ADDR": "https://vault.test"}, "TFC_VAULT_NAMESPACE: a Vault namespace is one line"},
	} {
		tc.env["TFC_VAULT_PROVIDER_AUTH"] = "true"
		_, err := Variables(Configs(tc.env), "plan", "run-1", func(string) (string, error) { t.Fatal("minted for a configuration that cannot work"); return "", nil })
		if err == nil || core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}

	env := map[string]string{
		"TFC_VAULT_PROVIDER_AUTH": "true", "TFC_VAULT_ADDR": "https://vault.test:8200/", "TFC_VAULT_PLAN_ROLE": "reader", "TFC_VAULT_APPLY_ROLE": "writer",
		"TFC_VAULT_NAMESPACE": "team-a", "TFC_VAULT_AUTH_PATH": "/tfc/jwt/", "TFC_VAULT_ENCODED_CACERT": ca[:20] + "\n" + ca[20:],
		"TFC_VAULT_PROVIDER_AUTH_OTHER": "true", "TFC_VAULT_ADDR_OTHER": "http://127.0.0.1:8200", "TFC_VAULT_RUN_ROLE_OTHER": "other",
		"TFC_VAULT_WORKLOAD_IDENTITY_AUDIENCE_OTHER": "vault.other",
	}
	vars, err := Variables(Configs(env), "apply", "run-1", func(aud string) (string, error) { return "jwt-for-" + aud, nil })
	if err != nil {
		t.Fatal(err)
	}
	keys, byKey := index(vars)
	if keys != "vault/default/jwt,vault/default/ca.pem,vault/default/token,VAULT_ADDR,VAULT_NAMESPACE,VAULT_CACERT,"+
		"vault/tag-OTHER/jwt,vault/tag-OTHER/token,TF_VAR_tfc_vault_dynamic_credentials" {
		t.Fatalf("variables, in order: %s", keys)
	}
	if v := byKey["vault/default/jwt"]; v.Value != "jwt-for-vault.workload.identity" || !v.Sensitive || v.Category != runner.CategoryFile {
		t.Errorf("the default's token: %+v", v)
	}
	if v := byKey["vault/tag-OTHER/jwt"]; v.Value != "jwt-for-vault.other" {
		t.Errorf("OTHER's token: %+v", v)
	}
	if v := byKey["vault/default/ca.pem"]; v.Value != string(cert) || v.Category != runner.CategoryFile {
		t.Errorf("the CA file: %+v", v)
	}
	for key, want := range map[string]runner.VaultLogin{
		"vault/default/token": {Address: "https://vault.test:8200", Namespace: "team-a", AuthPath: "tfc/jwt", Role: "writer",
			JWTFile: runner.FilesDir + "/vault/default/jwt", CACertFile: runner.FilesDir + "/vault/default/ca.pem", TokenEnv: "VAULT_TOKEN"},
		"vault/tag-OTHER/token": {Address: "http://127.0.0.1:8200", AuthPath: "jwt", Role: "other", JWTFile: runner.FilesDir + "/vault/tag-OTHER/jwt"},
	} {
		var got runner.VaultLogin
		if v := byKey[key]; v.Category != runner.CategoryVaultLogin || v.Sensitive || json.Unmarshal([]byte(v.Value), &got) != nil || got != want {
			t.Errorf("%s: %+v, want %+v", key, v, want)
		}
	}
	for k, want := range map[string]string{"VAULT_ADDR": "https://vault.test:8200", "VAULT_NAMESPACE": "team-a", "VAULT_CACERT": runner.FilesDir + "/vault/default/ca.pem"} {
		if v := byKey[k]; v.Value != want || v.Category != "env" {
			t.Errorf("%s: %+v", k, v)
		}
	}
	if v := byKey["TF_VAR_tfc_vault_dynamic_credentials"]; !v.Expand || v.Value != `{"default":{"address":"https://vault.test:8200",`+
		`"ca_cert_file":"${TERRACE_RUN_FILES}/vault/default/ca.pem","namespace":"team-a","token_filename":"${TERRACE_RUN_FILES}/vault/default/token"},`+
		`"aliases":{"OTHER":{"address":"http://127.0.0.1:8200","ca_cert_file":"","namespace":"","token_filename":"${TERRACE_RUN_FILES}/vault/tag-OTHER/token"}}}` {
		t.Errorf("the input variable: %s", v.Value)
	}
	// An alias alone: the default's entry is there, every field empty (the
	// variable's object type needs them).
	delete(env, "TFC_VAULT_PROVIDER_AUTH")
	vars, err = Variables(Configs(env), "plan", "run-1", func(string) (string, error) { return "jwt", nil })
	if err != nil {
		t.Fatal(err)
	}
	if v := vars[len(vars)-1]; !strings.HasPrefix(v.Value, `{"default":{"address":"","ca_cert_file":"","namespace":"","token_filename":""},"aliases":{"OTHER":`) {
		t.Errorf("the input variable without a default: %s", v.Value)
	}
}

// testCert is a self-signed certificate, PEM.
func testCert(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vault CA"}, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(4e9, 0), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestAzure: an Azure configuration gets its token and client ID files,
// the input variable's two paths and, for the default configuration, the
// environment the azurerm provider reads; without a client ID it errors.
func TestAzure(t *testing.T) {
	env := map[string]string{"TFC_AZURE_PROVIDER_AUTH": "true", "TFC_AZURE_RUN_CLIENT_ID": "run-id", "TFC_AZURE_APPLY_CLIENT_ID": "apply-id",
		"TFC_AZURE_PROVIDER_AUTH_B": "true", "TFC_AZURE_RUN_CLIENT_ID_B": "b-id", "TFC_AZURE_WORKLOAD_IDENTITY_AUDIENCE_B": "api://b"}
	vars, err := Variables(Configs(env), "apply", "run-1", func(aud string) (string, error) { return "jwt-for-" + aud, nil })
	if err != nil {
		t.Fatal(err)
	}
	keys, byKey := index(vars)
	if keys != "azure/default/token,azure/default/client_id,ARM_USE_OIDC,ARM_CLIENT_ID,ARM_OIDC_TOKEN_FILE_PATH,"+
		"azure/tag-B/token,azure/tag-B/client_id,TF_VAR_tfc_azure_dynamic_credentials" {
		t.Fatalf("variables, in order: %s", keys)
	}
	for k, want := range map[string]string{"azure/default/token": "jwt-for-api://AzureADTokenExchange", "azure/tag-B/token": "jwt-for-api://b",
		"azure/default/client_id": "apply-id", "azure/tag-B/client_id": "b-id", "ARM_CLIENT_ID": "apply-id", "ARM_USE_OIDC": "true",
		"ARM_OIDC_TOKEN_FILE_PATH": runner.FilesDir + "/azure/default/token"} {
		if byKey[k].Value != want {
			t.Errorf("%s: %+v, want %q", k, byKey[k], want)
		}
	}
	if v := byKey["TF_VAR_tfc_azure_dynamic_credentials"]; !v.Expand || v.Value != `{"default":{"client_id_file_path":"${TERRACE_RUN_FILES}/azure/default/client_id",`+
		`"oidc_token_file_path":"${TERRACE_RUN_FILES}/azure/default/token"},"aliases":{"B":{"client_id_file_path":"${TERRACE_RUN_FILES}/azure/tag-B/client_id",`+
		`"oidc_token_file_path":"${TERRACE_RUN_FILES}/azure/tag-B/token"}}}` {
		t.Errorf("the input variable: %s", v.Value)
	}
	if _, err := Variables(Configs(map[string]string{"TFC_AZURE_PROVIDER_AUTH": "true", "TFC_AZURE_APPLY_CLIENT_ID": "a\nb"}), "apply", "run-1", nil); err == nil ||
		!strings.Contains(err.Error(), "TFC_AZURE_APPLY_CLIENT_ID: a client id is one line") {
		t.Errorf("a client ID of two lines: %v", err)
	}
	if _, err := Variables(Configs(map[string]string{"TFC_AZURE_PROVIDER_AUTH": "true"}), "plan", "run-1", nil); err == nil ||
		!strings.Contains(err.Error(), "TFC_AZURE_RUN_CLIENT_ID (or TFC_AZURE_PLAN_CLIENT_ID)") {
		t.Errorf("without a client ID: %v", err)
	}
}

// TestVaultBackedAWS: the read a Vault-backed AWS configuration has the
// runner make (after the default Vault configuration's login, with its
// token), per credential type and phase, and what it refuses.
func TestVaultBackedAWS(t *testing.T) {
	base := func(extra map[string]string) map[string]string {
		env := map[string]string{"TFC_VAULT_PROVIDER_AUTH": "true", "TFC_VAULT_ADDR": "https://vault.test", "TFC_VAULT_RUN_ROLE": "tfc",
			"TFC_VAULT_BACKED_AWS_AUTH": "true", "TFC_VAULT_BACKED_AWS_RUN_VAULT_ROLE": "deployer"}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	mint := func(string) (string, error) { return "jwt", nil }
	for _, tc := range []struct {
		env       map[string]string
		phase     string
		want      runner.VaultRead
		wantError string
	}{
		{base(map[string]string{"TFC_VAULT_BACKED_AWS_AUTH_TYPE": "iam_user"}), "plan",
			runner.VaultRead{Address: "https://vault.test", TokenFile: runner.FilesDir + "/vault/default/token", Method: "GET", Path: "aws/creds/deployer"}, ""},
		{base(map[string]string{"TFC_VAULT_BACKED_AWS_AUTH_TYPE": "assumed_role", "TFC_VAULT_BACKED_AWS_MOUNT_PATH": "/team/aws/",
			"TFC_VAULT_BACKED_AWS_RUN_ROLE_ARN": "arn:run", "TFC_VAULT_BACKED_AWS_APPLY_ROLE_ARN": "arn:apply", "TFC_VAULT_BACKED_AWS_APPLY_VAULT_ROLE": "writer"}), "apply",
			runner.VaultRead{Address: "https://vault.test", TokenFile: runner.FilesDir + "/vault/default/token", Method: "POST", Path: "team/aws/sts/writer", Data: map[string]string{"role_arn": "arn:apply"}}, ""},
		{base(map[string]string{"TFC_VAULT_BACKED_AWS_AUTH_TYPE": "federation_token", "TFC_VAULT_BACKED_AWS_RUN_ROLE_ARN": "arn:run"}), "plan",
			runner.VaultRead{Address: "https://vault.test", TokenFile: runner.FilesDir + "/vault/default/token", Method: "POST", Path: "aws/sts/deployer"}, ""},
		{base(nil), "plan", runner.VaultRead{}, "is not iam_user, assumed_role or federation_token"},
		{base(map[string]string{"TFC_VAULT_BACKED_AWS_AUTH_TYPE": "iam_user", "TFC_VAULT_PROVIDER_AUTH": "false"}), "plan", runner.VaultRead{}, "set TFC_VAULT_PROVIDER_AUTH"},
		{base(map[string]string{"TFC_VAULT_BACKED_AWS_AUTH_TYPE": "iam_user", "TFC_VAULT_BACKED_AWS_MOUNT_PATH": "a/../b"}), "plan", runner.VaultRead{}, "is not the path of a secrets engine"},
		{base(map[string]string{"TFC_VAULT_BACKED_AWS_AUTH_TYPE": "iam_user", "TFC_VAULT_BACKED_AWS_PLAN_VAULT_ROLE": ".."}), "plan", runner.VaultRead{},
			`TFC_VAULT_BACKED_AWS_PLAN_VAULT_ROLE or TFC_VAULT_BACKED_AWS_RUN_VAULT_ROLE: ".." is not a Vault role's name`},
	} {
		vars, err := Variables(Configs(tc.env), tc.phase, "run-1", mint)
		if tc.wantError != "" {
			if err == nil || core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%v: %v, want %q", tc.env, err, tc.wantError)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		byKey, loginAt, readAt := map[string]runner.Variable{}, -1, -1
		for i, v := range vars {
			byKey[v.Key] = v
			switch v.Category {
			case runner.CategoryVaultLogin:
				loginAt = i
			case runner.CategoryVaultRead:
				readAt = i
			}
		}
		var got runner.VaultRead
		if v := byKey["vault-backed-aws/default/credentials"]; json.Unmarshal([]byte(v.Value), &got) != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %v: the read %+v, want %+v", tc.phase, tc.env, got, tc.want)
		}
		if loginAt < 0 || readAt < loginAt {
			t.Errorf("the read (%d) does not follow the Vault login (%d)", readAt, loginAt)
		}
		if v := byKey["AWS_SHARED_CREDENTIALS_FILE"]; v.Value != runner.FilesDir+"/vault-backed-aws/default/credentials" || !v.Expand {
			t.Errorf("AWS_SHARED_CREDENTIALS_FILE: %+v", v)
		}
		if v := byKey["TF_VAR_tfc_vault_backed_aws_dynamic_credentials"]; v.Value != `{"default":{"shared_credentials_file":"${TERRACE_RUN_FILES}/vault-backed-aws/default/credentials"},"aliases":{}}` {
			t.Errorf("the input variable: %+v", v)
		}
	}
}
