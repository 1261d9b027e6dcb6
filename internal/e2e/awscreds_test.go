package e2e

import (
	"context"
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

	"github.com/aws/aws-sdk-go-v2/config"
	tfe "github.com/hashicorp/go-tfe"
	"golang.org/x/oauth2/google"

	"github.com/terracehq/terrace/internal/idtoken/idtokentest"
	"github.com/terracehq/terrace/internal/testenv"
)

// awsHelperVar, set, makes the test binary the AWS client a run's
// provisioner starts (awsHelper): "default" for the default credential
// chain, else the shared config file to load.
const awsHelperVar = "TERRACE_E2E_AWS"

// awsHelper is what an AWS provider does with the environment a run gets:
// the AWS SDK for Go (v2) loads its configuration as it finds it and
// retrieves credentials, which for dynamic credentials means exchanging
// the web identity token at STS (AWS_ENDPOINT_URL_STS: the test's). It
// prints the access key ID it got.
func awsHelper(mode string) int {
	ctx := context.Background()
	var opts []func(*config.LoadOptions) error
	if mode != "default" {
		opts = append(opts, config.WithSharedConfigFiles([]string{mode}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loading the AWS configuration:", err)
		return 1
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "retrieving AWS credentials:", err)
		return 1
	}
	fmt.Println(creds.AccessKeyID)
	return 0
}

// cloudWorkspace starts a server with an organization acme and a
// workspace of that name with env as its environment variables, and
// returns them with the test binary's path (the cloud client a
// provisioner starts: awsHelper, gcpHelper).
func cloudWorkspace(t *testing.T, name string, env map[string]string) (*testenv.Env, *tfe.Workspace, string) {
	t.Helper()
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String(k), Value: tfe.String(v), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}
	}
	return e, ws, exe
}

// verifyRunToken checks a run's workload identity token as a relying party
// would (the issuer's keys, audience) and its claims: the run, phase and
// workspace (wsName, of organization acme's default project).
func verifyRunToken(t *testing.T, e *testenv.Env, what, tok, audience, phase, runID, wsID, wsName string) {
	t.Helper()
	claims := idtokentest.Verify(t, e.HTTP, e.URL, tok, audience)
	idtokentest.Claims(t, what, claims, map[string]any{"terraform_run_phase": phase, "terraform_run_id": runID, "terraform_workspace_id": wsID,
		"sub": "organization:acme:project:Default Project:workspace:" + wsName + ":run_phase:" + phase})
}

// stsCall is one AssumeRoleWithWebIdentity the stand-in STS answered.
type stsCall struct{ Role, Session, Token string }

// TestAWSDynamicCredentials: HCP Terraform's AWS dynamic credentials. A
// workspace sets TFC_AWS_PROVIDER_AUTH and the roles of its plans and
// applies, and a tagged configuration (ALT) for an aliased provider with
// its own role and audience. The real AWS SDK, given nothing but what the
// run has (AWS_CONFIG_FILE for the default; the file that the input
// variable tfc_aws_dynamic_credentials names for ALT), exchanges the
// run's token at STS for the phase's role. STS is a stand-in on 127.0.0.1
// that records each request; the test then verifies each token as AWS
// would (issuer's key set, audience). A plan-only run shows the plan's
// role and token; a workspace that turns the credentials on without a role
// gets a run that errors saying what to set.
func TestAWSDynamicCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var calls []stsCall
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("WebIdentityToken") == "" {
			http.Error(w, "not an AssumeRoleWithWebIdentity", http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls = append(calls, stsCall{Role: r.Form.Get("RoleArn"), Session: r.Form.Get("RoleSessionName"), Token: r.Form.Get("WebIdentityToken")})
		n := len(calls)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIATERRACE%d</AccessKeyId><SecretAccessKey>secret</SecretAccessKey>
<SessionToken>session</SessionToken><Expiration>%s</Expiration></Credentials></AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>req-%d</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`, n, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), n)
	}))
	t.Cleanup(sts.Close)

	const planRole, applyRole, altRole = "arn:aws:iam::111111111111:role/plan", "arn:aws:iam::111111111111:role/apply", "arn:aws:iam::222222222222:role/alt"
	e, ws, exe := cloudWorkspace(t, "network", map[string]string{
		"TFC_AWS_PROVIDER_AUTH": "true", "TFC_AWS_PLAN_ROLE_ARN": planRole, "TFC_AWS_APPLY_ROLE_ARN": applyRole,
		"TFC_AWS_PROVIDER_AUTH_ALT": "true", "TFC_AWS_RUN_ROLE_ARN_ALT": altRole, "TFC_AWS_WORKLOAD_IDENTITY_AUDIENCE_ALT": "sts.alt.test",
		"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_STS": sts.URL, "AWS_EC2_METADATA_DISABLED": "true",
	})
	c := e.Client
	const declare = `
variable "tfc_aws_dynamic_credentials" {
  type = object({
    default = object({ shared_config_file = string })
    aliases = map(object({ shared_config_file = string }))
  })
}
locals {
  creds = var.tfc_aws_dynamic_credentials
}
`
	verify := func(what, tok, audience, phase, runID string) {
		t.Helper()
		verifyRunToken(t, e, what, tok, audience, phase, runID, ws.ID, "network")
	}

	// The plan: its files, as the plan reads them.
	cv := uploadConfig(ctx, t, c, ws.ID, declare+`
resource "terraform_data" "files" {
  input = {
    default = file(local.creds.default.shared_config_file)
    token   = file("${dirname(local.creds.default.shared_config_file)}/token")
    alt     = file(local.creds.aliases["ALT"].shared_config_file)
  }
}
`)
	plan, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if plan = waitRun(ctx, t, c, plan.ID, 2*time.Minute, tfe.RunPlannedAndFinished, tfe.RunErrored); plan.Status != tfe.RunPlannedAndFinished {
		t.Fatalf("the plan-only run ended %s: %s\n%s", plan.Status, erroredReason(ctx, t, c, plan.ID), strings.Join(phaseLogs(ctx, t, e, plan), "\n"))
	}
	raw, err := c.Plans.ReadJSONOutput(ctx, plan.Plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	var pj struct {
		PlannedValues struct {
			RootModule struct {
				Resources []struct {
					Values struct {
						Input struct{ Default, Token, Alt string } `json:"input"`
					} `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"planned_values"`
	}
	if err := json.Unmarshal(raw, &pj); err != nil || len(pj.PlannedValues.RootModule.Resources) != 1 {
		t.Fatalf("the plan JSON (%v): %.500s", err, raw)
	}
	files := pj.PlannedValues.RootModule.Resources[0].Values.Input
	for what, f := range map[string]struct{ text, role string }{"default": {files.Default, planRole}, "ALT": {files.Alt, altRole}} {
		if !strings.HasPrefix(f.text, "[default]\n") || !strings.Contains(f.text, "role_arn = "+f.role+"\n") ||
			!strings.Contains(f.text, "role_session_name = "+plan.ID+"\n") || !strings.Contains(f.text, "web_identity_token_file = /") {
			t.Errorf("the plan's %s shared config file:\n%s", what, f.text)
		}
	}
	verify("the plan's token", files.Token, "aws.workload.identity", "plan", plan.ID)

	// The apply: the AWS SDK exchanges the apply's tokens.
	out := t.TempDir()
	cv = uploadConfig(ctx, t, c, ws.ID, declare+fmt.Sprintf(`
resource "terraform_data" "aws" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      %[1]s=default '%[2]s' > '%[3]s/default.txt'
      %[1]s='${local.creds.aliases["ALT"].shared_config_file}' '%[2]s' > '%[3]s/alt.txt'
      echo "the aws token is $(cat "$(dirname "$AWS_CONFIG_FILE")/token")"
    EOT
  }
}
`, awsHelperVar, exe, out))
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	logs := func() string { return strings.Join(phaseLogs(ctx, t, e, r), "\n") }
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, c, r.ID), logs())
	}
	mu.Lock()
	got := append([]stsCall{}, calls...)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("STS got %d requests, want 2 (default, ALT): %+v", len(got), got)
	}
	for i, want := range []struct{ file, role, audience string }{{"default.txt", applyRole, "aws.workload.identity"}, {"alt.txt", altRole, "sts.alt.test"}} {
		if b, err := os.ReadFile(filepath.Join(out, want.file)); err != nil || strings.TrimSpace(string(b)) != fmt.Sprintf("ASIATERRACE%d", i+1) {
			t.Errorf("the SDK's credentials in %s: %q (%v)", want.file, b, err)
		}
		if got[i].Role != want.role || got[i].Session != r.ID {
			t.Errorf("STS request %d: role %s, session %s; want %s, %s", i+1, got[i].Role, got[i].Session, want.role, r.ID)
		}
		verify(want.file+"'s token", got[i].Token, want.audience, "apply", r.ID)
	}
	if l := logs(); strings.Contains(l, got[0].Token) || !strings.Contains(l, "the aws token is ***") {
		t.Errorf("the apply log does not mask the token:\n%s", l)
	}

	// Turned on without a role: the run errors, saying what to set.
	bare, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("bare")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Variables.Create(ctx, bare.ID, tfe.VariableCreateOptions{Key: tfe.String("TFC_AWS_PROVIDER_AUTH"), Value: tfe.String("true"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
		t.Fatal(err)
	}
	r = createRun(ctx, t, c, bare.ID, uploadConfig(ctx, t, c, bare.ID, `resource "terraform_data" "x" {}`).ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunErrored {
		t.Fatalf("a run with AWS credentials on and no role ended %s", r.Status)
	}
	if why := erroredReason(ctx, t, c, r.ID) + strings.Join(phaseLogs(ctx, t, e, r), "\n"); !strings.Contains(why, "TFC_AWS_RUN_ROLE_ARN") {
		t.Errorf("the run errored without saying which role to set: %s", why)
	}
}

// gcpHelperVar, set, makes the test binary the Google Cloud client a
// run's provisioner starts (gcpHelper): "default" for application default
// credentials, else the credential file to load. gcpEndpointVar is the
// stand-in for Google's STS and IAM credentials endpoints.
const (
	gcpHelperVar   = "TERRACE_E2E_GCP"
	gcpEndpointVar = "TERRACE_E2E_GCP_ENDPOINT"
)

// gcpHelper is what the Google provider does with the environment a run
// gets: Google's OAuth2 library (golang.org/x/oauth2/google) finds the
// credentials (application default credentials: the file
// GOOGLE_APPLICATION_CREDENTIALS names) and gets an access token, which
// for an external account means exchanging the file's token at STS and
// impersonating the service account. Only the endpoints are the test's:
// the library takes them from the file, which names Google's. It prints
// the access token it got.
func gcpHelper(mode string) int {
	ctx := context.Background()
	const scope = "https://www.googleapis.com/auth/cloud-platform"
	var raw []byte
	if mode == "default" {
		creds, err := google.FindDefaultCredentials(ctx, scope)
		if err != nil {
			fmt.Fprintln(os.Stderr, "finding application default credentials:", err)
			return 1
		}
		raw = creds.JSON
	} else {
		var err error
		if raw, err = os.ReadFile(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	end := os.Getenv(gcpEndpointVar)
	raw = []byte(strings.NewReplacer("https://sts.googleapis.com", end, "https://iamcredentials.googleapis.com", end).Replace(string(raw)))
	creds, err := google.CredentialsFromJSONWithType(ctx, raw, google.ExternalAccount, scope)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loading the credential file:", err)
		return 1
	}
	tok, err := creds.TokenSource.Token()
	if err != nil {
		fmt.Fprintln(os.Stderr, "getting an access token:", err)
		return 1
	}
	fmt.Println(tok.AccessToken)
	return 0
}

// TestGoogleDynamicCredentials: HCP Terraform's Google Cloud dynamic
// credentials. A workspace sets TFC_GCP_PROVIDER_AUTH, its workload
// identity provider (by name) and the service accounts of its plans and
// applies, and a tagged configuration (OPS) names its provider by parts,
// with its own service account and audience. Google's OAuth2 library,
// given what the run has (GOOGLE_APPLICATION_CREDENTIALS; the file that
// tfc_gcp_dynamic_credentials names for OPS), exchanges the apply's token
// at STS for the provider and impersonates the apply's service account.
// STS and IAM credentials are a stand-in on 127.0.0.1 that records each
// request; the test verifies each token as Google would.
func TestGoogleDynamicCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	t.Parallel()
	ctx := context.Background()
	type exchange struct{ Audience, Token string }
	var mu sync.Mutex
	var exchanges []exchange
	var accounts []string
	gcloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/token":
			if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
				r.Form.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt" {
				http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
				return
			}
			exchanges = append(exchanges, exchange{Audience: r.Form.Get("audience"), Token: r.Form.Get("subject_token")})
			fmt.Fprintf(w, `{"access_token":"federated-%d","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":3600}`, len(exchanges))
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/projects/-/serviceAccounts/") && strings.HasSuffix(r.URL.Path, ":generateAccessToken"):
			if want := fmt.Sprintf("Bearer federated-%d", len(exchanges)); r.Header.Get("Authorization") != want {
				http.Error(w, `{"error":"unauthenticated"}`, http.StatusUnauthorized)
				return
			}
			accounts = append(accounts, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/projects/-/serviceAccounts/"), ":generateAccessToken"))
			fmt.Fprintf(w, `{"accessToken":"ya29.terrace-%d","expireTime":%q}`, len(accounts), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(gcloud.Close)

	const provider, opsProvider = "projects/123/locations/global/workloadIdentityPools/terrace/providers/runs", "projects/456/locations/global/workloadIdentityPools/ops/providers/runs"
	e, ws, exe := cloudWorkspace(t, "data", map[string]string{
		"TFC_GCP_PROVIDER_AUTH": "true", "TFC_GCP_WORKLOAD_PROVIDER_NAME": provider,
		"TFC_GCP_PLAN_SERVICE_ACCOUNT_EMAIL": "plan@acme.iam.gserviceaccount.com", "TFC_GCP_APPLY_SERVICE_ACCOUNT_EMAIL": "apply@acme.iam.gserviceaccount.com",
		"TFC_GCP_PROVIDER_AUTH_OPS": "true", "TFC_GCP_PROJECT_NUMBER_OPS": "456", "TFC_GCP_WORKLOAD_POOL_ID_OPS": "ops", "TFC_GCP_WORKLOAD_PROVIDER_ID_OPS": "runs",
		"TFC_GCP_RUN_SERVICE_ACCOUNT_EMAIL_OPS": "ops@acme.iam.gserviceaccount.com", "TFC_GCP_WORKLOAD_IDENTITY_AUDIENCE_OPS": "gcp.ops.test",
		gcpEndpointVar: gcloud.URL,
	})
	c := e.Client
	out := t.TempDir()
	cv := uploadConfig(ctx, t, c, ws.ID, fmt.Sprintf(`
variable "tfc_gcp_dynamic_credentials" {
  type = object({
    default = object({ credentials = string })
    aliases = map(object({ credentials = string }))
  })
}
resource "terraform_data" "gcp" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      %[1]s=default '%[2]s' > '%[3]s/default.txt'
      %[1]s='${var.tfc_gcp_dynamic_credentials.aliases["OPS"].credentials}' '%[2]s' > '%[3]s/ops.txt'
    EOT
  }
}
`, gcpHelperVar, exe, out))
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, c, r.ID), strings.Join(phaseLogs(ctx, t, e, r), "\n"))
	}
	mu.Lock()
	gotEx, gotAccounts := append([]exchange{}, exchanges...), append([]string{}, accounts...)
	mu.Unlock()
	if len(gotEx) != 2 || len(gotAccounts) != 2 {
		t.Fatalf("Google got %d token exchanges and %d impersonations, want 2 and 2 (default, OPS): %+v %v", len(gotEx), len(gotAccounts), gotEx, gotAccounts)
	}
	for i, want := range []struct{ file, provider, audience, account string }{
		{"default.txt", provider, "https://iam.googleapis.com/" + provider, "apply@acme.iam.gserviceaccount.com"},
		{"ops.txt", opsProvider, "gcp.ops.test", "ops@acme.iam.gserviceaccount.com"},
	} {
		if b, err := os.ReadFile(filepath.Join(out, want.file)); err != nil || strings.TrimSpace(string(b)) != fmt.Sprintf("ya29.terrace-%d", i+1) {
			t.Errorf("the library's access token in %s: %q (%v)", want.file, b, err)
		}
		if gotEx[i].Audience != "//iam.googleapis.com/"+want.provider || gotAccounts[i] != want.account {
			t.Errorf("exchange %d: for %s, impersonating %s; want %s, %s", i+1, gotEx[i].Audience, gotAccounts[i], "//iam.googleapis.com/"+want.provider, want.account)
		}
		claims := idtokentest.Verify(t, e.HTTP, e.URL, gotEx[i].Token, want.audience)
		idtokentest.Claims(t, want.file+"'s token", claims, map[string]any{"terraform_run_phase": "apply", "terraform_run_id": r.ID, "terraform_workspace_id": ws.ID})
	}
}
