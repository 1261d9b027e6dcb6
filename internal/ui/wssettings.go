package ui

import "net/http"

// registerWorkspaceSettings adds the routes of a workspace's settings pages.
func (u *UI) registerWorkspaceSettings(mux *http.ServeMux) {}
