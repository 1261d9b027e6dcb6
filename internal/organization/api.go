package organization

import (
	"context"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/retention"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// DefaultProjects tells the API the ID of an organization's default project.
type DefaultProjects interface {
	DefaultID(ctx context.Context, org string) (string, error)
}

// Capacity counts an organization's pending and running runs; the run
// domain provides it (nil means no runs yet).
type Capacity interface {
	Capacity(ctx context.Context, org string) (pending, running int, err error)
}

// API serves the organization endpoints of the TFE API v2.
type API struct {
	Service  *Service
	Projects DefaultProjects
	Capacity Capacity
	// Owners returns the owners of each of the organizations, and
	// RenderUser an owner's document, for the admin organizations API
	// (nil: no owners shown).
	Owners     func(ctx context.Context, orgs []string) (map[string][]*auth.User, error)
	RenderUser func(u *auth.User) any
	// SSO: the site signs users in with single sign-on (OIDC), which the
	// admin API shows as every organization's sso-enabled.
	SSO bool
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organizations", a.list)
	mux.HandleFunc("POST /api/v2/organizations", a.create)
	mux.HandleFunc("GET /api/v2/organizations/{org}", a.get)
	mux.HandleFunc("PATCH /api/v2/organizations/{org}", a.update)
	mux.HandleFunc("DELETE /api/v2/organizations/{org}", a.delete)
	mux.HandleFunc("GET /api/v2/organizations/{org}/entitlement-set", a.entitlements)
	mux.HandleFunc("GET /api/v2/organizations/{org}/capacity", a.capacity)
	mux.HandleFunc("GET /api/v2/organizations/{org}/relationships/data-retention-policy", a.readRetention)
	mux.HandleFunc("POST /api/v2/organizations/{org}/relationships/data-retention-policy", a.setRetention)
	mux.HandleFunc("PATCH /api/v2/organizations/{org}/relationships/data-retention-policy", a.setRetention)
	mux.HandleFunc("DELETE /api/v2/organizations/{org}/relationships/data-retention-policy", a.deleteRetention)
	a.registerAdmin(mux)
}

// jsonOrganization is the wire form (go-tfe's Organization).
type jsonOrganization struct {
	Name                       string            `jsonapi:"primary,organizations"`
	ExternalID                 string            `jsonapi:"attr,external-id"`
	AssessmentsEnforced        bool              `jsonapi:"attr,assessments-enforced"`
	CollaboratorAuthPolicy     string            `jsonapi:"attr,collaborator-auth-policy"`
	CostEstimationEnabled      bool              `jsonapi:"attr,cost-estimation-enabled"`
	CreatedAt                  time.Time         `jsonapi:"attr,created-at,iso8601"`
	DefaultExecutionMode       string            `jsonapi:"attr,default-execution-mode"`
	Email                      string            `jsonapi:"attr,email"`
	IsUnified                  bool              `jsonapi:"attr,is-unified"`
	OwnersTeamSAMLRoleID       string            `jsonapi:"attr,owners-team-saml-role-id"`
	Permissions                *jsonPermissions  `jsonapi:"attr,permissions"`
	SAMLEnabled                bool              `jsonapi:"attr,saml-enabled"`
	StacksEnabled              bool              `jsonapi:"attr,stacks-enabled"`
	SessionRemember            int               `jsonapi:"attr,session-remember"`
	SessionTimeout             int               `jsonapi:"attr,session-timeout"`
	TwoFactorConformant        bool              `jsonapi:"attr,two-factor-conformant"`
	SendPassingStatuses        bool              `jsonapi:"attr,send-passing-statuses-for-untriggered-speculative-plans"`
	RemainingTestableCount     int               `jsonapi:"attr,remaining-testable-count"`
	SpeculativePlanManagement  bool              `jsonapi:"attr,speculative-plan-management-enabled"`
	UserTokensEnabled          *bool             `jsonapi:"attr,user-tokens-enabled"`
	AggregatedCommitStatus     bool              `jsonapi:"attr,aggregated-commit-status-enabled"`
	AllowForceDeleteWorkspaces bool              `jsonapi:"attr,allow-force-delete-workspaces"`
	DefaultProject             *jsonProjectRef   `jsonapi:"relation,default-project"`
	DefaultAgentPool           *jsonPoolRef      `jsonapi:"relation,default-agent-pool"`
	DataRetentionPolicy        *retention.Choice `jsonapi:"polyrelation,data-retention-policy"`
}

type jsonPoolRef struct {
	ID string `jsonapi:"primary,agent-pools"`
}

type jsonProjectRef struct {
	ID string `jsonapi:"primary,projects"`
}

type jsonPermissions struct {
	CanCreateTeam          bool `json:"can-create-team"`
	CanCreateWorkspace     bool `json:"can-create-workspace"`
	CanCreateProject       bool `json:"can-create-project"`
	CanDestroy             bool `json:"can-destroy"`
	CanTraverse            bool `json:"can-traverse"`
	CanUpdate              bool `json:"can-update"`
	CanUpdateAPIToken      bool `json:"can-update-api-token"`
	CanManageRunTasks      bool `json:"can-manage-run-tasks"`
	CanDeployNoCodeModules bool `json:"can-deploy-no-code-modules"`
	CanManageNoCodeModules bool `json:"can-manage-no-code-modules"`
	CanEnableStacks        bool `json:"can-enable-stacks"`
}

// orgPermissions are what the caller may do in the organization: each the
// authorization model's decision on the action that the routes and
// services it stands for ask.
func orgPermissions(ctx context.Context, org string) *jsonPermissions {
	may := func(a authz.Action) bool { return authz.Allows(ctx, a, authz.Resource{Organization: org}) == nil }
	// Updating the organization and its settings (stacks-enabled among
	// them), and deleting it, are OrgManage; its token is OrgManageTokens.
	manage := may(authz.OrgManage)
	return &jsonPermissions{
		CanCreateTeam:          may(authz.OrgManageTeams),
		CanCreateWorkspace:     may(authz.OrgCreateWorkspace),
		CanCreateProject:       may(authz.OrgCreateProject),
		CanDestroy:             manage,
		CanTraverse:            may(authz.OrgRead),
		CanUpdate:              manage,
		CanUpdateAPIToken:      may(authz.OrgManageTokens),
		CanManageRunTasks:      may(authz.OrgManageRunTasks),
		CanDeployNoCodeModules: may(authz.OrgDeployNoCode),
		CanManageNoCodeModules: may(authz.OrgManageNoCode),
		CanEnableStacks:        manage,
	}
}

func (a *API) toJSON(r *http.Request, o *Organization) *jsonOrganization {
	j := &jsonOrganization{
		Name:                       o.Name,
		ExternalID:                 o.ID,
		AssessmentsEnforced:        o.Settings.AssessmentsEnforced,
		CollaboratorAuthPolicy:     o.Settings.CollaboratorAuthPolicy,
		CostEstimationEnabled:      o.Settings.CostEstimationEnabled,
		CreatedAt:                  o.CreatedAt,
		DefaultExecutionMode:       o.Settings.DefaultExecutionMode,
		Email:                      o.Email,
		OwnersTeamSAMLRoleID:       o.Settings.OwnersTeamSAMLRoleID,
		StacksEnabled:              o.Settings.StacksEnabled,
		SessionRemember:            o.Settings.SessionRemember,
		SessionTimeout:             o.Settings.SessionTimeout,
		TwoFactorConformant:        true,
		SendPassingStatuses:        o.Settings.SendPassingStatuses,
		RemainingTestableCount:     5,
		SpeculativePlanManagement:  o.Settings.SpeculativePlanManagement,
		UserTokensEnabled:          o.Settings.UserTokensEnabled,
		AggregatedCommitStatus:     o.Settings.AggregatedCommitStatus,
		AllowForceDeleteWorkspaces: o.Settings.AllowForceDeleteWorkspaces,
		Permissions:                orgPermissions(r.Context(), o.Name),
	}
	if o.Settings.DefaultAgentPoolID != "" {
		j.DefaultAgentPool = &jsonPoolRef{ID: o.Settings.DefaultAgentPoolID}
	}
	j.DataRetentionPolicy = retention.Relationship(o.Settings.DataRetention)
	if id, err := a.Projects.DefaultID(r.Context(), o.Name); err == nil {
		j.DefaultProject = &jsonProjectRef{ID: id}
	}
	return j
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var body UpdateOptions
	if err := doc.Attrs(&body); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	opts := CreateOptions{Update: body}
	if body.Name != nil {
		opts.Name = *body.Name
	}
	if body.Email != nil {
		opts.Email = *body.Email
	}
	org, err := a.Service.Create(r.Context(), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	// The creator's principal predates the owners team: refresh it so the
	// permissions shown match what a read will show.
	p := *auth.FromContext(r.Context())
	p.Orgs = append(p.Orgs, org.Name)
	p.Owns = append(p.Owns, org.Name)
	r = r.WithContext(auth.WithPrincipal(r.Context(), &p))
	tfeapi.Respond(w, r, http.StatusCreated, a.toJSON(r, org))
}

// Render is an organization's wire form for other domains' includes (a
// workspace's organization).
func (a *API) Render(r *http.Request, name string) (any, error) {
	org, err := a.Service.Get(r.Context(), name)
	if err != nil {
		return nil, err
	}
	return a.toJSON(r, org), nil
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.toJSON(r, org))
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	query := q.Get("q")
	if query == "" {
		query = q.Get("q[name]")
	}
	if query == "" {
		query = q.Get("q[email]")
	}
	items, total, err := a.Service.ListPage(r.Context(), query, page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	out := make([]*jsonOrganization, len(items))
	for i, o := range items {
		out[i] = a.toJSON(r, o)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts UpdateOptions
	if err := doc.Attrs(&opts); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if _, ok := doc.Relationships["default-agent-pool"]; ok {
		id, err := doc.RelID("default-agent-pool")
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		opts.DefaultAgentPoolID = &id
	}
	org, err := a.Service.Update(r.Context(), r.PathValue("org"), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.toJSON(r, org))
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("org")))
}

type jsonEntitlements struct {
	ID                    string `jsonapi:"primary,entitlement-sets"`
	Agents                bool   `jsonapi:"attr,agents"`
	AuditLogging          bool   `jsonapi:"attr,audit-logging"`
	CostEstimation        bool   `jsonapi:"attr,cost-estimation"`
	GlobalRunTasks        bool   `jsonapi:"attr,global-run-tasks"`
	Operations            bool   `jsonapi:"attr,operations"`
	PrivateModuleRegistry bool   `jsonapi:"attr,private-module-registry"`
	PrivateRunTasks       bool   `jsonapi:"attr,private-run-tasks"`
	RunTasks              bool   `jsonapi:"attr,run-tasks"`
	SSO                   bool   `jsonapi:"attr,sso"`
	Sentinel              bool   `jsonapi:"attr,sentinel"`
	StateStorage          bool   `jsonapi:"attr,state-storage"`
	Teams                 bool   `jsonapi:"attr,teams"`
	VCSIntegrations       bool   `jsonapi:"attr,vcs-integrations"`
}

func (a *API) entitlements(w http.ResponseWriter, r *http.Request) {
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, &jsonEntitlements{
		ID: org.ID, Agents: true, AuditLogging: true, CostEstimation: false, GlobalRunTasks: true,
		Operations: true, PrivateModuleRegistry: true, PrivateRunTasks: true, RunTasks: true,
		StateStorage: true, Teams: true,
	})
}

type jsonCapacity struct {
	ID      string `jsonapi:"primary,organization-capacity"`
	Pending int    `jsonapi:"attr,pending"`
	Running int    `jsonapi:"attr,running"`
}

func (a *API) capacity(w http.ResponseWriter, r *http.Request) {
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	c := &jsonCapacity{ID: org.Name}
	if a.Capacity != nil {
		if c.Pending, c.Running, err = a.Capacity.Capacity(r.Context(), org.Name); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
	}
	tfeapi.Respond(w, r, http.StatusOK, c)
}
