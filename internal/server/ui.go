package server

import (
	"net/http"

	"github.com/terracehq/terrace/internal/ui"
)

// wireUI builds the web pages (internal/ui) on the domain services.
func (s *Server) wireUI() error {
	secret, err := s.secret()
	if err != nil {
		return err
	}
	s.UI, err = ui.New(ui.Options{
		Orgs: s.Orgs, Projects: s.Projects, Workspaces: s.Workspaces, Runs: s.Runs, States: s.States,
		Variables: s.Variables, Teams: s.Teams, Audit: s.Audit, RunTasks: s.RunTasks, Policies: s.Policies, Assessments: s.Assessments, ConfigVersions: s.ConfigVersions,
		Registry: s.Registry, NoCode: s.NoCode, ModuleTests: s.ModuleTests, AgentPools: s.AgentPools, ToolVersions: s.ToolVersions, Providers: s.Providers, Orchestration: s.Orchestration, Stacks: s.Stacks, VCS: s.VCS,
		Authz: s.Authz, Hostname: s.Hostname, CAFile: s.CAFile, Secret: secret, Logger: s.logger.With("component", "ui"),
		Customization: s.Settings.Customization,
	})
	return err
}

// uiRoutes mounts the pages at /app/ (a bearer token works there as on the
// API; sessions come before it; the per-token rate limit applies) and
// sends / to them.
func (s *Server) uiRoutes(root *http.ServeMux) {
	root.Handle("/app/", readMemo(s.Signin.Middleware(ui.Authenticate(s.Auth)(s.TokenLimits.Handler(tokenKey, s.UI.Handler())))))
	root.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/app/", http.StatusSeeOther)
	})
}
