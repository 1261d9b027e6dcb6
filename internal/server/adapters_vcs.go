package server

import (
	"context"
	"fmt"
	"os"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/policy"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcs"
)

// vcsProjects shows projects to the VCS provider domain.
type vcsProjects struct{ projects *project.Service }

func (a vcsProjects) Organization(ctx context.Context, id string) (string, error) {
	p, err := a.projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}

func (a vcsProjects) name(ctx context.Context, id string) (string, error) {
	p, err := a.projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

// vcsPools shows agent pools to the VCS provider domain.
type vcsPools struct{ pools *agent.Service }

func (a vcsPools) Organization(ctx context.Context, id string) (string, error) {
	return a.pools.PoolOrganization(ctx, id)
}

// wireVCS builds the VCS provider service and connects it to workspaces
// (their vcs-repo), configuration versions and runs (what a push starts).
func (s *Server) wireVCS() error {
	var ca []byte
	if s.cfg.VCSCAFile != "" {
		var err error
		if ca, err = os.ReadFile(s.cfg.VCSCAFile); err != nil {
			return fmt.Errorf("reading the VCS CA file: %w", err)
		}
	}
	var err error
	s.VCS, err = vcs.NewService(vcs.Options{DB: s.DB, Organizations: sshKeyOrgs{s.Orgs}, Projects: vcsProjects{s.Projects},
		AgentPools: vcsPools{s.AgentPools}, Keys: s.Keys, BaseURL: s.BaseURL, CA: ca, Logger: s.logger.With("component", "vcs"),
		Ingress: vcs.Ingress{
			Workspace:        s.vcsWorkspace,
			Configure:        s.vcsConfigure,
			Queue:            s.vcsQueue,
			Disconnect:       s.Workspaces.DisconnectVCS,
			DisconnectStacks: stack.DisconnectVCS,
			Stack:            s.vcsStack,
			ConfigureStack:   s.vcsConfigureStack,
			Modules:          vcsModules{s.Registry, s.ModuleTests},
			PolicySets:       vcsPolicySets{s.Policies},
			MaxArchive:       configversion.DefaultMaxUploadBytes,
		}})
	if err != nil {
		return err
	}
	s.Workspaces.VCS = s.VCS
	s.Stacks.VCS = s.VCS
	s.Registry.VCS = s.VCS
	s.Policies.VCS = s.VCS
	s.Stacks.OnRunStatus = append(s.Stacks.OnRunStatus, func(ctx context.Context, q store.Q, r *stack.DeploymentRun) error {
		return s.VCS.StackRunStatus(ctx, q, vcs.StackRun{ID: r.ID, ConfigurationID: r.ConfigurationID, Deployment: r.Deployment,
			Status: r.Status, Speculative: r.Speculative})
	})
	s.ModuleTests.OnStatus = append(s.ModuleTests.OnStatus, func(ctx context.Context, q store.Q, r *moduletest.TestRun) error {
		return s.VCS.ModuleTestStatus(ctx, q, vcs.ModuleTestRun{ID: r.ID, Status: string(r.Status), TestStatus: string(r.TestStatus),
			Passed: r.Counts.Passed, Failed: r.Counts.Failed, Errored: r.Counts.Errored, Skipped: r.Counts.Skipped})
	})
	s.Registry.OnDelete = append(s.Registry.OnDelete, func(ctx context.Context, q store.Q, m *registry.Module) error {
		return s.VCS.DeleteModule(ctx, q, m.ID)
	})
	s.Workspaces.OnDelete = append(s.Workspaces.OnDelete, s.VCS.DeleteWorkspace)
	s.Orgs.OnDelete = append(s.Orgs.OnDelete, s.VCS.DeleteOrganization)
	s.Runs.Observe(s.VCS.RunTransition)
	return nil
}

// vcsModules shows the private registry to the VCS domain, which
// publishes VCS-backed modules' versions into it.
type vcsModules struct {
	r     *registry.Service
	tests *moduletest.Service
}

func (a vcsModules) VCSModule(ctx context.Context, id string) (*vcs.Module, error) {
	m, err := a.r.SystemModule(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &vcs.Module{ID: m.ID, Organization: m.Organization, Name: m.Name, Provider: m.Provider, TestsEnabled: m.TestsEnabled}
	if m.VCSRepo != nil {
		out.SourceDirectory, out.TagPrefix = m.VCSRepo.SourceDirectory, m.VCSRepo.TagPrefix
	}
	for _, v := range m.Versions {
		if v.Status == registry.VersionOK {
			out.Versions = append(out.Versions, v.Version)
		}
	}
	return out, nil
}

func (a vcsModules) PublishFromVCS(ctx context.Context, moduleID, version, sha, source string, archive []byte) error {
	return a.r.PublishFromVCS(ctx, moduleID, version, sha, source, archive)
}

func (a vcsModules) VCSFailed(ctx context.Context, moduleID, version, sha, source string, cause error) error {
	return a.r.VCSFailed(ctx, moduleID, version, sha, source, cause)
}

func (a vcsModules) NoVersionTags(ctx context.Context, moduleID string) error {
	return a.r.NoVersionTags(ctx, moduleID)
}

func (a vcsModules) TestFromVCS(ctx context.Context, moduleID string, archive []byte, origin func(ctx context.Context, q store.Q, testRunID string) error) error {
	_, err := a.tests.CreateFromVCS(ctx, moduleID, archive, origin)
	return err
}

func (a vcsModules) DisconnectVCS(ctx context.Context, q store.Q, moduleIDs []string) error {
	return a.r.DisconnectVCS(ctx, q, moduleIDs)
}

// vcsPolicySets shows policy sets to the VCS domain, which makes
// VCS-backed sets' versions.
type vcsPolicySets struct{ p *policy.Service }

func (a vcsPolicySets) VCSPolicySet(ctx context.Context, id string) (*vcs.PolicySet, error) {
	set, err := a.p.SystemSet(ctx, id)
	if err != nil {
		return nil, err
	}
	return &vcs.PolicySet{ID: set.ID, Organization: set.Organization, PoliciesPath: set.PoliciesPath, UpdatePatterns: set.PolicyUpdatePatterns}, nil
}

func (a vcsPolicySets) ConfigurePolicySet(ctx context.Context, id string, archive []byte, source string, o vcs.Origin) error {
	return a.p.ConfigureFromArchive(ctx, id, archive, source, &policy.Ingress{CommitSHA: o.CommitSHA, CommitURL: o.CommitURL, Identifier: o.Identifier})
}

func (a vcsPolicySets) DisconnectVCS(ctx context.Context, q store.Q, setIDs []string) error {
	return policy.DisconnectVCS(ctx, q, setIDs)
}

func (s *Server) vcsWorkspace(ctx context.Context, id string) (*vcs.Workspace, error) {
	w, err := s.Workspaces.System(ctx, id)
	if err != nil {
		return nil, err
	}
	st := w.Settings
	return &vcs.Workspace{ID: w.ID, Organization: w.Organization, Name: w.Name, WorkingDirectory: st.WorkingDirectory,
		FileTriggersEnabled: st.FileTriggersEnabled, QueueAllRuns: st.QueueAllRuns, SpeculativeEnabled: st.SpeculativeEnabled, TriggerPrefixes: st.TriggerPrefixes,
		TriggerPatterns: st.TriggerPatterns}, nil
}

func (s *Server) vcsConfigure(ctx context.Context, w *vcs.Workspace, archive []byte, source string, speculative bool, origin vcs.Origin) (string, error) {
	in := configversion.Ingress(origin)
	cv, err := s.ConfigVersions.CreateFromArchive(auth.AsOrganization(ctx, w.Organization), w.ID, archive,
		configversion.CreateOptions{AutoQueueRuns: ptr(false), Speculative: ptr(speculative), Source: source, Ingress: &in})
	if err != nil {
		return "", err
	}
	return cv.ID, nil
}

// vcsQueue starts the run of a pushed commit: the workspace's connection
// decided it (a workspace admin made it), as HCP Terraform's VCS runs.
func (s *Server) vcsQueue(ctx context.Context, w *vcs.Workspace, configID, message string, speculative bool) (string, error) {
	o := run.CreateOptions{WorkspaceID: w.ID, ConfigurationVersionID: configID, Message: &message, Source: vcs.RunSource, TriggerReason: "vcs"}
	if speculative {
		o.PlanOnly = ptr(true)
	}
	r, err := s.Runs.CreateSystem(auth.AsOrganization(ctx, w.Organization), o)
	if err != nil {
		return "", err
	}
	return r.ID, nil
}

func (s *Server) vcsStack(ctx context.Context, id string) (*vcs.Workspace, error) {
	st, err := s.Stacks.SystemStack(ctx, id)
	if err != nil {
		return nil, err
	}
	// A stack's trigger patterns decide as a workspace's do (none: every
	// push of the branch).
	return &vcs.Workspace{ID: st.ID, Organization: st.Organization, Name: st.Name, WorkingDirectory: st.WorkingDirectory,
		FileTriggersEnabled: len(st.TriggerPatterns) > 0, TriggerPatterns: st.TriggerPatterns, SpeculativeEnabled: st.SpeculativeEnabled}, nil
}

func (s *Server) vcsConfigureStack(ctx context.Context, stackID string, archive []byte, speculative bool,
	record func(ctx context.Context, q store.Q, configurationID string) error) (string, error) {
	c, err := s.Stacks.ConfigureFromArchive(ctx, stackID, archive, speculative, record)
	if err != nil {
		return "", err
	}
	return c.ID, nil
}
