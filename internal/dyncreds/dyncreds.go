// Package dyncreds gives runs HCP Terraform's dynamic provider
// credentials for AWS, Google Cloud, Vault (and Vault-backed AWS) and
// Azure. A run whose environment sets
// TFC_AWS_PROVIDER_AUTH=true (or TFC_GCP_PROVIDER_AUTH=true) gets, in each
// phase, a workload identity token (internal/idtoken) for the
// configuration's audience and the cloud's own credential file that
// exchanges it for the phase's role (an AWS shared config file assuming a
// role with a web identity token; a Google external account credential
// impersonating a service account), which the provider, the cloud's CLI
// and its SDKs read on their own (AWS_CONFIG_FILE,
// GOOGLE_APPLICATION_CREDENTIALS; Azure's providers take the token file
// itself, ARM_OIDC_TOKEN_FILE_PATH). For Vault (TFC_VAULT_PROVIDER_AUTH)
// the runner itself logs in with the token and hands the Vault token on
// (VAULT_TOKEN, or the file the input variable names). Tagged configurations
// (TFC_AWS_PROVIDER_AUTH_<TAG>, the other variables with _<TAG> too) are
// for aliased providers: the input variable tfc_aws_dynamic_credentials
// (tfc_gcp_…, tfc_vault_…, tfc_vault_backed_aws_…, tfc_azure_…) says
// where each file is, for a configuration that declares it:
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

// provider is one cloud's dynamic credentials: the names of its variables
// and what a configuration of it gets.
type provider struct {
	name string // folder among the run files, and order
	// prefix of its environment variables: <prefix>_PROVIDER_AUTH, …
	// (auth, when set, names the one that turns it on instead)
	prefix, auth string
	// identity is the suffix of the variables that say who a phase is:
	// <prefix>_RUN_<identity>, _PLAN_…, _APPLY_….
	identity string
	// input is the input variable naming each configuration's files;
	// fields are its entries' (all "" in the default entry of a run
	// without a default configuration).
	input  string
	fields []string
	// token is the name of the file the workload identity token goes in
	// ("": none, the configuration's credentials come from elsewhere).
	token string
	// files are a configuration's run files besides its token (c.path
	// says where each is), given who the phase is, the phase and the
	// run; its entry in the input variable; and, for the default
	// configuration, the environment variables that hand the files to
	// the provider.
	files func(c Config, who, phase, runID string) (files []runner.Variable, entry map[string]string, env []runner.Variable, err error)
	// audience is a configuration's token audience when it sets none.
	audience func(c Config) (string, error)
}

var (
	// AWS: a shared config file whose default profile assumes the
	// phase's role with the token.
	aws = &provider{name: "aws", prefix: "TFC_AWS", identity: "ROLE_ARN",
		input: "tfc_aws_dynamic_credentials", fields: []string{"shared_config_file"}, token: "token",
		audience: func(Config) (string, error) { return "aws.workload.identity", nil },
		files: func(c Config, role, _, runID string) ([]runner.Variable, map[string]string, []runner.Variable, error) {
			return oneFile(c, "config", "[default]\nrole_arn = "+runner.OneLine(role)+"\nweb_identity_token_file = "+c.path("token")+
				"\nrole_session_name = "+runner.OneLine(runID)+"\n", "shared_config_file", "AWS_CONFIG_FILE")
		}}
	// Google Cloud: an external account credential that exchanges the
	// token at Google's STS through the workload identity provider, then
	// impersonates the phase's service account.
	gcp = &provider{name: "gcp", prefix: "TFC_GCP", identity: "SERVICE_ACCOUNT_EMAIL",
		input: "tfc_gcp_dynamic_credentials", fields: []string{"credentials"}, token: "token",
		audience: func(c Config) (string, error) {
			p, err := c.workloadProvider()
			return "https://iam.googleapis.com/" + p, err
		},
		files: func(c Config, account, _, _ string) ([]runner.Variable, map[string]string, []runner.Variable, error) {
			p, err := c.workloadProvider()
			if err != nil {
				return nil, nil, nil, err
			}
			b, err := json.MarshalIndent(map[string]any{
				"type":                              "external_account",
				"audience":                          "//iam.googleapis.com/" + p,
				"subject_token_type":                "urn:ietf:params:oauth:token-type:jwt",
				"token_url":                         "https://sts.googleapis.com/v1/token",
				"credential_source":                 map[string]string{"file": c.path("token")},
				"service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/" + account + ":generateAccessToken",
			}, "", "  ")
			if err != nil {
				return nil, nil, nil, err
			}
			return oneFile(c, "credentials.json", string(b), "credentials", "GOOGLE_APPLICATION_CREDENTIALS")
		}}
	// Vault: the runner logs in to Vault with the token (the JWT auth
	// method at TFC_VAULT_AUTH_PATH, the phase's role) and writes the
	// Vault token it gets where the input variable's token_filename
	// says; the default configuration's token, address, namespace and CA
	// certificate go to the Vault provider as VAULT_TOKEN, VAULT_ADDR,
	// VAULT_NAMESPACE and VAULT_CACERT. See vault.go.
	vault = &provider{name: "vault", prefix: "TFC_VAULT", identity: "ROLE",
		input: "tfc_vault_dynamic_credentials", fields: []string{"token_filename", "address", "namespace", "ca_cert_file"}, token: "jwt",
		audience: func(Config) (string, error) { return "vault.workload.identity", nil },
		files:    vaultFiles}
	// Azure: the phase's client ID and the token, in files the azurerm
	// and azuread providers read (client_id_file_path,
	// oidc_token_file_path); for the default configuration ARM_USE_OIDC,
	// ARM_CLIENT_ID and ARM_OIDC_TOKEN_FILE_PATH, which they read on their
	// own (ARM_TENANT_ID and ARM_SUBSCRIPTION_ID are the workspace's).
	azure = &provider{name: "azure", prefix: "TFC_AZURE", identity: "CLIENT_ID",
		input: "tfc_azure_dynamic_credentials", fields: []string{"client_id_file_path", "oidc_token_file_path"}, token: "token",
		audience: func(Config) (string, error) { return "api://AzureADTokenExchange", nil },
		files: func(c Config, client, _, _ string) ([]runner.Variable, map[string]string, []runner.Variable, error) {
			return []runner.Variable{{Key: c.key("client_id"), Value: client, Category: runner.CategoryFile}},
				map[string]string{"client_id_file_path": c.path("client_id"), "oidc_token_file_path": c.path("token")},
				[]runner.Variable{{Key: "ARM_USE_OIDC", Value: "true", Category: "env"}, {Key: "ARM_CLIENT_ID", Value: client, Category: "env"},
					{Key: "ARM_OIDC_TOKEN_FILE_PATH", Value: c.path("token"), Category: "env", Expand: true}}, nil
		}}
	// Vault-backed AWS: the runner reads AWS credentials from Vault's AWS
	// secrets engine, logged in as the default Vault configuration, into
	// an AWS shared credentials file. After vault: its login comes first.
	// See vault.go.
	vaultAWS = &provider{name: "vault-backed-aws", prefix: "TFC_VAULT_BACKED_AWS", auth: "TFC_VAULT_BACKED_AWS_AUTH", identity: "VAULT_ROLE",
		input: "tfc_vault_backed_aws_dynamic_credentials", fields: []string{"shared_credentials_file"},
		files: vaultAWSFiles}
	providers = []*provider{aws, gcp, vault, vaultAWS, azure}
)

// oneFile is a configuration's one credential file (name, in the
// configuration's folder), its entry in the input variable (key: the
// file) and, for the default configuration, env naming the file.
func oneFile(c Config, name, content, key, env string) ([]runner.Variable, map[string]string, []runner.Variable, error) {
	path := c.path(name)
	return []runner.Variable{{Key: c.key(name), Value: content, Category: runner.CategoryFile}},
		map[string]string{key: path},
		[]runner.Variable{{Key: env, Value: path, Category: "env", Expand: true}}, nil
}

// tagRE is what a configuration's tag may be: letters, digits and
// underscores (TYPE is reserved).
var tagRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// accountRE is a service account's email, as it goes in a URL path.
var accountRE = regexp.MustCompile(`^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+$`)

// Config is one configuration a run's environment asks for.
type Config struct {
	p *provider
	// Tag is "" for the default configuration, else the suffix of its
	// variables' names (without the underscore).
	Tag string
	env map[string]string
}

// name is the name of the configuration's variable <prefix>_<v>[_<TAG>].
func (c Config) name(v string) string {
	n := c.p.prefix + "_" + v
	if c.Tag != "" {
		n += "_" + c.Tag
	}
	return n
}

func (c Config) get(v string) string { return strings.TrimSpace(c.env[c.name(v)]) }

// authVar is the variable that turns the configuration on:
// <prefix>_PROVIDER_AUTH[_<TAG>], or the provider's own name for it.
func (c Config) authVar() string {
	if c.p.auth == "" {
		return c.name("PROVIDER_AUTH")
	}
	if c.Tag == "" {
		return c.p.auth
	}
	return c.p.auth + "_" + c.Tag
}

// Provider is what the configuration is for: aws, gcp, vault,
// vault-backed-aws or azure.
func (c Config) Provider() string { return c.p.name }

// Configs returns the configurations env (a run's environment variables)
// asks for, in the order of providers (Vault's before Vault-backed AWS's,
// whose read needs its login); each provider's default first, then by
// tag.
func Configs(env map[string]string) []Config {
	var out []Config
	for _, p := range providers {
		auth := Config{p: p}.authVar()
		var cs []Config
		for k, v := range env {
			if !strings.EqualFold(strings.TrimSpace(v), "true") {
				continue
			}
			tag, ok := "", k == auth
			if !ok && strings.HasPrefix(k, auth+"_") {
				tag = strings.TrimPrefix(k, auth+"_")
				ok = tagRE.MatchString(tag) && tag != "TYPE"
			}
			if ok {
				cs = append(cs, Config{p: p, Tag: tag, env: env})
			}
		}
		sort.Slice(cs, func(a, b int) bool { return cs[a].Tag < cs[b].Tag })
		out = append(out, cs...)
	}
	return out
}

// Audience is the audience of the configuration's tokens:
// <prefix>_WORKLOAD_IDENTITY_AUDIENCE, else AWS's aws.workload.identity or
// the Google workload identity provider's default,
// https://iam.googleapis.com/projects/…/providers/….
func (c Config) Audience() (string, error) {
	if a := c.get("WORKLOAD_IDENTITY_AUDIENCE"); a != "" {
		return a, nil
	}
	return c.p.audience(c)
}

// Who is who the configuration is in phase (plan or apply): the role
// (AWS) or service account (Google Cloud) of <prefix>_PLAN_… or
// <prefix>_APPLY_…, else <prefix>_RUN_…. core.Invalid, saying what to
// set, without one.
func (c Config) Who(phase string) (string, error) {
	specific := "PLAN_" + c.p.identity
	if phase == "apply" {
		specific = "APPLY_" + c.p.identity
	}
	from := specific
	who := c.get(specific)
	if who == "" {
		from = "RUN_" + c.p.identity
		who = c.get(from)
	}
	if who == "" {
		return "", core.Invalid("%s is true, but the %s has no %s: set %s (or %s)", c.authVar(), phase,
			strings.ToLower(strings.ReplaceAll(c.p.identity, "_", " ")), c.name("RUN_"+c.p.identity), c.name(specific))
	}
	if strings.ContainsAny(who, "\r\n") {
		return "", core.Invalid("%s: a %s is one line", c.name(from), strings.ToLower(strings.ReplaceAll(c.p.identity, "_", " ")))
	}
	if c.p == gcp && !accountRE.MatchString(who) {
		return "", core.Invalid("%s: %q is not a service account's email", c.name(from), who)
	}
	return who, nil
}

// workloadProvider is the Google workload identity provider's resource
// name: TFC_GCP_WORKLOAD_PROVIDER_NAME, else made of
// TFC_GCP_PROJECT_NUMBER, TFC_GCP_WORKLOAD_POOL_ID and
// TFC_GCP_WORKLOAD_PROVIDER_ID.
func (c Config) workloadProvider() (string, error) {
	if n := c.get("WORKLOAD_PROVIDER_NAME"); n != "" {
		if !providerNameRE.MatchString(n) {
			return "", core.Invalid("%s: %q is not projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>", c.name("WORKLOAD_PROVIDER_NAME"), n)
		}
		return n, nil
	}
	num, pool, prov := c.get("PROJECT_NUMBER"), c.get("WORKLOAD_POOL_ID"), c.get("WORKLOAD_PROVIDER_ID")
	n := "projects/" + num + "/locations/global/workloadIdentityPools/" + pool + "/providers/" + prov
	if num == "" || pool == "" || prov == "" || !providerNameRE.MatchString(n) {
		return "", core.Invalid("%s is true, but its workload identity provider is not named: set %s, or %s, %s and %s", c.authVar(),
			c.name("WORKLOAD_PROVIDER_NAME"), c.name("PROJECT_NUMBER"), c.name("WORKLOAD_POOL_ID"), c.name("WORKLOAD_PROVIDER_ID"))
	}
	return n, nil
}

var providerNameRE = regexp.MustCompile(`^projects/[0-9]+/locations/global/workloadIdentityPools/[a-z0-9-]+/providers/[a-z0-9-]+$`)

// folder is the configuration's folder among the run files.
func (c Config) folder() string {
	if c.Tag == "" {
		return c.p.name + "/default"
	}
	return c.p.name + "/tag-" + c.Tag
}

// key is the run file name of the configuration's file name, as a
// runner.CategoryFile variable's Key has it; path is where the runner
// writes it (runner.FilesDir), as a file's content or an Expand
// variable names it.
func (c Config) key(name string) string  { return c.folder() + "/" + name }
func (c Config) path(name string) string { return runner.FilesDir + "/" + c.key(name) }

// Variables are what a run's phase gets for cs: per configuration its
// token (mint makes it, for the configuration's audience) and credential
// files; for a provider's default configuration the environment variables
// that name them; and per provider the input variable naming every
// configuration's. core.Invalid when a configuration cannot work in the
// phase, before anything is minted.
func Variables(cs []Config, phase, runID string, mint func(audience string) (string, error)) ([]runner.Variable, error) {
	type input struct {
		Default map[string]string            `json:"default"`
		Aliases map[string]map[string]string `json:"aliases"`
	}
	inputs := map[*provider]*input{}
	var out []runner.Variable
	type token struct {
		at       int // its variable in out
		audience string
	}
	var tokens []token
	for _, c := range cs {
		who, err := c.Who(phase)
		if err != nil {
			return nil, err
		}
		files, entry, env, err := c.p.files(c, who, phase, runID)
		if err != nil {
			return nil, err
		}
		if c.p.token != "" {
			audience, err := c.Audience()
			if err != nil {
				return nil, err
			}
			// The token first: a runner reads it (Vault's login) while it
			// takes the files in order.
			tokens = append(tokens, token{at: len(out), audience: audience})
			out = append(out, runner.Variable{Key: c.key(c.p.token), Category: runner.CategoryFile, Sensitive: true})
		}
		out = append(out, files...)
		in := inputs[c.p]
		if in == nil {
			in = &input{Default: map[string]string{}, Aliases: map[string]map[string]string{}}
			for _, f := range c.p.fields {
				in.Default[f] = ""
			}
			inputs[c.p] = in
		}
		if c.Tag == "" {
			in.Default = entry
			out = append(out, env...)
		} else {
			in.Aliases[c.Tag] = entry
		}
	}
	for _, p := range providers {
		if in := inputs[p]; in != nil {
			// A JSON object is an HCL object expression, as terraform
			// parses the value of a TF_VAR_ variable of an object type.
			b, err := json.Marshal(in)
			if err != nil {
				return nil, err
			}
			out = append(out, runner.Variable{Key: "TF_VAR_" + p.input, Value: string(b), Category: "env", Expand: true})
		}
	}
	for _, t := range tokens {
		var err error
		if out[t.at].Value, err = mint(t.audience); err != nil {
			return nil, err
		}
	}
	return out, nil
}
