// Package dyncreds gives runs HCP Terraform's dynamic provider
// credentials for AWS: a run whose environment sets
// TFC_AWS_PROVIDER_AUTH=true gets, in each phase, a workload identity
// token (internal/idtoken) for the configuration's audience and an AWS
// shared config file that assumes the phase's role with it, which the AWS
// provider, the AWS CLI and every AWS SDK read on their own
// (AWS_CONFIG_FILE). Tagged configurations (TFC_AWS_PROVIDER_AUTH_<TAG>,
// for aliased providers) get theirs too; the input variable
// tfc_aws_dynamic_credentials says where each file is, for a
// configuration that declares it:
//
//	provider "aws" {
//	  alias               = "other"
//	  shared_config_files = [var.tfc_aws_dynamic_credentials.aliases["OTHER"].shared_config_file]
//	}
//
// The server reads the run's variables and mints the tokens
// (server/adapters_jobs.go); the runner writes the files into the job's
// folder (runner.CategoryFile), which goes when the job ends. See
// docs/design/identity.md.
package dyncreds

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/runner"
)

// The run's environment variables that configure AWS, each with an
// optional _<TAG> suffix.
const (
	AWSAuthVar         = "TFC_AWS_PROVIDER_AUTH"
	AWSRunRoleVar      = "TFC_AWS_RUN_ROLE_ARN"
	AWSPlanRoleVar     = "TFC_AWS_PLAN_ROLE_ARN"
	AWSApplyRoleVar    = "TFC_AWS_APPLY_ROLE_ARN"
	AWSAudienceVar     = "TFC_AWS_WORKLOAD_IDENTITY_AUDIENCE"
	AWSDefaultAudience = "aws.workload.identity"
	// AWSInputVar is the input variable that names each configuration's
	// shared config file.
	AWSInputVar = "tfc_aws_dynamic_credentials"
)

// tagRE is what a configuration's tag may be: letters, digits and
// underscores (TYPE is reserved).
var tagRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Config is one AWS configuration a run's environment asks for.
type Config struct {
	// Tag is "" for the default configuration, else the suffix of its
	// variables' names (without the underscore).
	Tag      string
	Audience string
	env      map[string]string
}

func (c Config) get(name string) string {
	if c.Tag != "" {
		name += "_" + c.Tag
	}
	return strings.TrimSpace(c.env[name])
}

func (c Config) name(v string) string {
	if c.Tag != "" {
		return v + "_" + c.Tag
	}
	return v
}

// Configs returns the AWS configurations env (a run's environment
// variables) asks for: the default first, then by tag.
func Configs(env map[string]string) []Config {
	var out []Config
	for k, v := range env {
		if !strings.EqualFold(strings.TrimSpace(v), "true") {
			continue
		}
		tag, ok := "", k == AWSAuthVar
		if !ok && strings.HasPrefix(k, AWSAuthVar+"_") {
			tag = strings.TrimPrefix(k, AWSAuthVar+"_")
			ok = tagRE.MatchString(tag) && tag != "TYPE"
		}
		if !ok {
			continue
		}
		c := Config{Tag: tag, env: env}
		if c.Audience = c.get(AWSAudienceVar); c.Audience == "" {
			c.Audience = AWSDefaultAudience
		}
		out = append(out, c)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Tag < out[b].Tag })
	return out
}

// Role is the role the configuration assumes in phase (plan or apply):
// TFC_AWS_PLAN_ROLE_ARN or TFC_AWS_APPLY_ROLE_ARN, else
// TFC_AWS_RUN_ROLE_ARN. core.Invalid, saying what to set, without one.
func (c Config) Role(phase string) (string, error) {
	specific := AWSPlanRoleVar
	if phase == "apply" {
		specific = AWSApplyRoleVar
	}
	if r := c.get(specific); r != "" {
		return r, nil
	}
	if r := c.get(AWSRunRoleVar); r != "" {
		return r, nil
	}
	return "", core.Invalid("%s is true, but the %s has no role to assume: set %s (or %s)", c.name(AWSAuthVar), phase, c.name(AWSRunRoleVar), c.name(specific))
}

// folder is the configuration's folder among the run files.
func (c Config) folder() string {
	if c.Tag == "" {
		return "aws/default"
	}
	return "aws/tag-" + c.Tag
}

// ConfigFile is where the configuration's shared config file is in a job
// (runner.FilesDir standing for the run files folder).
func (c Config) ConfigFile() string { return runner.FilesDir + "/" + c.folder() + "/config" }

// Variables are what a run's phase gets for cs, given each configuration's
// token (tokens[i] for cs[i]): per configuration its token and shared
// config file (profile default: the phase's role, assumed with the token,
// the session named after the run); AWS_CONFIG_FILE naming the default
// configuration's file; and the input variable tfc_aws_dynamic_credentials
// naming every file. core.Invalid when a configuration has no role for the
// phase.
func Variables(cs []Config, tokens []string, phase, runID string) ([]runner.Variable, error) {
	type file struct {
		SharedConfigFile string `json:"shared_config_file"`
	}
	input := struct {
		Default file            `json:"default"`
		Aliases map[string]file `json:"aliases"`
	}{Aliases: map[string]file{}}
	var out []runner.Variable
	for i, c := range cs {
		role, err := c.Role(phase)
		if err != nil {
			return nil, err
		}
		token := runner.FilesDir + "/" + c.folder() + "/token"
		cfg := "[default]\nrole_arn = " + oneLine(role) + "\nweb_identity_token_file = " + token + "\nrole_session_name = " + oneLine(runID) + "\n"
		out = append(out,
			runner.Variable{Key: c.folder() + "/token", Value: tokens[i], Category: runner.CategoryFile, Sensitive: true},
			runner.Variable{Key: c.folder() + "/config", Value: cfg, Category: runner.CategoryFile})
		if c.Tag == "" {
			input.Default.SharedConfigFile = c.ConfigFile()
			out = append(out, runner.Variable{Key: "AWS_CONFIG_FILE", Value: c.ConfigFile(), Category: "env", Expand: true})
		} else {
			input.Aliases[c.Tag] = file{SharedConfigFile: c.ConfigFile()}
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	// A JSON object is an HCL object expression, as terraform parses the
	// value of a TF_VAR_ variable of an object type.
	b, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	return append(out, runner.Variable{Key: "TF_VAR_" + AWSInputVar, Value: string(b), Category: "env", Expand: true}), nil
}

// oneLine keeps a value on its line of the shared config file.
func oneLine(s string) string { return strings.NewReplacer("\n", "", "\r", "").Replace(s) }
