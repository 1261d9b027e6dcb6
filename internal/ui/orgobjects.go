package ui

import "net/http"

// registerOrgObjects adds the routes of the forms that create projects, teams and variable sets.
func (u *UI) registerOrgObjects(mux *http.ServeMux) {}
