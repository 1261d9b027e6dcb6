package ui

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/vcs"
)

// The organization's VCS providers (HCP Terraform's settings/version-control
// page): each OAuth client with its host, scope and whether it holds a
// token, and, for the providers whose OAuth authorization flow Terrace runs,
// the callback URL to register with the host's OAuth application and the
// link that connects it (vcsconnect.go serves the flow). Reading needs what
// the API's list does (authz.OrgReadVCS: those who manage VCS settings, or
// administer a workspace); adding, connecting and deleting need
// authz.OrgManageVCS, asked again by the service. Secrets (a token string,
// an application's secret) go in through the form and never come back:
// the service returns none, and the form keeps what was typed but those.

// formProviders are the providers the add form offers: those a client
// works with by a personal access token or through the authorization flow
// Terrace runs. Others (GitLab, Bitbucket, Azure DevOps) are added through
// the API.
var formProviders = []vcs.Provider{vcs.GitHub, vcs.GitHubEnterprise, vcs.Gitea, vcs.Forgejo}

// GitHub.com's addresses, which the add form starts with (as HCP
// Terraform's does) and gives a GitHub provider whose fields were left
// empty: there is no other GitHub.com.
const (
	githubHTTPURL = "https://github.com"
	githubAPIURL  = "https://api.github.com"
)

// formWording puts the API's attribute names in a refusal as the form's
// labels name those fields: "api-url is required" is "API URL is
// required" on this page.
func formWording(msg string) string {
	for _, l := range []struct{ attr, label, within string }{
		{"service-provider", "Provider", "the provider"}, {"api-url", "API URL", "the API URL"}, {"http-url", "HTTP URL", "the HTTP URL"},
		{"oauth-token-string", "Personal access token", "the personal access token"},
		{"key", "OAuth application client ID", ""}, {"secret", "OAuth application secret", ""}, {"name", "Name", ""},
	} {
		// At the start the attribute is the sentence's subject ("key is
		// longer than…"); within it only the hyphenated names are
		// unmistakable.
		if rest, ok := strings.CutPrefix(msg, l.attr+" "); ok {
			msg = l.label + " " + rest
		}
		if l.within != "" {
			msg = strings.ReplaceAll(msg, l.attr, l.within)
		}
	}
	return msg
}

// vcsClientView is a client as the page shows it.
type vcsClientView struct {
	ID string
	// Name is the client's name, or its provider's when it has none.
	Name               string
	Provider           string
	HTTPURL            string
	OrganizationScoped bool
	Projects           int
	Token              *vcs.Token // its newest token; nil: not connected
	// CallbackURL is "" when Terrace runs no flow for it. Connect is the
	// connect path, "" also while it has no OAuth application (no key):
	// a provider connected with a personal access token only has nothing
	// to connect through.
	CallbackURL, Connect string
	// Key is its OAuth application's client ID (public; "" when none).
	Key string
}

// vcsForm is what the add form was given, less its secrets.
type vcsForm struct {
	Provider, Name, HTTPURL, APIURL, Key string
}

type providerChoice struct {
	Value, Label string
	// HTTPURL and APIURL are the provider's only addresses (GitHub.com's),
	// which app.js fills in when it is chosen; "" for the others.
	HTTPURL, APIURL string
}

type vcsProvidersData struct {
	Clients []vcsClientView
	// Manage: the caller may add, connect and delete providers.
	Manage    bool
	Providers []providerChoice
	Form      vcsForm
	// Error is the add form's refusal.
	Error string
	// Connected names the provider a connection just connected
	// (?connected=<id>).
	Connected string
}

// vcsProvidersPath is the page's URL.
func vcsProvidersPath(org string) string { return orgPath(org, "settings", "version-control") }

// servesVCS answers 404 when this server keeps no VCS providers.
func (u *UI) servesVCS(w http.ResponseWriter, r *http.Request) bool {
	if u.o.VCS == nil {
		u.notFound(w, r)
		return false
	}
	return true
}

// vcsProviders lists the organization's VCS providers.
func (u *UI) vcsProviders(w http.ResponseWriter, r *http.Request) {
	u.showVCSProviders(w, r, http.StatusOK, newVCSForm(), "")
}

// newVCSForm is the add form as it starts: GitHub.com, with its addresses.
func newVCSForm() vcsForm {
	return vcsForm{Provider: string(vcs.GitHub), HTTPURL: githubHTTPURL, APIURL: githubAPIURL}
}

func (u *UI) showVCSProviders(w http.ResponseWriter, r *http.Request, status int, form vcsForm, formErr string) {
	if !u.servesVCS(w, r) {
		return
	}
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgReadVCS, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	clients, err := u.o.VCS.ListClients(ctx, org)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	// Every client's tokens in one query, oldest first: the last one of a
	// client is the one the page shows.
	tokens, err := u.o.VCS.ListTokens(ctx, org)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	newest := map[string]*vcs.Token{}
	for _, t := range tokens {
		newest[t.Client] = t
	}
	d := vcsProvidersData{Manage: allowed(ctx, authz.OrgManageVCS, authz.Resource{Organization: org}), Form: form, Error: formErr}
	q := r.URL.Query()
	for _, c := range clients {
		v := vcsClientView{ID: c.ID, Name: c.Provider.DisplayName(), Provider: c.Provider.DisplayName(), HTTPURL: c.HTTPURL,
			OrganizationScoped: c.OrganizationScoped, Projects: len(c.Projects), Token: newest[c.ID],
			CallbackURL: u.o.VCS.CallbackURL(c), Connect: connectPath(c), Key: c.Key}
		if c.Name != nil && *c.Name != "" {
			v.Name = *c.Name
		}
		if v.Provider == "" {
			v.Provider = string(c.Provider)
		}
		if c.ID == q.Get("connected") {
			d.Connected = v.Name
		}
		d.Clients = append(d.Clients, v)
	}
	if d.Manage {
		for _, p := range formProviders {
			c := providerChoice{Value: string(p), Label: p.DisplayName()}
			if p == vcs.GitHub {
				c.HTTPURL, c.APIURL = githubHTTPURL, githubAPIURL
			}
			d.Providers = append(d.Providers, c)
		}
	}
	u.render(w, r, status, "vcsproviders", "VCS providers", org, d)
}

// connectPath is where a client is connected through its host's OAuth
// authorization flow: "" unless Terrace runs the provider's flow and the
// client has an OAuth application to run it with (its key and secret).
func connectPath(c *vcs.Client) string {
	if c.Key == "" || !c.HasSecret {
		return ""
	}
	return vcs.ConnectPath(c)
}

// formValue is a form field trimmed, nil when empty: the service then
// answers for an absent attribute as the API does.
func formValue(r *http.Request, name string) *string {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return nil
	}
	return &v
}

// addVCSProvider creates a client from the add form, as the API's create
// does (the same service, the same checks): with a personal access token,
// or with an OAuth application's key and secret, to connect afterwards.
func (u *UI) addVCSProvider(w http.ResponseWriter, r *http.Request) {
	if !u.servesVCS(w, r) {
		return
	}
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgManageVCS, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	form := vcsForm{Provider: r.PostFormValue("provider"), Name: strings.TrimSpace(r.PostFormValue("name")),
		HTTPURL: strings.TrimSpace(r.PostFormValue("http_url")), APIURL: strings.TrimSpace(r.PostFormValue("api_url")),
		Key: strings.TrimSpace(r.PostFormValue("key"))}
	if form.Provider == string(vcs.GitHub) {
		form.HTTPURL = cmp.Or(form.HTTPURL, githubHTTPURL)
		form.APIURL = cmp.Or(form.APIURL, githubAPIURL)
	}
	o := vcs.ClientOptions{Provider: &form.Provider, Name: formValue(r, "name"), HTTPURL: &form.HTTPURL, APIURL: &form.APIURL,
		Key: formValue(r, "key"), TokenString: formValue(r, "token"), Secret: formValue(r, "secret")}
	if form.HTTPURL == "" {
		o.HTTPURL = nil
	}
	if form.APIURL == "" {
		o.APIURL = nil
	}
	c, err := u.o.VCS.CreateClient(ctx, org, o)
	if err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showVCSProviders(w, r, status, form, formWording(formErr))
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, org, "POST /api/v2/organizations/{org}/oauth-clients", http.StatusCreated, c.ID, "org", org)
	http.Redirect(w, r, vcsProvidersPath(org), http.StatusSeeOther)
}

// orgClient returns client id of the page's organization, for a caller
// who may manage its VCS providers.
func (u *UI) orgClient(r *http.Request) (*vcs.Client, error) {
	ctx := r.Context()
	org, id := r.PathValue("org"), r.PathValue("id")
	c, err := u.o.VCS.GetClient(ctx, id)
	if err == nil && c.Organization != org {
		err = core.NotFound("OAuth client %q not found", id)
	}
	if err == nil {
		err = authz.Allows(ctx, authz.OrgManageVCS, authz.Resource{Organization: org})
	}
	return c, err
}

// deleteVCSProvider deletes a client of the page's organization and its
// tokens, as the API's delete does.
func (u *UI) deleteVCSProvider(w http.ResponseWriter, r *http.Request) {
	if !u.servesVCS(w, r) {
		return
	}
	org, id := r.PathValue("org"), r.PathValue("id")
	_, err := u.orgClient(r)
	if err == nil {
		err = u.o.VCS.DeleteClient(r.Context(), id)
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.record(r, org, "DELETE /api/v2/oauth-clients/{id}", http.StatusNoContent, "", "id", id)
	http.Redirect(w, r, vcsProvidersPath(org), http.StatusSeeOther)
}

// setVCSApplication gives a provider the OAuth application it connects
// through (or a new secret of it): the key and secret the host's
// application page shows once its callback URL is registered, which needs
// the provider to exist first. As the API's update does.
func (u *UI) setVCSApplication(w http.ResponseWriter, r *http.Request) {
	if !u.servesVCS(w, r) {
		return
	}
	org, id := r.PathValue("org"), r.PathValue("id")
	c, err := u.orgClient(r)
	if err == nil && !c.Provider.Flows() {
		err = core.Invalid("Terrace does not run the OAuth authorization flow of %s", c.Provider.DisplayName())
	}
	key, secret := formValue(r, "key"), formValue(r, "secret")
	if err == nil && (key == nil || secret == nil) {
		err = core.Invalid("an OAuth application needs its client ID and its secret")
	}
	if err == nil {
		_, err = u.o.VCS.UpdateClient(r.Context(), id, vcs.ClientOptions{Key: key, Secret: secret})
	}
	if err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showVCSProviders(w, r, status, newVCSForm(), formWording(formErr))
		}, http.StatusUnprocessableEntity, core.KindInvalid)
		return
	}
	u.record(r, org, "PATCH /api/v2/oauth-clients/{id}", http.StatusOK, "", "id", id)
	http.Redirect(w, r, vcsProvidersPath(org), http.StatusSeeOther)
}

// tokenRepositories answers the new workspace form's script (app.js):
// the repositories a token of the page's organization reads at its host,
// as JSON, for the repository field to offer. Who may not read the
// organization's VCS providers gets the status the API gives, and no
// names.
func (u *UI) tokenRepositories(w http.ResponseWriter, r *http.Request) {
	if !u.servesVCS(w, r) {
		return
	}
	ctx := r.Context()
	org, id := r.PathValue("org"), r.PathValue("id")
	var names []string
	t, err := u.o.VCS.GetToken(ctx, id)
	if err == nil && t.Organization != org {
		err = core.NotFound("OAuth token %q not found", id)
	}
	if err == nil {
		names, err = u.o.VCS.Repositories(ctx, id)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		status, _, detail := u.answer(r, err)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": detail})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string][]string{"repositories": names})
}
