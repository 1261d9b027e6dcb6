package dyncreds

import (
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
	}
	cs := Configs(env)
	var tags []string
	for _, c := range cs {
		tags = append(tags, c.Tag+"="+c.Audience)
	}
	if got := strings.Join(tags, ","); got != "=aws.workload.identity,A=aws.workload.identity,B=aud.b" {
		t.Fatalf("configurations: %s", got)
	}
	for _, tc := range []struct {
		c             Config
		phase, role   string
		wantErrSubstr string
	}{
		{cs[0], "plan", "arn:run", ""},
		{cs[0], "apply", "arn:apply", ""},
		{cs[2], "apply", "arn:b", ""},
		{cs[1], "plan", "", "TFC_AWS_RUN_ROLE_ARN_A (or TFC_AWS_PLAN_ROLE_ARN_A)"},
	} {
		role, err := tc.c.Role(tc.phase)
		if role != tc.role || (err == nil) != (tc.wantErrSubstr == "") || err != nil && (!strings.Contains(err.Error(), tc.wantErrSubstr) || core.KindOf(err) != core.KindInvalid) {
			t.Errorf("%q %s: %q, %v", tc.c.Tag, tc.phase, role, err)
		}
	}
	if _, err := Variables(cs, []string{"t0", "t1", "t2"}, "plan", "run-1"); err == nil {
		t.Error("variables for a configuration without a role")
	}
	vars, err := Variables([]Config{cs[0], cs[2]}, []string{"tok-default", "tok-b"}, "apply", "run-1")
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
		t.Errorf("the input variable: %+v", v)
	}
	if vars, err := Variables(nil, nil, "plan", "run-1"); vars != nil || err != nil {
		t.Errorf("no configuration: %v, %v", vars, err)
	}
}
