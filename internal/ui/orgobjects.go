package ui

import "net/http"

// registerOrgObjects adds the routes of the forms that create projects, teams and variable sets.
//
// Each form posts to a route of the organization's page that lists the
// objects (projects.go, settings.go), asks the action the API route it
// mirrors asks (internal/authz/routes.go), calls the same domain service,
// records the API route in the audit trail and redirects back (303).
func (u *UI) registerOrgObjects(mux *http.ServeMux) {
	mux.HandleFunc("POST /app/{org}/projects", u.createProject)
	mux.HandleFunc("POST /app/{org}/projects/{id}", u.updateProject)
	mux.HandleFunc("POST /app/{org}/projects/{id}/delete", u.deleteProject)

	mux.HandleFunc("POST /app/{org}/teams", u.createTeam)
	mux.HandleFunc("POST /app/{org}/teams/{id}", u.updateTeam)
	mux.HandleFunc("POST /app/{org}/teams/{id}/members", u.addTeamMember)
	mux.HandleFunc("POST /app/{org}/teams/{id}/members/remove", u.removeTeamMember)
	mux.HandleFunc("POST /app/{org}/teams/{id}/delete", u.deleteTeam)

	mux.HandleFunc("POST /app/{org}/variable-sets", u.createVarset)
	mux.HandleFunc("POST /app/{org}/variable-sets/{id}/variables", u.createVarsetVariable)
	mux.HandleFunc("POST /app/{org}/variable-sets/{id}", u.updateVarset)
	mux.HandleFunc("POST /app/{org}/variable-sets/{id}/variables/{var}", u.updateVarsetVariable)
	mux.HandleFunc("POST /app/{org}/variable-sets/{id}/variables/{var}/delete", u.deleteVarsetVariable)
	mux.HandleFunc("POST /app/{org}/variable-sets/{id}/apply", u.applyVarset)
	mux.HandleFunc("POST /app/{org}/variable-sets/{id}/remove", u.unapplyVarset)
	mux.HandleFunc("POST /app/{org}/variable-sets/{id}/delete", u.deleteVarset)
}
