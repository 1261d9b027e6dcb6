package ui

import (
	"net/http"

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
	name := c.Provider.DisplayName()
	if c.Name != nil {
		name = *c.Name
	}
	u.render(w, r, http.StatusOK, "vcsconnect", "Connect "+name, c.Organization, map[string]any{
		"Client": c, "Name": name, "Provider": c.Provider.DisplayName(), "Path": vcs.ConnectPath(c),
		"Reconnect": len(c.Tokens) > 0, "Back": vcsProvidersPath(c.Organization)})
}

func (u *UI) vcsConnect(w http.ResponseWriter, r *http.Request) {
	if u.o.VCS == nil {
		u.notFound(w, r)
		return
	}
	to, err := u.o.VCS.StartConnect(r.Context(), r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
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
