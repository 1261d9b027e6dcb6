package organization

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// The site administrators' organizations (Terraform Enterprise's admin
// organizations API): every organization, whoever its members are, with
// the attributes Terraform Enterprise adds for site admins. Every route is
// the SiteAdmin action.
//
// Of those attributes Terrace implements is-disabled: a disabled
// organization is closed to its members (their user tokens and sessions
// act as if they were not members, and are told why), and to every token
// of its own, team, organization, run, agent or run task (refused at
// authentication: internal/auth's refuseDisabled), on the very next
// request on every replica (the column is read by authentication, and
// every update of organizations raises the authentication epoch). Site
// admins still reach it, to enable it again. No runner claims a job of its
// runs (the run domain's ClosedOrganizationsSQL is DisabledOrganizationsSQL):
// they wait in the queue, and enabling it again wakes the runners
// (OnEnable). A job already claimed is left to end or error rather than
// canceled: disabling is undone by enabling, which a canceled run is not,
// and an apply cut off leaves resources apart from the state. On the
// server's runners it runs to its end; an agent, whose token is refused,
// loses it as a silent agent does.
//
// A site admin also shares the organization's private modules and
// providers with other organizations (global sharing, module consumers:
// sharing.go), limits its workspaces (workspace-limit, counted as a
// workspace is created), and sets what its runs may do: their own time
// limits of a plan and an apply (plan-timeout and apply-timeout, or their
// older names terraform-build-worker-…; without them the site's apply,
// internal/sitesettings; the job API hands the runner the limits in
// force), access to terraform versions registered as beta
// (access-beta-tools: internal/toolversion refuses them to a workspace
// of an organization without it) and sudo (terraform-worker-sudo-enabled:
// without it a runner starts terraform with no_new_privs, so that no
// setuid program, sudo among them, gains privileges in a run).

// AdminFilter selects organizations for the site admins' list.
type AdminFilter struct {
	// Query is a part of the name or the notification email, Name a part
	// of the name, Email a part of the email (any case); all that are
	// set must match.
	Query, Name, Email string
	// None selects no organization (a filter no organization meets).
	None bool
	// ModuleProducer selects the organizations that share their private
	// modules (globally or with named consumers).
	ModuleProducer bool
}

// AdminListPage returns a page of the organizations f selects, by name
// (the store filters and pages them), and how many it selects in all.
func (s *Service) AdminListPage(ctx context.Context, f AdminFilter, offset, limit int) ([]*Organization, int, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, 0, err
	}
	if f.None {
		return []*Organization{}, 0, nil
	}
	where := `1 = 1`
	var args []any
	like := func(value string, columns ...string) {
		if value == "" {
			return
		}
		pattern := "%" + store.EscapeLike(strings.ToLower(value)) + "%"
		var or []string
		for _, c := range columns {
			or = append(or, `LOWER(`+c+`) LIKE ?`+store.LikeEscape)
			args = append(args, pattern)
		}
		where += ` AND (` + strings.Join(or, ` OR `) + `)`
	}
	like(f.Query, "name", "email")
	like(f.Name, "name")
	like(f.Email, "email")
	if f.ModuleProducer {
		where += ` AND (global_module_sharing OR EXISTS (SELECT 1 FROM organization_module_consumers c WHERE c.organization_name = organizations.name))`
	}
	return store.Page(ctx, s.db, scan, cols, "organizations", where, `name`, offset, limit, args...)
}

// SetDisabled disables or enables an organization (a site admin's
// decision): see the top of this file.
func (s *Service) SetDisabled(ctx context.Context, name string, disabled bool) (*Organization, error) {
	return s.SetAdminOptions(ctx, name, AdminOptions{Disabled: &disabled})
}

// registerAdminOrganizations adds the admin organizations API.
func (a *API) registerAdminOrganizations(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/admin/organizations", tfeapi.Handle(a.adminList))
	mux.HandleFunc("GET /api/v2/admin/organizations/{org}", tfeapi.Handle(a.adminRead))
	mux.HandleFunc("PATCH /api/v2/admin/organizations/{org}", tfeapi.Handle(a.adminUpdate))
	mux.HandleFunc("DELETE /api/v2/admin/organizations/{org}", a.adminDelete)
	mux.HandleFunc("GET /api/v2/admin/organizations/{org}/relationships/module-consumers", tfeapi.Handle(a.listModuleConsumers))
	mux.HandleFunc("PATCH /api/v2/admin/organizations/{org}/relationships/module-consumers", tfeapi.Handle(a.updateModuleConsumers))
}

// jsonAdminOrganization is the wire form of the admin organizations API
// (go-tfe's AdminOrganization). A timeout is null when the organization
// has none of its own (the site's applies; terraform-build-worker-… are
// Terraform Enterprise's older names of the same two); the workspace
// limit is null when it has none.
type jsonAdminOrganization struct {
	Name                             string         `jsonapi:"primary,organizations"`
	AccessBetaTools                  bool           `jsonapi:"attr,access-beta-tools"`
	ExternalID                       string         `jsonapi:"attr,external-id"`
	GlobalModuleSharing              bool           `jsonapi:"attr,global-module-sharing"`
	GlobalProviderSharing            bool           `jsonapi:"attr,global-provider-sharing"`
	IsDisabled                       bool           `jsonapi:"attr,is-disabled"`
	NotificationEmail                string         `jsonapi:"attr,notification-email"`
	SsoEnabled                       bool           `jsonapi:"attr,sso-enabled"`
	TerraformBuildWorkerApplyTimeout *string        `jsonapi:"attr,terraform-build-worker-apply-timeout"`
	TerraformBuildWorkerPlanTimeout  *string        `jsonapi:"attr,terraform-build-worker-plan-timeout"`
	ApplyTimeout                     *string        `jsonapi:"attr,apply-timeout"`
	PlanTimeout                      *string        `jsonapi:"attr,plan-timeout"`
	TerraformWorkerSudoEnabled       bool           `jsonapi:"attr,terraform-worker-sudo-enabled"`
	WorkspaceLimit                   *int           `jsonapi:"attr,workspace-limit"`
	Owners                           []*jsonUserRef `jsonapi:"relation,owners"`
}

type jsonUserRef struct {
	ID string `jsonapi:"primary,users"`
}

// adminDocuments renders organizations for the admin API with their
// owners (one statement for all), and the owners' documents when they
// are to be included.
func (a *API) adminDocuments(ctx context.Context, orgs []*Organization, includeOwners bool) ([]*jsonAdminOrganization, []any, error) {
	names := make([]string, len(orgs))
	for i, o := range orgs {
		names[i] = o.Name
	}
	owners := map[string][]*auth.User{}
	if a.Owners != nil {
		var err error
		if owners, err = a.Owners(ctx, names); err != nil {
			return nil, nil, err
		}
	}
	out := make([]*jsonAdminOrganization, len(orgs))
	var included []any
	for i, o := range orgs {
		j := &jsonAdminOrganization{Name: o.Name, ExternalID: o.ID, IsDisabled: o.Disabled, NotificationEmail: o.Email,
			GlobalModuleSharing: o.GlobalModuleSharing, GlobalProviderSharing: o.GlobalProviderSharing, SsoEnabled: a.SSO, Owners: []*jsonUserRef{}}
		if o.WorkspaceLimit >= 0 {
			j.WorkspaceLimit = &o.WorkspaceLimit
		}
		j.AccessBetaTools, j.TerraformWorkerSudoEnabled = o.AccessBetaTools, o.WorkerSudo
		if o.PlanTimeout != "" {
			j.PlanTimeout, j.TerraformBuildWorkerPlanTimeout = &o.PlanTimeout, &o.PlanTimeout
		}
		if o.ApplyTimeout != "" {
			j.ApplyTimeout, j.TerraformBuildWorkerApplyTimeout = &o.ApplyTimeout, &o.ApplyTimeout
		}
		for _, u := range owners[o.Name] {
			j.Owners = append(j.Owners, &jsonUserRef{ID: u.ID})
			if includeOwners && a.RenderUser != nil {
				included = append(included, a.RenderUser(u))
			}
		}
		out[i] = j
	}
	return out, included, nil
}

// AdminIncluded renders the named organizations (those that exist) as
// the admin API shows them, each with its owners, and the owners'
// documents: what the admin workspace and run lists include for
// ?include=organization.owners and workspace.organization.owners. Site
// admins only.
func (a *API) AdminIncluded(r *http.Request, names []string) ([]any, error) {
	ctx := r.Context()
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	orgs := make([]*Organization, 0, len(names))
	for _, name := range names {
		o, err := a.Service.Get(ctx, name)
		if core.KindOf(err) == core.KindNotFound {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		orgs = append(orgs, o)
	}
	docs, owners, err := a.adminDocuments(ctx, orgs, true)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(docs)+len(owners))
	for _, d := range docs {
		out = append(out, d)
	}
	return append(out, owners...), nil
}

// adminFilter reads the query of GET admin/organizations: q (part of the
// name or notification email), q[name], q[email], and Terraform
// Enterprise's filter[module_producer] (true: the organizations sharing
// their modules) and filter[provider_producer] (true selects none: Terrace
// shares no organization's providers). Any other filter is a 400.
func adminFilter(q url.Values) (AdminFilter, error) {
	f := AdminFilter{Query: q.Get("q"), Name: q.Get("q[name]"), Email: q.Get("q[email]")}
	producers := []string{"filter[module_producer]", "filter[provider_producer]"}
	for k := range q {
		if !strings.HasPrefix(k, "filter[") {
			continue
		}
		if !slices.Contains(producers, k) {
			return f, core.BadRequest("unknown filter %s: the organizations list filters by %s", k, strings.Join(producers, " and "))
		}
		switch v := q.Get(k); v {
		case "true":
			if k == "filter[module_producer]" {
				f.ModuleProducer = true
			} else {
				f.None = true
			}
		case "false":
		default:
			return f, core.BadRequest("%s must be true or false, not %q", k, v)
		}
	}
	return f, nil
}

func (a *API) adminList(w http.ResponseWriter, r *http.Request) error {
	f, err := adminFilter(r.URL.Query())
	if err != nil {
		return err
	}
	inc, err := tfeapi.Includes(r, "owners")
	if err != nil {
		return err
	}
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	orgs, total, err := a.Service.AdminListPage(r.Context(), f, page.Offset(), page.Size)
	if err != nil {
		return err
	}
	out, included, err := a.adminDocuments(r.Context(), orgs, inc["owners"])
	if err != nil {
		return err
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}, included...)
	return nil
}

// adminRespond answers with one organization as the admin API shows it.
func (a *API) adminRespond(w http.ResponseWriter, r *http.Request, org *Organization) error {
	inc, err := tfeapi.Includes(r, "owners")
	if err != nil {
		return err
	}
	out, included, err := a.adminDocuments(r.Context(), []*Organization{org}, inc["owners"])
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, out[0], included...)
	return nil
}

func (a *API) adminRead(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		return err
	}
	return a.adminRespond(w, r, org)
}

// timeoutAttributes are the admin attributes of an organization's own
// time limits, each to the option it sets: Terraform Enterprise's two
// names of each.
var timeoutAttributes = map[string]string{
	"plan-timeout":                         "plan-timeout",
	"terraform-build-worker-plan-timeout":  "plan-timeout",
	"apply-timeout":                        "apply-timeout",
	"terraform-build-worker-apply-timeout": "apply-timeout",
}

// readOnlyAdminAttributes are shown but not changed through the admin API.
var readOnlyAdminAttributes = map[string]string{
	"name":               "rename the organization with PATCH /api/v2/organizations/{name}",
	"external-id":        "it is the organization's ID",
	"notification-email": "change the organization's email with PATCH /api/v2/organizations/{name}",
	"sso-enabled":        "single sign-on is configured for the whole site (terrace server --oidc-issuer)",
}

// adminUpdate changes what a site admin may change of an organization:
// is-disabled. null is "unchanged"; every other attribute is refused with
// its reason unless it asks for what Terrace already does, and nothing
// changes when one is refused.
func (a *API) adminUpdate(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return err
	}
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		return err
	}
	var attrs map[string]json.RawMessage
	if err := doc.Attrs(&attrs); err != nil {
		return err
	}
	var problems []error
	var disabled, modules, providers, beta, sudo *bool
	var limit *int
	timeouts := map[string]*string{}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		raw := attrs[name]
		if name == "workspace-limit" {
			// null is no limit; a number, at most that many workspaces.
			l := -1
			if string(raw) != "null" {
				if err := json.Unmarshal(raw, &l); err != nil || l < 0 {
					problems = append(problems, core.Invalid("workspace-limit must be a number of workspaces (0 or more), or null for none"))
					continue
				}
			}
			limit = &l
			continue
		}
		if string(raw) == "null" {
			continue
		}
		if option, ok := timeoutAttributes[name]; ok {
			// "" is the site's limit; two names of one limit must agree.
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				problems = append(problems, core.Invalid("%s must be a duration such as \"24h\", or \"\" for the site's", name))
				continue
			}
			if err := checkTimeout(name, v); err != nil {
				problems = append(problems, err)
				continue
			}
			if prev := timeouts[option]; prev != nil && *prev != v {
				problems = append(problems, core.Invalid("%s %q disagrees with the %q given for the same limit under its other name", name, v, *prev))
				continue
			}
			timeouts[option] = &v
			continue
		}
		if dst, ok := map[string]**bool{"is-disabled": &disabled, "global-module-sharing": &modules, "global-provider-sharing": &providers,
			"access-beta-tools": &beta, "terraform-worker-sudo-enabled": &sudo}[name]; ok {
			var v bool
			if err := json.Unmarshal(raw, &v); err != nil {
				problems = append(problems, core.Invalid("%s must be a boolean", name))
				continue
			}
			*dst = &v
			continue
		}
		if why, ok := readOnlyAdminAttributes[name]; ok {
			problems = append(problems, core.Invalid("%s cannot be changed through the admin API: %s", name, why))
			continue
		}
		problems = append(problems, core.Invalid("%q is not an attribute of an organization in the admin API", name))
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	opts := AdminOptions{GlobalModuleSharing: modules, GlobalProviderSharing: providers, WorkspaceLimit: limit, Disabled: disabled,
		PlanTimeout: timeouts["plan-timeout"], ApplyTimeout: timeouts["apply-timeout"], AccessBetaTools: beta, WorkerSudo: sudo}
	if opts != (AdminOptions{}) {
		if org, err = a.Service.SetAdminOptions(r.Context(), org.Name, opts); err != nil {
			return err
		}
	}
	return a.adminRespond(w, r, org)
}

func (a *API) adminDelete(w http.ResponseWriter, r *http.Request) {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("org")))
}

// listModuleConsumers lists the organizations a site admin named as
// consumers of the organization's private modules (sharing.go).
func (a *API) listModuleConsumers(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	orgs, err := a.Service.ModuleConsumers(r.Context(), r.PathValue("org"))
	if err != nil {
		return err
	}
	orgs, pg := tfeapi.Paginate(orgs, page)
	out, included, err := a.adminDocuments(r.Context(), orgs, false)
	if err != nil {
		return err
	}
	tfeapi.RespondList(w, r, out, pg, included...)
	return nil
}

// updateModuleConsumers replaces the consumers of the organization's
// private modules (relationship documents of type organizations, by
// name) and turns its global module sharing off.
func (a *API) updateModuleConsumers(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		return err
	}
	consumers, err := tfeapi.DecodeResources(w, r)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(consumers))
	for _, c := range consumers {
		if c.Type != "organizations" {
			return core.Invalid("a module consumer is an organization (type organizations), not %q", c.Type)
		}
		names = append(names, c.ID)
	}
	if err := a.Service.SetModuleConsumers(r.Context(), r.PathValue("org"), names); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
