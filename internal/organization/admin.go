package organization

import (
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Terrace has no paid plans: every organization has every feature Terrace
// implements, all the time. The admin endpoints below exist because
// clients (go-tfe's test helpers among them) upgrade an organization's plan
// before they start; they answer truthfully and change nothing. (The
// site's settings, rate limiting among them, are internal/sitesettings'.)

// registerAdmin adds the site-admin and auxiliary routes.
func (a *API) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/admin/feature-sets", a.listFeatureSets)
	mux.HandleFunc("POST /api/v2/admin/organizations/{org}/subscription", a.updateSubscription)
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
