package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/assessment"
	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/nocode"
	"github.com/terracehq/terrace/internal/orchestration"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/policy"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/providerregistry"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/sitesettings"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/team"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/toolversion"
	"github.com/terracehq/terrace/internal/variable"
	"github.com/terracehq/terrace/internal/vcs"
	"github.com/terracehq/terrace/internal/workspace"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options are the domain services the pages call (directly, never over
// HTTP) and what the pages need to know about the server.
type Options struct {
	Orgs       *organization.Service
	Projects   *project.Service
	Workspaces *workspace.Service
	Runs       *run.Service
	States     *state.Service
	Variables  *variable.Service
	Teams      *team.Service
	Audit      *audit.Service
	RunTasks   *runtask.Service
	// Policies shows a run's policy evaluations and the organization's
	// policy sets (nil: neither is shown).
	Policies    *policy.Service
	Assessments *assessment.Service
	Registry    *registry.Service
	NoCode      *nocode.Service
	// ModuleTests runs modules' tests (nil: the registry shows none).
	ModuleTests *moduletest.Service
	// AgentPools names the pool a module's tests run on and lists those
	// they may be moved to (nil: pools are shown by ID, none listed).
	AgentPools *agent.Service
	// ToolVersions lists the terraform versions a workspace may choose
	// (nil: the settings offer none, the field takes any).
	ToolVersions *toolversion.Service
	// Providers is the private provider registry.
	Providers *providerregistry.Service
	// Orchestration is the resource-graph orchestrator.
	Orchestration *orchestration.Service
	// Stacks keeps stacks, their deployments and deployment runs.
	Stacks *stack.Service
	// VCS keeps the organization's VCS providers (nil: their pages
	// answer 404).
	VCS *vcs.Service
	// ConfigVersions tells where a run's configuration came from (a
	// commit's ingress attributes); nil: not shown.
	ConfigVersions *configversion.Service
	// Authz is the authorization model: every page asks it, as the API
	// guard does.
	Authz *authz.Service
	// Hostname is the public host:port shown in the cloud block and in
	// the sources of private providers.
	Hostname string
	// CAFile is the certificate of the CA the server generated for its
	// own TLS certificate, which terraform must trust (the server's
	// CAFile; "" when the server has a certificate of its own, and the
	// getting-started page then names no file).
	CAFile string
	// Secret keys the CSRF tokens.
	Secret []byte
	Logger *slog.Logger
	// LogPoll is how often a live log stream looks for new output
	// (250ms when zero).
	LogPoll time.Duration
	// Customization returns what a site admin adds to every page (nil:
	// nothing).
	Customization Customizer
}

// Customizer returns the site's customization settings.
type Customizer func(ctx context.Context) (sitesettings.Customization, error)

// UI serves the /app pages.
type UI struct {
	o     Options
	pages *pageSet
	csrf  *CSRF
}

// New finds the templates (each page is parsed on first use) and returns
// the pages.
func New(o Options) (*UI, error) {
	if o.Orgs == nil || o.Workspaces == nil || o.Runs == nil || o.Authz == nil {
		return nil, errors.New("ui: organizations, workspaces, runs and authz services are required")
	}
	if len(o.Secret) == 0 {
		return nil, errors.New("ui: a secret for CSRF tokens is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LogPoll == 0 {
		o.LogPoll = 250 * time.Millisecond
	}
	files, err := pageFiles()
	if err != nil {
		return nil, err
	}
	pages, err := newPageSet(templateFS, files)
	if err != nil {
		return nil, err
	}
	pages.custom = o.Customization
	return &UI{o: o, pages: pages, csrf: NewCSRF(o.Secret)}, nil
}

// pageFiles names the UI's pages: each template but the layout and the
// graph drawing, by name ("runs" is templates/runs.html).
func pageFiles() (map[string]string, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base != "layout" && base != "graph" {
			files[base] = n
		}
	}
	return files, nil
}

// CSRF returns the pages' CSRF protection, for other /app handlers
// (sign-in pages) to share.
func (u *UI) CSRF() *CSRF { return u.csrf }

// Authenticator turns a bearer token into a principal (internal/auth).
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (*auth.Principal, error)
}

// Authenticate resolves an Authorization bearer token to the principal,
// when the request carries one and no earlier middleware (a session
// cookie) resolved the caller already. Without either the request goes on
// unauthenticated, and pages send it to the sign-in page.
func Authenticate(a Authenticator) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if auth.FromContext(r.Context()) == nil {
				if secret, ok := bearer(r); ok {
					p, err := a.Authenticate(r.Context(), secret)
					if err != nil {
						http.Error(w, "the API token is not valid", http.StatusUnauthorized)
						return
					}
					r = r.WithContext(auth.WithPrincipal(r.Context(), p))
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	s := strings.TrimSpace(h[7:])
	return s, s != ""
}

// Handler serves every /app page, behind the CSRF protection and the
// sign-in redirect. The caller must run Authenticate (or a session
// middleware) before it.
func (u *UI) Handler() http.Handler {
	mux := http.NewServeMux()
	u.Register(mux)
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/app/static/", http.FileServerFS(static))
	return u.csrf.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/app/static/") {
			w.Header().Set("Cache-Control", "public, max-age=3600")
			files.ServeHTTP(w, r)
			return
		}
		setPageHeaders(w.Header())
		if auth.FromContext(r.Context()) == nil {
			http.Redirect(w, r, "/app/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		mux.ServeHTTP(w, r.WithContext(authz.WithModel(r.Context(), u.o.Authz)))
	}))
}

// Register adds the pages' routes to mux.
func (u *UI) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /app/{$}", u.home)
	mux.HandleFunc("GET /app/organizations", u.organizations)
	mux.HandleFunc("POST /app/organizations", u.createOrganization)
	mux.HandleFunc("GET /app/{org}", u.organization)
	mux.HandleFunc("GET /app/{org}/getting-started", u.gettingStarted)
	mux.HandleFunc("GET /app/{org}/projects", u.projects)
	mux.HandleFunc("GET /app/{org}/workspaces", u.workspaces)
	mux.HandleFunc("POST /app/{org}/workspaces", u.createWorkspace)
	mux.HandleFunc("GET /app/{org}/workspaces/{name}", u.workspace)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/runs", u.startRun)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/lock", u.lockWorkspace)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/unlock", u.unlockWorkspace)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/vcs", u.setWorkspaceVCS)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/vcs/disconnect", u.disconnectWorkspaceVCS)
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/runs/{run}", u.run)
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/runs/{run}/logs/{phase}", u.runLog)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/runs/{run}/{action}", u.runAction)
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/states", u.states)
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/variables", u.variables)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/variables", u.createVariable)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/variables/{var}", u.updateVariable)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/variables/{var}/delete", u.deleteVariable)
	mux.HandleFunc("GET /app/{org}/variable-sets", u.varsets)
	mux.HandleFunc("GET /app/{org}/policy-sets", u.policySets)
	mux.HandleFunc("GET /app/{org}/policy-sets/{id}", u.policySet)
	mux.HandleFunc("GET /app/{org}/settings/version-control", u.vcsProviders)
	mux.HandleFunc("POST /app/{org}/settings/version-control", u.addVCSProvider)
	mux.HandleFunc("POST /app/{org}/settings/version-control/{id}/delete", u.deleteVCSProvider)
	mux.HandleFunc("POST /app/{org}/settings/version-control/{id}/application", u.setVCSApplication)
	mux.HandleFunc("GET /app/{org}/settings/version-control/tokens/{id}/repositories", u.tokenRepositories)
	mux.HandleFunc("GET /app/{org}/teams", u.teams)
	mux.HandleFunc("GET /app/{org}/audit", u.auditTrail)
	mux.HandleFunc("GET /app/{org}/registry", u.modules)
	mux.HandleFunc("GET /app/{org}/registry/modules/private/{ns}/{name}/{provider}/tests", u.moduleTests)
	mux.HandleFunc("POST /app/{org}/registry/modules/private/{ns}/{name}/{provider}/tests/settings/{action}", u.moduleTestsAction)
	mux.HandleFunc("GET /app/{org}/registry/modules/private/{ns}/{name}/{provider}/tests/{id}", u.moduleTest)
	mux.HandleFunc("POST /app/{org}/registry/modules/private/{ns}/{name}/{provider}/tests/{id}/{action}", u.moduleTestAction)
	mux.HandleFunc("GET /app/{org}/registry/providers", u.providers)
	mux.HandleFunc("GET /app/{org}/registry/providers/private/{ns}/{name}", u.provider)
	mux.HandleFunc("GET /app/{org}/no-code/{id}/provision", u.provisionForm)
	mux.HandleFunc("POST /app/{org}/no-code/{id}/provision", u.provision)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/upgrade", u.startUpgrade)
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/upgrade/{run}", u.upgrade)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/upgrade/{run}", u.confirmUpgrade)
	mux.HandleFunc("GET /app/{org}/environments", u.environments)
	mux.HandleFunc("GET /app/{org}/environments/{project}/{env}", u.environment)
	mux.HandleFunc("GET /app/{org}/deployments/{id}", u.deployment)
	mux.HandleFunc("GET /app/{org}/stacks", u.stacks)
	mux.HandleFunc("GET /app/{org}/stacks/{id}", u.stackPage)
	mux.HandleFunc("GET /app/{org}/stack-runs/{id}", u.stackRun)
	mux.HandleFunc("POST /app/{org}/stack-runs/{id}/{action}", u.stackRunAction)
	u.registerVCSConnect(mux)
	u.registerWorkspaceSettings(mux)
	u.registerOrgSettings(mux)
	u.registerOrgObjects(mux)
	u.registerModulePages(mux)
	u.registerDownloads(mux)
	mux.HandleFunc("/app/", u.notFound)
}

// page is what every template sees.
type page struct {
	Title string
	User  *auth.Principal
	// Org is the organization the page is in ("" outside one).
	Org string
	// Crumbs are the pages between the organization's and this one, for
	// the breadcrumb (the last names this page).
	Crumbs []crumb
	// Menu says which of the organization's pages whose handler may
	// refuse the caller its navigation links to.
	Menu orgMenu
	CSRF string
	// Custom is what a site admin added to the pages (customization
	// settings), made safe to show.
	Custom customView
	// Data is the page's own content.
	Data any
}

// customView is the customization settings as pages show them.
type customView struct {
	SupportEmail                      string
	LoginHelp, Footer, Error, NewUser template.HTML
}

// orgMenu is what the organization's navigation links to besides the
// pages every member reads: each only when the page's handler would
// answer (the same action it asks).
type orgMenu struct {
	// Audit: the audit trail (the audit service asks OrgManage).
	Audit bool
	// VCS: the VCS providers (the page asks OrgReadVCS).
	VCS bool
	// Settings: the organization's settings and members pages (they ask
	// OrgRead, as the API's reads of the organization and its
	// memberships do; changing them asks more).
	Settings bool
}

// menuOf is the organization's navigation as the caller in ctx may
// follow it.
func (u *UI) menuOf(ctx context.Context, org string) orgMenu {
	res := authz.Resource{Organization: org}
	return orgMenu{
		Audit:    u.o.Audit != nil && allowed(ctx, authz.OrgManage, res),
		VCS:      u.o.VCS != nil && allowed(ctx, authz.OrgReadVCS, res),
		Settings: allowed(ctx, authz.OrgRead, res),
	}
}

// crumb is a step of the breadcrumb: a page's name and link ("" for the
// page itself).
type crumb struct{ Name, Href string }

func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name, title, org string, data any) {
	u.renderPage(w, r, status, name, page{Title: title, Org: org, Data: data})
}

// renderPage renders pg (a page that sets more of the layout than render
// takes, such as its breadcrumb).
func (u *UI) renderPage(w http.ResponseWriter, r *http.Request, status int, name string, pg page) {
	if pg.Org != "" {
		pg.Menu = u.menuOf(r.Context(), pg.Org)
	}
	writePage(w, r, u.o.Logger, u.pages, status, name, pg)
}

// fail renders err as an error page with the status its kind maps to (the
// API's table): a resource the caller may not see is a 404 page.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, title, detail := u.answer(r, err)
	org, parent := u.errorPlace(r)
	u.render(w, r, status, "error", title, org, map[string]any{"Status": status, "Title": title, "Detail": detail, "Parent": parent})
}

// errorPlace is the organization an error page shows its navigation for
// ("" when there is none, or it is not one the caller reads: the error
// is about the organization itself) and the page it leads back to
// besides the organizations (nil: none): the workspace of a page under a
// workspace the caller reads, else the organization's workspaces.
func (u *UI) errorPlace(r *http.Request) (string, *crumb) {
	org := r.PathValue("org")
	if org == "" {
		return "", nil
	}
	if _, err := u.o.Orgs.Get(r.Context(), org); err != nil {
		return "", nil
	}
	list := orgPath(org, "workspaces")
	if name := r.PathValue("name"); name != "" && strings.HasPrefix(r.URL.Path, list+"/") {
		if ws := orgPath(org, "workspaces", name); r.URL.Path != ws {
			if _, _, err := u.loadWorkspace(r); err == nil {
				return org, &crumb{Name: "workspace " + name, Href: ws}
			}
		}
	}
	if r.URL.Path == list {
		return org, nil
	}
	return org, &crumb{Name: "the workspaces of " + org, Href: list}
}

// failForm answers a form whose service call failed with err. A refusal
// the form can show (err's kind is one of kinds) re-renders the form
// through show with status and err's message, so the caller can correct
// what they typed; any other error is the error page (fail). Keeping the
// rule in one place keeps every form telling the two apart the same way.
func (u *UI) failForm(w http.ResponseWriter, r *http.Request, err error, show func(w http.ResponseWriter, r *http.Request, status int, formErr string), status int, kinds ...core.Kind) {
	if slices.Contains(kinds, core.KindOf(err)) {
		show(w, r, status, err.Error())
		return
	}
	u.fail(w, r, err)
}

// refuseAsAPI is failForm with the status the API answers err with: a
// refusal of one of kinds re-renders the page through show with that
// status and err's message, keeping what was typed; anything else is the
// error page.
func (u *UI) refuseAsAPI(w http.ResponseWriter, r *http.Request, err error, show func(w http.ResponseWriter, r *http.Request, status int, formErr string), kinds ...core.Kind) {
	err = tfeapi.AsAnswered(err)
	status, _ := tfeapi.Status(err)
	u.failForm(w, r, err, show, status, kinds...)
}

// answer is how a page (or a page's script) tells err: the status and
// title its kind maps to and its detail, an internal error's kept for the
// log.
func (u *UI) answer(r *http.Request, err error) (status int, title, detail string) {
	err = tfeapi.AsAnswered(err)
	status, title = tfeapi.Status(err)
	detail = err.Error()
	if core.KindOf(err) == core.KindInternal {
		u.o.Logger.ErrorContext(r.Context(), "page failed", "path", r.URL.Path, "error", err)
		detail = "something went wrong on the server; the error is in its log"
	}
	return status, title, detail
}

func (u *UI) notFound(w http.ResponseWriter, r *http.Request) {
	u.fail(w, r, core.NotFound("there is no page at %s", r.URL.Path))
}

// allowed asks the model whether the caller may do action on res.
func allowed(ctx context.Context, action authz.Action, res authz.Resource) bool {
	return authz.Allows(ctx, action, res) == nil
}

// orgPath is the URL of a page of an organization.
func orgPath(org string, parts ...string) string {
	p := "/app/" + url.PathEscape(org)
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

var funcs = template.FuncMap{
	"path":        orgPath,
	"policyKind":  policyKind,
	"policyScope": policyScope,
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		d := core.Now().Sub(t).Round(time.Second)
		switch {
		case d < time.Minute:
			return fmt.Sprintf("%ds ago", int(d.Seconds()))
		case d < time.Hour:
			return fmt.Sprintf("%dm ago", int(d.Minutes()))
		case d < 48*time.Hour:
			return fmt.Sprintf("%dh ago", int(d.Hours()))
		}
		return t.UTC().Format("2006-01-02")
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"statusClass": statusClass,
	"statusLabel": statusLabel,
	"orgAccess":   orgAccess,
	"plural":      plural,
}

// statusClass is the style of a status: ok (ended well), bad (ended
// otherwise), wait (waits for someone) or busy (on its way). A run's and
// a stack's statuses are told apart by their domains' state machines
// (Final), so that every final status gets ok or bad; other statuses
// (task stages, policies, health, phases, tests) by name.
func statusClass(s any) string {
	switch v := s.(type) {
	case run.Status:
		switch {
		case v == run.Applied || v == run.PlannedAndFinished:
			return "ok"
		case v.Final():
			return "bad"
		case v == run.Pending || v.Confirmable() || v == run.PostPlanAwaitingDecision:
			return "wait"
		}
		return "busy"
	case stack.RunStatus:
		switch {
		case v == stack.RunSucceeded:
			return "ok"
		case v.Final():
			return "bad"
		case v == stack.RunPending || v == stack.RunPreDeployingPendingOperator || v == stack.RunDeployingPendingOperator:
			return "wait"
		}
		return "busy"
	case stack.StepStatus:
		switch {
		case v == stack.StepCompleted:
			return "ok"
		case v.Final():
			return "bad"
		case v == stack.StepQueued || v == stack.StepPendingOperator:
			return "wait"
		}
		return "busy"
	case stack.ConfigStatus:
		switch {
		case v == stack.ConfigCompleted:
			return "ok"
		case v.Final():
			return "bad"
		}
		return "busy"
	case run.PhaseStatus:
		switch v {
		case run.PhaseFinished:
			return "ok"
		case run.PhaseErrored, run.PhaseCanceled:
			return "bad"
		case run.PhasePending, run.PhaseUnreachable:
			return "wait"
		}
		return "busy"
	}
	switch fmt.Sprint(s) {
	case "applied", "planned_and_finished", "passed", "succeeded", "finished", "healthy", "deployed", "ready", "completed":
		return "ok"
	case "errored", "canceled", "force_canceled", "failed", "drifted", "discarded", "abandoned", "policy_soft_failed":
		return "bad"
	case "planned", "cost_estimated", "policy_checked", "post_plan_completed", "awaiting", "pending", "policy_override",
		"awaiting_override", "post_plan_awaiting_decision", "overridden", "planned_and_saved", "pending-operator", "unreachable":
		return "wait"
	}
	return "busy"
}

// statusLabels are the statuses whose words alone do not read well.
var statusLabels = map[string]string{
	string(stack.RunPreDeployingPendingOperator): "Planned, awaiting approval",
	string(stack.RunDeployingPendingOperator):    "Deploying, awaiting approval",
	string(stack.StepPendingOperator):            "Awaiting approval",
	string(run.PolicySoftFailed):                 "Policy soft-failed",
	string(run.PhaseUnreachable):                 "Will not run",
}

// statusLabel is a status as HCP Terraform's pages say it:
// planned_and_saved is "Planned and saved", post_plan_completed
// "Post-plan completed", acquiring-lock "Acquiring lock".
func statusLabel(s any) string {
	v := fmt.Sprint(s)
	if l, ok := statusLabels[v]; ok {
		return l
	}
	// Words are joined by _ (runs) or - (stacks); pre- and post- stay
	// joined to what follows.
	v = strings.NewReplacer("_", " ", "-", " ").Replace(v)
	for _, p := range []string{"pre ", "post "} {
		if strings.HasPrefix(v, p) {
			v = strings.TrimSuffix(p, " ") + "-" + v[len(p):]
		}
	}
	if v == "" {
		return v
	}
	return strings.ToUpper(v[:1]) + v[1:]
}

// plural is a count with its noun: "1 workspace", "2 workspaces".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
