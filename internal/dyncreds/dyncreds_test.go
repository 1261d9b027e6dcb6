package dyncreds

import (
	"encoding/json"
	"strings"
	"testing"

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
		{cs[4], "plan", "", "is not a service account's email"},
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
	byKey := map[string]runner.Variable{}
	for _, v := range vars {
		byKey[v.Key] = v
	}
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

func errText(err error) string {
	if core.KindOf(err) == core.KindInvalid {
		return "!invalid"
	} else if err != nil {
		return "!" + err.Error()
	}
	return ""
}
