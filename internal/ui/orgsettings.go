package ui

import "net/http"

// registerOrgSettings adds the routes of the organization's settings and members pages.
func (u *UI) registerOrgSettings(mux *http.ServeMux) {}
