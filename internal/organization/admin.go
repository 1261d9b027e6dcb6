package organization

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Terrace has no paid plans: every organization has every feature Terrace
// implements, all the time. The admin endpoints below exist because
// clients (go-tfe's test helpers among them) upgrade an organization's plan
// or turn off rate limiting before they start; they answer truthfully and
// change nothing.

// registerAdmin adds the site-admin and auxiliary routes.
func (a *API) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/admin/feature-sets", a.listFeatureSets)
	mux.HandleFunc("POST /api/v2/admin/organizations/{org}/subscription", a.updateSubscription)
	mux.HandleFunc("GET /api/v2/admin/general-settings", a.readGeneralSettings)
	mux.HandleFunc("PATCH /api/v2/admin/general-settings", a.updateGeneralSettings)
	a.registerAdminOrganizations(mux)
}

// FeatureSetID is the ID of Terrace's only feature set.
const FeatureSetID = "fs-terrace"

type jsonFeatureSet struct {
	ID   string `jsonapi:"primary,feature-sets"`
	Name string `jsonapi:"attr,name"`
}

// listFeatureSets lists the feature sets a subscription can name. There is
// one, with every feature, and every plan name searched for (q) finds it:
// whatever plan a client asks for, this is what it gets.
func (a *API) listFeatureSets(w http.ResponseWriter, r *http.Request) {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate([]*jsonFeatureSet{{ID: FeatureSetID, Name: "Terrace (all features)"}}, page)
	tfeapi.RespondList(w, r, items, pg)
}

type jsonOrganizationRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonSubscription struct {
	ID               string               `jsonapi:"primary,subscriptions"`
	IsActive         bool                 `jsonapi:"attr,is-active"`
	IsPublicFreeTier bool                 `jsonapi:"attr,is-public-free-tier"`
	FeatureSet       *jsonFeatureSet      `jsonapi:"relation,feature-set"`
	Organization     *jsonOrganizationRef `jsonapi:"relation,organization"`
}

// updateSubscription accepts a change of an organization's plan. The plan
// must name Terrace's feature set; limits and contract dates are accepted
// and ignored, since Terrace enforces none. Nothing is recorded: the answer
// is the organization's subscription, which is always the same.
func (a *API) updateSubscription(w http.ResponseWriter, r *http.Request) {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	fs, err := doc.RelID("feature-set")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if fs != FeatureSetID {
		tfeapi.Error(w, r, core.Invalid("feature-set must be %q, Terrace's only feature set (it has every feature), not %q", FeatureSetID, fs))
		return
	}
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, &jsonSubscription{
		ID:           "sub-" + strings.TrimPrefix(org.ID, core.PrefixOrganization+"-"),
		IsActive:     true,
		FeatureSet:   &jsonFeatureSet{ID: FeatureSetID, Name: "Terrace (all features)"},
		Organization: &jsonOrganizationRef{Name: org.Name},
	})
}

// jsonGeneralSettings holds the site-wide settings whose values Terrace can
// vouch for; all are fixed by how Terrace works.
type jsonGeneralSettings struct {
	ID                            string `jsonapi:"primary,general-settings"`
	LimitUserOrganizationCreation bool   `jsonapi:"attr,limit-user-organization-creation"`
	APIRateLimitingEnabled        bool   `jsonapi:"attr,api-rate-limiting-enabled"`
	RequireTwoFactorForAdmins     bool   `jsonapi:"attr,require-two-factor-for-admins"`
	LimitOrganizationsPerUser     bool   `jsonapi:"attr,limit-organizations-per-user"`
	LimitWorkspacesPerOrg         bool   `jsonapi:"attr,limit-workspaces-per-organization"`
	AllowSpeculativePlansOnForks  bool   `jsonapi:"attr,allow-speculative-plans-on-pull-requests-from-forks"`
}

// fixedSettings are the general settings and why each is what it is.
var fixedSettings = map[string]struct {
	value bool
	why   string
}{
	"limit-user-organization-creation":                    {false, "every user may create organizations"},
	"api-rate-limiting-enabled":                           {false, "Terrace does not rate-limit its API"},
	"require-two-factor-for-admins":                       {false, "Terrace has no two-factor sign-in"},
	"limit-organizations-per-user":                        {false, "Terrace does not limit organizations per user"},
	"limit-workspaces-per-organization":                   {false, "Terrace does not limit workspaces per organization"},
	"allow-speculative-plans-on-pull-requests-from-forks": {false, "Terrace has no VCS integration"},
}

func generalSettings() *jsonGeneralSettings {
	return &jsonGeneralSettings{ID: "general"} // every fixed setting is false
}

func (a *API) readGeneralSettings(w http.ResponseWriter, r *http.Request) {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, generalSettings())
}

// updateGeneralSettings accepts a change that asks for what Terrace already
// does (such as api-rate-limiting-enabled=false, which clients send before
// a test run) and refuses, with the reason, anything else. null values are
// "unchanged" (go-tfe always sends apply-timeout and plan-timeout).
func (a *API) updateGeneralSettings(w http.ResponseWriter, r *http.Request) {
	if err := authz.RequireSiteAdmin(r.Context()); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs map[string]json.RawMessage
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var problems []string
	for name, raw := range attrs {
		if string(raw) == "null" {
			continue
		}
		fixed, ok := fixedSettings[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%q is not a setting Terrace has", name))
			continue
		}
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			problems = append(problems, fmt.Sprintf("%q must be a boolean", name))
			continue
		}
		if v != fixed.value {
			problems = append(problems, fmt.Sprintf("%q cannot be %t: %s", name, v, fixed.why))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		tfeapi.Error(w, r, core.Invalid("%s", strings.Join(problems, "; ")))
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, generalSettings())
}
