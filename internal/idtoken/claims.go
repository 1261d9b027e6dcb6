package idtoken

import (
	"context"
	"sort"
	"strings"
	"time"
)

// DefaultTTL is a token's lifetime when the site sets no time limit for
// the phase: HCP Terraform's default plan and apply timeout.
const DefaultTTL = 2 * time.Hour

// Environment variables of HCP Terraform's generic workload identity
// ("manually generating workload identity tokens"): a run whose
// variables set AUDIENCE gets a token for that audience in TOKEN;
// AUDIENCE_<TAG> gives TOKEN_<TAG>, one per tag.
const (
	AudienceVar = "TFC_WORKLOAD_IDENTITY_AUDIENCE"
	TokenVar    = "TFC_WORKLOAD_IDENTITY_TOKEN"
)

// Run is who a workspace run is, as its tokens say.
type Run struct {
	OrganizationID, OrganizationName string
	ProjectID, ProjectName           string
	WorkspaceID, WorkspaceName       string
	RunID                            string
	Phase                            string // plan | apply
}

// Workspace is the run's organization:…:project:…:workspace:… (the
// terraform_full_workspace claim, and the subject without the phase).
func (r Run) Workspace() string {
	return "organization:" + r.OrganizationName + ":project:" + r.ProjectName + ":workspace:" + r.WorkspaceName
}

// Subject is the tokens' sub, as HCP Terraform writes it.
func (r Run) Subject() string { return r.Workspace() + ":run_phase:" + r.Phase }

func (r Run) claims() map[string]any {
	return map[string]any{
		"terraform_organization_id":   r.OrganizationID,
		"terraform_organization_name": r.OrganizationName,
		"terraform_project_id":        r.ProjectID,
		"terraform_project_name":      r.ProjectName,
		"terraform_workspace_id":      r.WorkspaceID,
		"terraform_workspace_name":    r.WorkspaceName,
		"terraform_full_workspace":    r.Workspace(),
		"terraform_run_id":            r.RunID,
		"terraform_run_phase":         r.Phase,
	}
}

// Audiences returns the audiences a run's environment variables ask
// tokens for: the name of the variable each token goes in → its
// audience. Empty values ask for nothing.
func Audiences(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if v == "" {
			continue
		}
		switch {
		case k == AudienceVar:
			out[TokenVar] = v
		case strings.HasPrefix(k, AudienceVar+"_") && len(k) > len(AudienceVar)+1:
			out[TokenVar+"_"+strings.TrimPrefix(k, AudienceVar+"_")] = v
		}
	}
	return out
}

// Minted is a signed token and the variable it goes in.
type Minted struct {
	Name, Token string
}

// RunTokens mints the tokens a run's environment asks for (Audiences),
// in the order of the variables' names; none when it asks for none.
func (i *Issuer) RunTokens(ctx context.Context, r Run, audiences map[string]string, ttl time.Duration) ([]Minted, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	names := make([]string, 0, len(audiences))
	for n := range audiences {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Minted, 0, len(names))
	for _, n := range names {
		tok, err := i.RunToken(ctx, r, audiences[n], ttl)
		if err != nil {
			return nil, err
		}
		out = append(out, Minted{Name: n, Token: tok})
	}
	return out, nil
}

// RunToken mints one token of a run for audience.
func (i *Issuer) RunToken(ctx context.Context, r Run, audience string, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return i.Mint(ctx, Token{Subject: r.Subject(), Audience: []string{audience}, TTL: ttl, Claims: r.claims()})
}

// Deployment is who a stack deployment's run is, as its identity_token
// blocks' tokens say.
type Deployment struct {
	OrganizationID, OrganizationName string
	ProjectID, ProjectName           string
	StackID, StackName               string
	Deployment                       string
	Operation                        string // plan | apply
	// PlanID is the deployment run's ID.
	PlanID string
}

// Subject is the tokens' sub, as HCP Terraform writes it for stacks.
func (d Deployment) Subject() string {
	return "organization:" + d.OrganizationName + ":project:" + d.ProjectName + ":stack:" + d.StackName +
		":deployment:" + d.Deployment + ":operation:" + d.Operation
}

func (d Deployment) claims() map[string]any {
	return map[string]any{
		"terraform_organization_id":       d.OrganizationID,
		"terraform_organization_name":     d.OrganizationName,
		"terraform_project_id":            d.ProjectID,
		"terraform_project_name":          d.ProjectName,
		"terraform_stack_id":              d.StackID,
		"terraform_stack_name":            d.StackName,
		"terraform_stack_deployment_name": d.Deployment,
		"terraform_operation":             d.Operation,
		"terraform_plan_id":               d.PlanID,
	}
}

// DeploymentToken mints an identity_token block's token.
func (i *Issuer) DeploymentToken(ctx context.Context, d Deployment, audience []string, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return i.Mint(ctx, Token{Subject: d.Subject(), Audience: audience, TTL: ttl, Claims: d.claims()})
}
