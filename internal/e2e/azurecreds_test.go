package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	tfe "github.com/hashicorp/go-tfe"
)

// azureHelperVar, set, makes the test binary the Azure client a run's
// provisioner starts (azureHelper): "default" for what the azurerm
// provider reads of the environment (ARM_CLIENT_ID,
// ARM_OIDC_TOKEN_FILE_PATH, ARM_TENANT_ID), else
// "<client ID file>,<token file>" for an aliased provider's files.
// azureAuthorityVar is the stand-in Microsoft Entra ID.
const (
	azureHelperVar    = "TERRACE_E2E_AZURE"
	azureAuthorityVar = "TERRACE_E2E_AZURE_AUTHORITY"
)

// azureHelper is what the azurerm provider does with dynamic credentials:
// a client assertion login to Microsoft Entra ID with the token file's
// token, as the client ID, through the Azure SDK for Go's own credential
// (azidentity, on Microsoft's authentication library). Only the authority
// host is the test's. It prints the access token it got.
func azureHelper(mode string) int {
	clientID, tokenFile := os.Getenv("ARM_CLIENT_ID"), os.Getenv("ARM_OIDC_TOKEN_FILE_PATH")
	if mode != "default" {
		idFile, tf, _ := strings.Cut(mode, ",")
		b, err := os.ReadFile(idFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		clientID, tokenFile = string(b), tf
	}
	if os.Getenv("ARM_USE_OIDC") != "true" || clientID == "" || tokenFile == "" {
		fmt.Fprintln(os.Stderr, "the environment does not ask for OIDC: ARM_USE_OIDC, ARM_CLIENT_ID, ARM_OIDC_TOKEN_FILE_PATH")
		return 1
	}
	assertion := func(context.Context) (string, error) {
		b, err := os.ReadFile(tokenFile)
		return string(b), err
	}
	cred, err := azidentity.NewClientAssertionCredential(os.Getenv("ARM_TENANT_ID"), clientID, assertion, &azidentity.ClientAssertionCredentialOptions{
		ClientOptions:            azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: os.Getenv(azureAuthorityVar)}},
		DisableInstanceDiscovery: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "the client assertion credential:", err)
		return 1
	}
	tok, err := cred.GetToken(context.Background(), policy.TokenRequestOptions{Scopes: []string{"https://management.azure.com/.default"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "getting an access token:", err)
		return 1
	}
	fmt.Println(tok.Token)
	return 0
}

// TestAzureDynamicCredentials: HCP Terraform's Azure dynamic credentials.
// A workspace sets TFC_AZURE_PROVIDER_AUTH and the client IDs of its plans
// and applies, and a tagged configuration (SHARED) its own client ID and
// audience. The Azure SDK's client assertion credential, given what the
// run has (the environment the azurerm provider reads; the files
// tfc_azure_dynamic_credentials names for SHARED), logs in to a stand-in
// Microsoft Entra ID on 127.0.0.1 (TLS: the library wants https) that
// records each request; the test verifies each token as Entra ID would
// (issuer's keys, audience) and the client ID it came with.
func TestAzureDynamicCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	t.Parallel()
	ctx := context.Background()
	type login struct{ Tenant, Client, Assertion string }
	var mu sync.Mutex
	var logins []login
	entra := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && rest == "v2.0/.well-known/openid-configuration":
			base := "https://" + r.Host + "/" + tenant
			fmt.Fprintf(w, `{"token_endpoint":%q,"authorization_endpoint":%q,"issuer":%q}`, base+"/oauth2/v2.0/token", base+"/oauth2/v2.0/authorize", base+"/v2.0")
		case r.Method == http.MethodPost && rest == "oauth2/v2.0/token":
			if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" ||
				r.Form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
				http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
				return
			}
			mu.Lock()
			logins = append(logins, login{Tenant: tenant, Client: r.Form.Get("client_id"), Assertion: r.Form.Get("client_assertion")})
			n := len(logins)
			mu.Unlock()
			fmt.Fprintf(w, `{"access_token":"entra-%d","token_type":"Bearer","expires_in":3600}`, n)
		default:
			http.Error(w, `{"error":"not_found"}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(entra.Close)
	entraCA := filepath.Join(t.TempDir(), "entra-ca.pem")
	if err := os.WriteFile(entraCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: entra.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	const tenant = "11111111-2222-3333-4444-555555555555"
	e, ws, exe := cloudWorkspace(t, "azure", map[string]string{
		"TFC_AZURE_PROVIDER_AUTH": "true", "TFC_AZURE_PLAN_CLIENT_ID": "plan-client", "TFC_AZURE_APPLY_CLIENT_ID": "apply-client",
		"TFC_AZURE_PROVIDER_AUTH_SHARED": "true", "TFC_AZURE_RUN_CLIENT_ID_SHARED": "shared-client", "TFC_AZURE_WORKLOAD_IDENTITY_AUDIENCE_SHARED": "api://shared",
		"ARM_TENANT_ID": tenant, azureAuthorityVar: entra.URL + "/",
	})
	c := e.Client
	out := t.TempDir()
	cv := uploadConfig(ctx, t, c, ws.ID, fmt.Sprintf(`
variable "tfc_azure_dynamic_credentials" {
  type = object({
    default = object({ client_id_file_path = string, oidc_token_file_path = string })
    aliases = map(object({ client_id_file_path = string, oidc_token_file_path = string }))
  })
}
locals {
  shared = var.tfc_azure_dynamic_credentials.aliases["SHARED"]
}
output "plan_client" {
  value = file(var.tfc_azure_dynamic_credentials.default.client_id_file_path)
}
resource "terraform_data" "azure" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      SSL_CERT_FILE='%[4]s' %[1]s=default '%[2]s' > '%[3]s/default.txt'
      SSL_CERT_FILE='%[4]s' %[1]s='${local.shared.client_id_file_path},${local.shared.oidc_token_file_path}' '%[2]s' > '%[3]s/shared.txt'
      echo "the azure token is $(cat "$ARM_OIDC_TOKEN_FILE_PATH")"
    EOT
  }
}
`, azureHelperVar, exe, out, entraCA))
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	logs := func() string { return strings.Join(phaseLogs(ctx, t, e, r), "\n") }
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, c, r.ID), logs())
	}
	outs, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
	if err != nil || len(outs.Items) != 1 || outs.Items[0].Value != "plan-client" {
		t.Errorf("the plan's client ID file: %+v (%v)", outs, err)
	}
	mu.Lock()
	got := append([]login{}, logins...)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("Entra ID got %d logins, want 2 (default, SHARED): %+v", len(got), got)
	}
	for i, want := range []struct{ file, client, audience string }{{"default.txt", "apply-client", "api://AzureADTokenExchange"}, {"shared.txt", "shared-client", "api://shared"}} {
		if b, err := os.ReadFile(filepath.Join(out, want.file)); err != nil || strings.TrimSpace(string(b)) != fmt.Sprintf("entra-%d", i+1) {
			t.Errorf("the SDK's access token in %s: %q (%v)", want.file, b, err)
		}
		if got[i].Tenant != tenant || got[i].Client != want.client {
			t.Errorf("login %d: tenant %s, client %s; want %s, %s", i+1, got[i].Tenant, got[i].Client, tenant, want.client)
		}
		verifyRunToken(t, e, want.file+"'s token", got[i].Assertion, want.audience, "apply", r.ID, ws.ID, "azure")
	}
	if l := logs(); strings.Contains(l, got[0].Assertion) || !strings.Contains(l, "the azure token is ***") {
		t.Errorf("the apply log does not mask the token:\n%s", l)
	}
}
