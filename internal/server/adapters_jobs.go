package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/dyncreds"
	"github.com/terracehq/terrace/internal/idtoken"
	"github.com/terracehq/terrace/internal/jobapi"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/sitesettings"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/workspace"
)

// wireJobs builds the job protocol (internal/jobapi) that the in-process
// runner and `terrace agent` share, and connects agent pools to tokens,
// workspaces and projects.
func (s *Server) wireJobs() error {
	s.AgentPools.Auth = s.Auth
	s.AgentPools.Lookup = poolLookup{s.Workspaces, s.Projects}
	s.AgentPools.HeartbeatTimeout = s.cfg.JobHeartbeatTimeout
	s.Forwards.Live = s.AgentPools.Live
	s.Auth.SetAgentPoolResolver(s.AgentPools)
	jobs, err := jobapi.NewServer(jobapi.Options{
		Runs: s.Runs, Agents: s.AgentPools, Forwards: s.Forwards, Tests: s.ModuleTests, Hostname: s.Hostname, Logger: s.logger.With("component", "jobs"),
		Sources: jobapi.Sources{
			Archive: func(ctx context.Context, cvID string) (io.ReadCloser, error) {
				rc, _, err := s.ConfigVersions.OpenArchiveUnchecked(ctx, cvID)
				return rc, err
			},
			State: func(ctx context.Context, workspaceID string) ([]byte, string, error) {
				v, raw, err := s.States.CurrentState(ctx, workspaceID)
				if core.KindOf(err) == core.KindNotFound {
					return nil, "", nil
				}
				if err != nil {
					return nil, "", err
				}
				return raw, v.RunID, nil
			},
			Variables: func(ctx context.Context, org, workspaceID, projectID string) ([]runner.Variable, error) {
				vars, err := s.Variables.EffectiveVariablesOf(ctx, org, workspaceID, projectID)
				if err != nil {
					return nil, err
				}
				out := make([]runner.Variable, 0, len(vars))
				for _, v := range vars {
					out = append(out, runner.Variable{Key: v.Key, Value: v.Value, Category: string(v.Category), HCL: v.HCL, Sensitive: v.Sensitive})
				}
				return out, nil
			},
			RunToken: func(ctx context.Context, runID string) (string, error) {
				exp := core.Now().Add(24 * time.Hour)
				_, tok, err := s.Auth.CreateToken(ctx, s.DB, auth.NewToken{Kind: auth.KindRun, Subject: runID, Description: "run token", ExpiredAt: &exp})
				return tok, err
			},
			SaveState: func(ctx context.Context, workspaceID, runID string, raw []byte) error {
				_, err := s.States.CreateFromRun(ctx, workspaceID, runID, raw)
				return err
			},
			Limits:         s.runLimits,
			IdentityTokens: s.identityTokens,
			ProjectName: func(ctx context.Context, projectID string) (string, error) {
				name, err := s.Projects.SystemName(ctx, projectID)
				if core.KindOf(err) == core.KindNotFound {
					return "", nil
				}
				return name, err
			},
			Engine: s.ToolVersions.Release,
		},
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", http.NotFound)
	jobs.Register(mux)
	s.jobHandler = s.withModel(mux)
	return nil
}

// withModel serves h with the authorization model in the request's
// context, where the services' authz.Allows finds it (the /api/v2 guard
// puts it there itself).
func (s *Server) withModel(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(authz.WithModel(r.Context(), s.Authz)))
	})
}

// inProcessJobs is the job protocol client of an in-process runner: the
// same calls an agent makes over HTTPS, sent straight to the handler.
func (s *Server) inProcessJobs(runnerID string, queue run.Queue) *jobapi.Client {
	q := ""
	if queue != run.QueueRuns {
		q = string(queue)
	}
	return &jobapi.Client{
		BaseURL: "http://in-process", HTTP: jobapi.InProcess(s.jobHandler), RunnerID: runnerID, Queue: q,
		ClaimWait: 30 * time.Second, HeartbeatWait: 5 * time.Second, CAFile: s.CAFile,
	}
}

// poolLookup shows workspaces and projects to the agent pool domain.
type poolLookup struct {
	ws       *workspace.Service
	projects *project.Service
}

func (l poolLookup) WorkspaceOrganization(ctx context.Context, id string) (string, error) {
	w, err := l.ws.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return w.Organization, nil
}

func (l poolLookup) ProjectOrganization(ctx context.Context, id string) (string, error) {
	p, err := l.projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}

func (l poolLookup) WorkspacesOfPool(ctx context.Context, org, poolID string) ([]string, error) {
	all, err := l.ws.List(ctx, org, workspace.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range all {
		if _, p := l.ws.EffectiveExecution(ctx, w); p == poolID {
			out = append(out, w.ID)
		}
	}
	return out, nil
}

func (l poolLookup) WorkspaceID(ctx context.Context, org, name string) (string, error) {
	w, err := l.ws.GetByName(ctx, org, name)
	if err != nil {
		return "", err
	}
	return w.ID, nil
}

func (l poolLookup) ProjectID(ctx context.Context, org, name string) (string, error) {
	ps, err := l.projects.List(ctx, org, project.ListOptions{Names: []string{name}})
	if err != nil {
		return "", err
	}
	if len(ps) == 0 {
		return "", core.NotFound("project %q not found", name)
	}
	return ps[0].ID, nil
}

// System reads a workspace without a caller, for state versions written
// by a run's job (state.Service.CreateFromRun).
func (a stateWorkspaces) System(ctx context.Context, id string) (*state.Workspace, error) {
	w, err := a.ws.System(ctx, id)
	if err != nil {
		return nil, err
	}
	return toStateWorkspace(w), nil
}

// identityTokens mints the workload identity tokens of a job's phases
// (ttls): per phase, one per TFC_WORKLOAD_IDENTITY_AUDIENCE[_TAG]
// environment variable of the run (idtoken.Audiences), one per dynamic
// provider credentials configuration (TFC_AWS_PROVIDER_AUTH[_TAG],
// TFC_GCP_…; dyncreds: its token, credential file and variables), and for a stack
// deployment's step one per variable that takes an identity_token's jwt
// (as TF_VAR_<variable>, the token's subject naming the deployment and the
// operation). What the tokens say is read once for all phases. A run that
// asks for none costs nothing here but, for a saved-plan or plan-only run
// (what a stack step is), one indexed statement.
func (s *Server) identityTokens(ctx context.Context, r *run.Run, in *runner.Inputs, ttls map[run.JobPhase]time.Duration) (map[run.JobPhase][]runner.Variable, error) {
	env := map[string]string{}
	for _, v := range in.Variables {
		if v.Category == "env" {
			env[v.Key] = v.Value
		}
	}
	audiences, creds := idtoken.Audiences(env), dyncreds.Configs(env)
	var step *stack.StepIdentity
	if (r.SavePlan || r.PlanOnly) && r.ConfigurationVersionID != "" {
		var err error
		if step, err = s.Stacks.IdentityOf(ctx, r.ConfigurationVersionID); err != nil {
			return nil, fmt.Errorf("reading the stack deployment's identity tokens: %w", err)
		}
	}
	if len(audiences) == 0 && step == nil && len(creds) == 0 {
		return nil, nil
	}
	orgID, err := s.Orgs.IDByName(ctx, in.Workspace.Organization)
	if err != nil {
		return nil, fmt.Errorf("reading organization %s: %w", in.Workspace.Organization, err)
	}
	var who idtoken.Deployment
	var names []string
	if step != nil {
		projectName := in.ProjectName
		if step.ProjectID != in.Workspace.ProjectID {
			if projectName, err = s.Projects.SystemName(ctx, step.ProjectID); err != nil {
				return nil, err
			}
		}
		who = idtoken.Deployment{OrganizationID: orgID, OrganizationName: step.Organization, ProjectID: step.ProjectID, ProjectName: projectName,
			StackID: step.StackID, StackName: step.StackName, Deployment: step.Deployment, PlanID: step.DeploymentRunID}
		for name := range step.Inputs {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	out := map[run.JobPhase][]runner.Variable{}
	for phase, ttl := range ttls {
		self := idtoken.Run{OrganizationID: orgID, OrganizationName: in.Workspace.Organization,
			ProjectID: in.Workspace.ProjectID, ProjectName: in.ProjectName, WorkspaceID: in.Workspace.ID, WorkspaceName: in.Workspace.Name,
			RunID: r.ID, Phase: string(phase)}
		minted, err := s.Identity.RunTokens(ctx, self, audiences, ttl)
		if err != nil {
			return nil, err
		}
		for _, m := range minted {
			out[phase] = append(out[phase], runner.Variable{Key: m.Name, Value: m.Token, Category: "env", Sensitive: true})
		}
		// Dynamic provider credentials: a token per configuration, and
		// the files and variables that hand it to the provider.
		vars, err := dyncreds.Variables(creds, string(phase), r.ID, func(audience string) (string, error) {
			return s.Identity.RunToken(ctx, self, audience, ttl)
		})
		if err != nil {
			return nil, err
		}
		out[phase] = append(out[phase], vars...)
		who.Operation = string(phase)
		for _, name := range names {
			tok, err := s.Identity.DeploymentToken(ctx, who, step.Inputs[name].Audience, ttl)
			if err != nil {
				return nil, err
			}
			out[phase] = append(out[phase], runner.Variable{Key: "TF_VAR_" + name, Value: tok, Category: "env", Sensitive: true})
		}
	}
	return out, nil
}

// runLimits are the site's time limits of a run, or the organization's
// own, and what else a site admin set of the organization's runs.
func (s *Server) runLimits(ctx context.Context, org string) (jobapi.Limits, error) {
	var l jobapi.Limits
	plan, apply, err := s.Settings.Timeouts(ctx)
	if err != nil {
		return l, err
	}
	ownPlan, ownApply, beta, sudo, err := s.Orgs.RunLimits(ctx, org)
	if err != nil {
		return l, err
	}
	// An organization's limits were checked when set: one that no
	// longer parses ("" among them) leaves the site's.
	limit := func(own string, site time.Duration) (time.Duration, bool) {
		if d, err := sitesettings.ParseTimeout(own); err == nil {
			return d, true
		}
		return site, false
	}
	l.Plan, l.OwnPlan = limit(ownPlan, plan)
	l.Apply, l.OwnApply = limit(ownApply, apply)
	l.Beta, l.Sudo = beta, sudo
	return l, nil
}
