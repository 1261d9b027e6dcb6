package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/variable"
)

// testModules shows registry modules to the module test domain.
type testModules struct{ reg *registry.Service }

func (m testModules) Get(ctx context.Context, org, reg, ns, name, provider string) (*moduletest.Module, error) {
	return testModule(m.reg.Get(ctx, org, reg, ns, name, provider))
}

func (m testModules) ByID(ctx context.Context, id string) (*moduletest.Module, error) {
	return testModule(m.reg.GetByID(ctx, id))
}

func testModule(mod *registry.Module, err error) (*moduletest.Module, error) {
	if err != nil {
		return nil, err
	}
	return &moduletest.Module{ID: mod.ID, Organization: mod.Organization, RegistryName: mod.RegistryName, Namespace: mod.Namespace,
		Name: mod.Name, Provider: mod.Provider, TestsEnabled: mod.TestsEnabled, AgentPoolID: mod.TestsAgentPoolID}, nil
}

// testConfigs shows a module's configuration versions to it.
type testConfigs struct {
	db  *store.DB
	cvs *configversion.Service
}

func (c testConfigs) Config(ctx context.Context, id string) (string, bool, error) {
	cv, err := configversion.Lookup(ctx, c.db, id)
	if err != nil {
		return "", false, err
	}
	return cv.WorkspaceID, cv.Status == configversion.StatusUploaded, nil
}

func (c testConfigs) Open(ctx context.Context, id string) (io.ReadCloser, error) {
	rc, _, err := c.cvs.OpenArchiveUnchecked(ctx, id)
	return rc, err
}

func (c testConfigs) FromArchive(ctx context.Context, moduleID string, tarGz []byte) (string, error) {
	cv, err := c.cvs.CreateForModule(ctx, moduleID)
	if err != nil {
		return "", err
	}
	if _, err := c.cvs.Upload(ctx, cv.ID, bytes.NewReader(tarGz)); err != nil {
		return "", err
	}
	return cv.ID, nil
}

// testVariables shows a module's test variables to it.
type testVariables struct{ vars *variable.Service }

func (v testVariables) ModuleTestVariables(ctx context.Context, org, moduleID string) ([]moduletest.EnvVar, error) {
	vars, err := v.vars.ModuleTestVariables(ctx, org, moduleID)
	if err != nil {
		return nil, err
	}
	out := make([]moduletest.EnvVar, len(vars))
	for i, x := range vars {
		out[i] = moduletest.EnvVar{Key: x.Key, Value: x.Value, Sensitive: x.Sensitive}
	}
	return out, nil
}

// deleteModuleTests removes what a deleted module owns elsewhere: its
// test runs' logs and tokens, test configurations and test variables (its
// test runs go by cascade).
func deleteModuleTests(ctx context.Context, q store.Q, m *registry.Module) error {
	if err := run.DeleteLogs(ctx, q, moduletest.RunIDsSQL, m.ID); err != nil {
		return err
	}
	if err := auth.DeleteTokensOf(ctx, q, auth.KindTestRun, moduletest.RunIDsSQL, m.ID); err != nil {
		return err
	}
	if err := configversion.DeleteWorkspaceConfigurationVersions(ctx, q, m.ID); err != nil {
		return err
	}
	return variable.DeleteWorkspaceVariables(ctx, q, m.ID)
}

// deleteOrganizationModuleTests removes, inside an organization's
// deletion, what its modules own elsewhere and no cascade reaches: their
// test runs' logs and test configurations (their variables go with the
// organization).
func deleteOrganizationModuleTests(ctx context.Context, q store.Q, org string) error {
	ids, err := store.Strings(ctx, q, `SELECT id FROM registry_modules WHERE organization_name = ? ORDER BY id`, org)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := deleteModuleTests(ctx, q, &registry.Module{ID: id}); err != nil {
			return err
		}
	}
	return nil
}

// wireModuleTests builds the module test service.
func (s *Server) wireModuleTests() error {
	var err error
	s.ModuleTests, err = moduletest.NewService(moduletest.Options{DB: s.DB, Modules: testModules{s.Registry},
		Configs: testConfigs{s.DB, s.ConfigVersions}, Variables: testVariables{s.Variables}, Logs: s.Runs, Keys: s.Keys,
		// A test run's executor (this server's, or an agent) holds it as a
		// runner holds a job.
		LeaseTTL: s.cfg.JobHeartbeatTimeout,
		Hostname: s.Hostname, Token: s.testRunToken,
		Sudo: func(ctx context.Context, org string) (bool, error) {
			lim, err := s.runLimits(ctx, org)
			return lim.Sudo, err
		},
		Logger: s.logger.With("component", "module-tests")})
	if err != nil {
		return err
	}
	s.Registry.OnDelete = append(s.Registry.OnDelete, deleteModuleTests)
	s.Orgs.OnDelete = append(s.Orgs.OnDelete, deleteOrganizationModuleTests)
	s.ConfigVersions.SetModuleAccess(s.ModuleTests.ConfigAccess)
	// A test run's token reads the private registry while the run runs,
	// and goes when it ends.
	s.Auth.SetTestRunResolver(s.ModuleTests)
	s.ModuleTests.OnStatus = append(s.ModuleTests.OnStatus, func(ctx context.Context, q store.Q, tr *moduletest.TestRun) error {
		if !tr.Status.Ended() {
			return nil
		}
		return s.Auth.DeleteTokens(ctx, q, auth.KindTestRun, tr.ID)
	})
	return nil
}

// moduleTestAPI registers the test run and test variable routes.
func (s *Server) moduleTestAPI(api *http.ServeMux, cvAPI *configversion.API, varAPI *variable.API) {
	(&moduletest.API{Service: s.ModuleTests, Signer: s.Signer, NewConfig: func(w http.ResponseWriter, r *http.Request, moduleID string) {
		cv, err := s.ConfigVersions.CreateForModule(r.Context(), moduleID)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		cvAPI.RespondCreated(w, r, cv)
	}}).Register(api)
	varAPI.RegisterModuleTests(api, func(r *http.Request) (string, string, error) {
		m, err := s.ModuleTests.ModuleForTests(r.Context(), moduletest.PathOf(r))
		if err != nil {
			return "", "", err
		}
		return m.Organization, m.ID, nil
	})
}

// startModuleTests starts this replica's executor of module test runs
// (one at a time: a module's tests apply real resources). It runs the
// test runs of modules whose tests run on the server; agents run the
// others (jobapi).
func (s *Server) startModuleTests(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	wait := s.ModuleTests.Start(ctx, moduletest.ExecutorConfig{
		ID: "inproc-" + s.instanceID() + "-tests-" + core.RandomString(8),
		ExecConfig: moduletest.ExecConfig{Engines: s.engines, ScratchDir: s.cfg.ScratchDir, CLIConfig: s.cfg.RunCLIConfig,
			PluginCacheDir: s.cfg.PluginCacheDir, CancelGrace: s.cfg.CancelGrace, CAFile: s.CAFile,
			Heartbeat: min(time.Second, s.ModuleTests.LeaseTTL/3)},
		Poll: s.cfg.ModuleTestPoll,
	})
	return func() {
		cancel()
		wait()
	}
}

// testRunToken mints the token of a test run (auth.KindTestRun: it reads
// the organization's private registry while the run runs, and goes when
// the run ends), wherever the run runs.
func (s *Server) testRunToken(ctx context.Context, tr *moduletest.TestRun) (string, error) {
	exp := core.Now().Add(24 * time.Hour)
	_, tok, err := s.Auth.CreateToken(ctx, s.DB, auth.NewToken{Kind: auth.KindTestRun, Subject: tr.ID, Description: "test run token", ExpiredAt: &exp})
	return tok, err
}
