package ui

import (
	"net/http"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/vcs"
)

// Connecting a VCS provider through its host's OAuth authorization flow
// (internal/vcs flow.go). The connect path (the API's connect-path) shows
// what will be connected; its form, a POST with the page's CSRF token so
// that no other site can start a connection in someone's name, sends the
// browser to the host, which sends it back to the callback.

// The patterns are written out (vcs.ConnectPrefix's paths): internal/authz
// reads every route from the source.
func (u *UI) registerVCSConnect(mux *http.ServeMux) {
	mux.HandleFunc("GET /app/vcs/oauth-clients/{id}/connect", u.vcsConnectPage)
	mux.HandleFunc("POST /app/vcs/oauth-clients/{id}/connect", u.vcsConnect)
	mux.HandleFunc("GET /app/vcs/oauth-clients/{id}/callback", u.vcsCallback)
}

func (u *UI) vcsConnectPage(w http.ResponseWriter, r *http.Request) {
	if u.o.VCS == nil {
		u.notFound(w, r)
		return
	}
	c, err := u.o.VCS.GetClient(r.Context(), r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.showVCSConnect(w, r, http.StatusOK, c, "")
}

// showVCSConnect renders the connect page of c. When the connection
// cannot start (what connectMissing says, or problem: the service's
// refusal of the form), the page says why instead of offering the form,
// and links back to the VCS providers page, where it is put right.
func (u *UI) showVCSConnect(w http.ResponseWriter, r *http.Request, status int, c *vcs.Client, problem string) {
	name := c.Provider.DisplayName()
	if c.Name != nil && *c.Name != "" {
		name = *c.Name
	}
	missing := problem
	if missing == "" {
		missing = u.connectMissing(r, c)
	}
	u.render(w, r, status, "vcsconnect", "Connect "+name, c.Organization, map[string]any{
		"Client": c, "Name": name, "Provider": c.Provider.DisplayName(), "Path": vcs.ConnectPath(c),
		"Reconnect": len(c.Tokens) > 0, "Back": vcsProvidersPath(c.Organization), "Missing": missing})
}

// connectMissing is what keeps c from being connected through its host's
// authorization flow, as a sentence; "" when nothing does.
func (u *UI) connectMissing(r *http.Request, c *vcs.Client) string {
	provider := c.Provider.DisplayName()
	switch {
	case !c.Provider.Flows():
		return "Terrace does not run the OAuth authorization flow of " + provider + ": this provider connects with a personal access token, given through the API."
	case !allowed(r.Context(), authz.OrgManageVCS, authz.Resource{Organization: c.Organization}):
		return "Only those who manage the organization's VCS settings may connect this provider."
	case c.Key == "":
		return "This provider has no OAuth application to connect through: register an OAuth application at " + c.HTTPURL +
			" with the callback URL " + u.o.VCS.CallbackURL(c) + ", then give this provider its client ID and secret on the VCS providers page."
	case !c.HasSecret:
		return "This provider's OAuth application has no secret: give it the application's client secret on the VCS providers page."
	}
	return ""
}

func (u *UI) vcsConnect(w http.ResponseWriter, r *http.Request) {
	if u.o.VCS == nil {
		u.notFound(w, r)
		return
	}
	to, err := u.o.VCS.StartConnect(r.Context(), r.PathValue("id"))
	if err != nil {
		// A refusal (no OAuth application, or one without its secret) is
		// the connect page saying so, with its way back; the client is
		// read again, as the caller sees it.
		c, cerr := u.o.VCS.GetClient(r.Context(), r.PathValue("id"))
		if cerr != nil {
			u.fail(w, r, err)
			return
		}
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, problem string) {
			u.showVCSConnect(w, r, status, c, problem)
		}, http.StatusUnprocessableEntity, core.KindInvalid)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// vcsCallback is where the host sends the browser back: with a code and
// the state the connection started with, or with the error the host
// gives (the person declined).
func (u *UI) vcsCallback(w http.ResponseWriter, r *http.Request) {
	if u.o.VCS == nil {
		u.notFound(w, r)
		return
	}
	ctx := r.Context()
	id, q := r.PathValue("id"), r.URL.Query()
	c, err := u.o.VCS.GetClient(ctx, id)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if e := q.Get("error"); e != "" {
		err = u.o.VCS.DeclinedConnect(ctx, id, q.Get("state"), e, q.Get("error_description"))
	} else {
		_, err = u.o.VCS.FinishConnect(ctx, id, q.Get("state"), q.Get("code"))
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.record(r, c.Organization, "PATCH /api/v2/oauth-clients/{id}", http.StatusOK, "", "id", id)
	http.Redirect(w, r, vcsProvidersPath(c.Organization)+"?connected="+id, http.StatusSeeOther)
}
