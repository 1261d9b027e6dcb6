package sitesettings

import (
	"encoding/json"
	"net/http"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the admin settings routes.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/admin/general-settings", tfeapi.Handle(a.readGeneral))
	mux.HandleFunc("PATCH /api/v2/admin/general-settings", tfeapi.Handle(a.updateGeneral))
	mux.HandleFunc("GET /api/v2/admin/smtp-settings", tfeapi.Handle(a.readSMTP))
	mux.HandleFunc("PATCH /api/v2/admin/smtp-settings", tfeapi.Handle(a.updateSMTP))
	mux.HandleFunc("GET /api/v2/admin/customization-settings", tfeapi.Handle(a.readCustomization))
	mux.HandleFunc("PATCH /api/v2/admin/customization-settings", tfeapi.Handle(a.updateCustomization))
}

// jsonCustomization is the wire form of the customization settings
// (go-tfe's AdminCustomizationSetting): the texts as a site admin gave
// them.
type jsonCustomization struct {
	ID           string `jsonapi:"primary,customization-settings"`
	SupportEmail string `jsonapi:"attr,support-email-address"`
	LoginHelp    string `jsonapi:"attr,login-help"`
	Footer       string `jsonapi:"attr,footer"`
	Error        string `jsonapi:"attr,error"`
	NewUser      string `jsonapi:"attr,new-user"`
}

func customizationJSON(c Customization) *jsonCustomization {
	return &jsonCustomization{ID: groupCustomization, SupportEmail: c.SupportEmail, LoginHelp: c.LoginHelp, Footer: c.Footer, Error: c.Error, NewUser: c.NewUser}
}

func (a *API) readCustomization(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	c, err := a.Service.Customization(r.Context())
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, customizationJSON(c))
	return nil
}

func (a *API) updateCustomization(w http.ResponseWriter, r *http.Request) error {
	in, err := attrs(w, r)
	if err != nil {
		return err
	}
	c, err := a.Service.UpdateCustomization(r.Context(), in)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, customizationJSON(c))
	return nil
}

// jsonGeneral is the wire form of the general settings (go-tfe's
// AdminGeneralSetting): every attribute it reads, those Terrace has no
// feature for as false, 0 or "".
type jsonGeneral struct {
	ID                               string `jsonapi:"primary,general-settings"`
	LimitUserOrganizationCreation    bool   `jsonapi:"attr,limit-user-organization-creation"`
	APIRateLimitingEnabled           bool   `jsonapi:"attr,api-rate-limiting-enabled"`
	APIRateLimit                     int    `jsonapi:"attr,api-rate-limit"`
	SendPassingStatuses              bool   `jsonapi:"attr,send-passing-statuses-for-untriggered-speculative-plans"`
	AllowSpeculativePlansOnPR        bool   `jsonapi:"attr,allow-speculative-plans-on-pull-requests-from-forks"`
	RequireTwoFactorForAdmins        bool   `jsonapi:"attr,require-two-factor-for-admins"`
	FairRunQueuingEnabled            bool   `jsonapi:"attr,fair-run-queuing-enabled"`
	LimitOrgsPerUser                 bool   `jsonapi:"attr,limit-organizations-per-user"`
	DefaultOrgsPerUserCeiling        int    `jsonapi:"attr,default-organizations-per-user-ceiling"`
	LimitWorkspacesPerOrg            bool   `jsonapi:"attr,limit-workspaces-per-organization"`
	DefaultWorkspacesPerOrgCeiling   int    `jsonapi:"attr,default-workspaces-per-organization-ceiling"`
	TerraformBuildWorkerApplyTimeout string `jsonapi:"attr,terraform-build-worker-apply-timeout"`
	TerraformBuildWorkerPlanTimeout  string `jsonapi:"attr,terraform-build-worker-plan-timeout"`
	ApplyTimeout                     string `jsonapi:"attr,apply-timeout"`
	PlanTimeout                      string `jsonapi:"attr,plan-timeout"`
	DefaultRemoteStateAccess         bool   `jsonapi:"attr,default-remote-state-access"`
}

func generalJSON(g General) *jsonGeneral {
	return &jsonGeneral{
		ID:                            groupGeneral,
		LimitUserOrganizationCreation: g.LimitUserOrganizationCreation,
		APIRateLimitingEnabled:        g.APIRateLimitingEnabled,
		APIRateLimit:                  g.APIRateLimit,
		ApplyTimeout:                  g.ApplyTimeout,
		PlanTimeout:                   g.PlanTimeout,
		DefaultRemoteStateAccess:      g.DefaultRemoteStateAccess,
	}
}

// jsonSMTP is the wire form of the SMTP settings (go-tfe's
// AdminSMTPSetting). The password is write-only: never shown.
type jsonSMTP struct {
	ID       string `jsonapi:"primary,smtp-settings"`
	Enabled  bool   `jsonapi:"attr,enabled"`
	Host     string `jsonapi:"attr,host"`
	Port     int    `jsonapi:"attr,port"`
	Sender   string `jsonapi:"attr,sender"`
	Auth     string `jsonapi:"attr,auth"`
	Username string `jsonapi:"attr,username"`
}

func smtpJSON(m Mail) *jsonSMTP {
	return &jsonSMTP{ID: groupSMTP, Enabled: m.Enabled, Host: m.Host, Port: m.Port, Sender: m.Sender, Auth: m.Auth, Username: m.Username}
}

func (a *API) readGeneral(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	g, err := a.Service.General(r.Context())
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, generalJSON(g))
	return nil
}

// attrs reads a PATCH's attributes as sent (none: an empty object).
func attrs(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, error) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	if len(doc.Attributes) == 0 || string(doc.Attributes) == "null" {
		return out, nil
	}
	return out, doc.Attrs(&out)
}

func (a *API) updateGeneral(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	in, err := attrs(w, r)
	if err != nil {
		return err
	}
	g, err := a.Service.UpdateGeneral(r.Context(), in)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, generalJSON(g))
	return nil
}

func (a *API) readSMTP(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	m, err := a.Service.Mail(r.Context())
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, smtpJSON(m))
	return nil
}

func (a *API) updateSMTP(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	in, err := attrs(w, r)
	if err != nil {
		return err
	}
	m, err := a.Service.UpdateMail(r.Context(), in)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, smtpJSON(m))
	return nil
}
