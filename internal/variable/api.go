package variable

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the variable and variable set endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/workspaces/{ws}/vars", a.listWorkspaceVars)
	mux.HandleFunc("POST /api/v2/workspaces/{ws}/vars", a.createWorkspaceVar)
	mux.HandleFunc("GET /api/v2/workspaces/{ws}/vars/{var}", a.getWorkspaceVar)
	mux.HandleFunc("PATCH /api/v2/workspaces/{ws}/vars/{var}", a.updateWorkspaceVar)
	mux.HandleFunc("DELETE /api/v2/workspaces/{ws}/vars/{var}", a.deleteWorkspaceVar)
	mux.HandleFunc("GET /api/v2/workspaces/{ws}/all-vars", a.listAllWorkspaceVars)

	mux.HandleFunc("GET /api/v2/organizations/{org}/varsets", a.listVarsets)
	mux.HandleFunc("POST /api/v2/organizations/{org}/varsets", a.createVarset)
	mux.HandleFunc("GET /api/v2/workspaces/{ws}/varsets", a.listWorkspaceVarsets)
	mux.HandleFunc("GET /api/v2/projects/{prj}/varsets", a.listProjectVarsets)
	mux.HandleFunc("GET /api/v2/varsets/{vs}", a.getVarset)
	mux.HandleFunc("PATCH /api/v2/varsets/{vs}", a.updateVarset)
	mux.HandleFunc("DELETE /api/v2/varsets/{vs}", a.deleteVarset)
	mux.HandleFunc("POST /api/v2/varsets/{vs}/relationships/workspaces", a.links(true, "workspaces"))
	mux.HandleFunc("DELETE /api/v2/varsets/{vs}/relationships/workspaces", a.links(false, "workspaces"))
	mux.HandleFunc("POST /api/v2/varsets/{vs}/relationships/projects", a.links(true, "projects"))
	mux.HandleFunc("DELETE /api/v2/varsets/{vs}/relationships/projects", a.links(false, "projects"))

	mux.HandleFunc("GET /api/v2/varsets/{vs}/relationships/vars", a.listVarsetVars)
	mux.HandleFunc("POST /api/v2/varsets/{vs}/relationships/vars", a.createVarsetVar)
	mux.HandleFunc("GET /api/v2/varsets/{vs}/relationships/vars/{var}", a.getVarsetVar)
	mux.HandleFunc("PATCH /api/v2/varsets/{vs}/relationships/vars/{var}", a.updateVarsetVar)
	mux.HandleFunc("DELETE /api/v2/varsets/{vs}/relationships/vars/{var}", a.deleteVarsetVar)
}

// --- wire forms (go-tfe's Variable, VariableSetVariable, VariableSet) ---

type jsonWorkspaceRef struct {
	ID string `jsonapi:"primary,workspaces"`
}

type jsonProjectRef struct {
	ID string `jsonapi:"primary,projects"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonVarsetRef struct {
	ID string `jsonapi:"primary,varsets"`
}

type jsonVarRef struct {
	ID string `jsonapi:"primary,vars"`
}

// jsonVar is a variable. Value is null for a sensitive variable.
type jsonVar struct {
	ID           string            `jsonapi:"primary,vars"`
	Key          string            `jsonapi:"attr,key"`
	Value        *string           `jsonapi:"attr,value"`
	Description  string            `jsonapi:"attr,description"`
	Category     string            `jsonapi:"attr,category"`
	HCL          bool              `jsonapi:"attr,hcl"`
	Sensitive    bool              `jsonapi:"attr,sensitive"`
	VersionID    string            `jsonapi:"attr,version-id"`
	CreatedAt    time.Time         `jsonapi:"attr,created-at,iso8601"`
	Configurable *jsonWorkspaceRef `jsonapi:"relation,configurable,omitempty"`
	Varset       *jsonVarsetRef    `jsonapi:"relation,varset,omitempty"`
}

// toJSONVar is the only way a variable reaches a response: it drops the
// value of a sensitive variable.
func toJSONVar(v *Variable) *jsonVar {
	j := &jsonVar{ID: v.ID, Key: v.Key, Description: v.Description, Category: string(v.Category),
		HCL: v.HCL, Sensitive: v.Sensitive, VersionID: v.VersionID, CreatedAt: v.CreatedAt}
	if !v.Sensitive {
		val := v.Value
		j.Value = &val
	}
	if v.WorkspaceID != "" {
		j.Configurable = &jsonWorkspaceRef{ID: v.WorkspaceID}
	}
	if v.VarsetID != "" {
		j.Varset = &jsonVarsetRef{ID: v.VarsetID}
	}
	return j
}

type jsonParent struct {
	Organization *jsonOrgRef
	Project      *jsonProjectRef
}

type jsonVarset struct {
	ID             string              `jsonapi:"primary,varsets"`
	Name           string              `jsonapi:"attr,name"`
	Description    string              `jsonapi:"attr,description"`
	Global         bool                `jsonapi:"attr,global"`
	Priority       bool                `jsonapi:"attr,priority"`
	VarCount       int                 `jsonapi:"attr,var-count"`
	WorkspaceCount int                 `jsonapi:"attr,workspace-count"`
	ProjectCount   int                 `jsonapi:"attr,project-count"`
	UpdatedAt      time.Time           `jsonapi:"attr,updated-at,iso8601"`
	Organization   *jsonOrgRef         `jsonapi:"relation,organization"`
	Parent         *jsonParent         `jsonapi:"polyrelation,parent"`
	Workspaces     []*jsonWorkspaceRef `jsonapi:"relation,workspaces"`
	Projects       []*jsonProjectRef   `jsonapi:"relation,projects"`
	Vars           []*jsonVarRef       `jsonapi:"relation,vars"`
}

func toJSONVarset(vs *VariableSet) *jsonVarset {
	j := &jsonVarset{
		ID: vs.ID, Name: vs.Name, Description: vs.Description, Global: vs.Global, Priority: vs.Priority,
		VarCount: len(vs.VarIDs), WorkspaceCount: len(vs.WorkspaceIDs), ProjectCount: len(vs.ProjectIDs),
		UpdatedAt:    vs.UpdatedAt,
		Organization: &jsonOrgRef{Name: vs.Organization},
		Workspaces:   []*jsonWorkspaceRef{},
		Projects:     []*jsonProjectRef{},
		Vars:         []*jsonVarRef{},
	}
	if vs.ParentProjectID != "" {
		j.Parent = &jsonParent{Project: &jsonProjectRef{ID: vs.ParentProjectID}}
	} else {
		j.Parent = &jsonParent{Organization: &jsonOrgRef{Name: vs.Organization}}
	}
	for _, id := range vs.WorkspaceIDs {
		j.Workspaces = append(j.Workspaces, &jsonWorkspaceRef{ID: id})
	}
	for _, id := range vs.ProjectIDs {
		j.Projects = append(j.Projects, &jsonProjectRef{ID: id})
	}
	for _, id := range vs.VarIDs {
		j.Vars = append(j.Vars, &jsonVarRef{ID: id})
	}
	return j
}

// varsetIncludes returns the objects asked for with include=vars; other
// include names are accepted and answered with linkage only.
func (a *API) varsetIncludes(r *http.Request, sets ...*VariableSet) ([]any, error) {
	inc, err := tfeapi.Includes(r, "workspaces", "projects", "vars", "stacks", "organization", "parent")
	if err != nil {
		return nil, err
	}
	if !inc["vars"] {
		return nil, nil
	}
	var out []any
	for _, vs := range sets {
		vars, err := a.Service.ListVarsetVariables(r.Context(), vs.ID)
		if err != nil {
			return nil, err
		}
		for _, v := range vars {
			out = append(out, toJSONVar(v))
		}
	}
	return out, nil
}

// --- workspace variables ---

func decodeVar(w http.ResponseWriter, r *http.Request) (VarOptions, error) {
	var opts VarOptions
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return opts, err
	}
	if err := doc.Attrs(&opts); err != nil {
		return opts, err
	}
	return opts, nil
}

func (a *API) listWorkspaceVars(w http.ResponseWriter, r *http.Request) {
	a.respondVarList(w, r, func() ([]*Variable, error) {
		return a.Service.ListWorkspaceVariables(r.Context(), r.PathValue("ws"))
	})
}

func (a *API) listAllWorkspaceVars(w http.ResponseWriter, r *http.Request) {
	a.respondVarList(w, r, func() ([]*Variable, error) {
		return a.Service.ListAllWorkspaceVariables(r.Context(), r.PathValue("ws"))
	})
}

func (a *API) respondVarList(w http.ResponseWriter, r *http.Request, list func() ([]*Variable, error)) {
	a.respondVarListAs(w, r, toJSONVar, list)
}

// respondVarListAs is respondVarList rendering each variable with encode.
func (a *API) respondVarListAs(w http.ResponseWriter, r *http.Request, encode func(*Variable) *jsonVar, list func() ([]*Variable, error)) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	vars, err := list()
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(vars, page)
	out := make([]*jsonVar, len(items))
	for i, v := range items {
		out[i] = encode(v)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) createWorkspaceVar(w http.ResponseWriter, r *http.Request) {
	opts, err := decodeVar(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusCreated, toJSONVar)(a.Service.CreateWorkspaceVariable(r.Context(), r.PathValue("ws"), opts))
}

func (a *API) getWorkspaceVar(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, toJSONVar)(a.Service.GetWorkspaceVariable(r.Context(), r.PathValue("ws"), r.PathValue("var")))
}

func (a *API) updateWorkspaceVar(w http.ResponseWriter, r *http.Request) {
	opts, err := decodeVar(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusOK, toJSONVar)(a.Service.UpdateWorkspaceVariable(r.Context(), r.PathValue("ws"), r.PathValue("var"), opts))
}

func (a *API) deleteWorkspaceVar(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DeleteWorkspaceVariable(r.Context(), r.PathValue("ws"), r.PathValue("var")))
}

// --- variable sets ---

func (a *API) respondVarsetList(w http.ResponseWriter, r *http.Request, list func(search string, offset, limit int) ([]*VariableSet, int, error)) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	search := q.Get("q")
	if search == "" {
		search = q.Get("filter[name]")
	}
	items, total, err := list(search, page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	inc, err := a.varsetIncludes(r, items...)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonVarset, len(items))
	for i, vs := range items {
		out[i] = toJSONVarset(vs)
	}
	tfeapi.RespondList(w, r, out, pg, inc...)
}

func (a *API) listVarsets(w http.ResponseWriter, r *http.Request) {
	a.respondVarsetList(w, r, func(search string, offset, limit int) ([]*VariableSet, int, error) {
		return a.Service.ListVarsets(r.Context(), r.PathValue("org"), search, offset, limit)
	})
}

func (a *API) listWorkspaceVarsets(w http.ResponseWriter, r *http.Request) {
	a.respondVarsetList(w, r, func(search string, offset, limit int) ([]*VariableSet, int, error) {
		return a.Service.ListWorkspaceVarsets(r.Context(), r.PathValue("ws"), search, offset, limit)
	})
}

func (a *API) listProjectVarsets(w http.ResponseWriter, r *http.Request) {
	a.respondVarsetList(w, r, func(search string, offset, limit int) ([]*VariableSet, int, error) {
		return a.Service.ListProjectVarsets(r.Context(), r.PathValue("prj"), search, offset, limit)
	})
}

func (a *API) respondVarset(w http.ResponseWriter, r *http.Request, status int, vs *VariableSet) {
	inc, err := a.varsetIncludes(r, vs)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, status, toJSONVarset(vs), inc...)
}

// relIDs returns the IDs of a to-many relationship, nil when absent. Each
// element must carry an id; extra attributes are ignored.
func relIDs(doc *tfeapi.Document, name string) ([]string, error) {
	if _, ok := doc.Relationships[name]; !ok {
		return nil, nil
	}
	res, err := doc.RelResources(name)
	if err != nil {
		return nil, err
	}
	return resourceIDs(name, res)
}

func resourceIDs(name string, res []tfeapi.Resource) ([]string, error) {
	out := []string{}
	for _, r := range res {
		if r.ID == "" {
			return nil, core.Invalid("every element of %s needs an id", name)
		}
		out = append(out, r.ID)
	}
	return out, nil
}

func (a *API) createVarset(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts CreateVarsetOptions
	if err := doc.Attrs(&opts.VarsetOptions); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	org := r.PathValue("org")
	if rel, ok := doc.Relationships["parent"]; ok && len(rel.Data) > 0 && string(rel.Data) != "null" {
		var p tfeapi.Resource
		if err := json.Unmarshal(rel.Data, &p); err != nil {
			tfeapi.Error(w, r, core.BadRequest("relationship \"parent\" must hold one resource identifier"))
			return
		}
		switch p.Type {
		case "projects":
			opts.ParentProjectID = p.ID
		case "organizations", "":
			if p.ID != "" && p.ID != org {
				tfeapi.Error(w, r, core.Invalid("the parent organization must be %q", org))
				return
			}
		default:
			tfeapi.Error(w, r, core.Invalid("parent must be an organization or a project, not %q", p.Type))
			return
		}
	}
	if opts.WorkspaceIDs, err = relIDs(doc, "workspaces"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if opts.ProjectIDs, err = relIDs(doc, "projects"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	vs, err := a.Service.CreateVarset(r.Context(), org, opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondVarset(w, r, http.StatusCreated, vs)
}

func (a *API) getVarset(w http.ResponseWriter, r *http.Request) {
	vs, err := a.Service.GetVarset(r.Context(), r.PathValue("vs"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondVarset(w, r, http.StatusOK, vs)
}

func (a *API) updateVarset(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts VarsetOptions
	if err := doc.Attrs(&opts); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	wsIDs, err := relIDs(doc, "workspaces")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	vs, err := a.Service.UpdateVarset(r.Context(), r.PathValue("vs"), opts, wsIDs)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondVarset(w, r, http.StatusOK, vs)
}

func (a *API) deleteVarset(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DeleteVarset(r.Context(), r.PathValue("vs")))
}

// links serves POST (apply) and DELETE (remove) on
// varsets/{id}/relationships/{workspaces,projects}.
func (a *API) links(add bool, kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		res, err := tfeapi.DecodeResources(w, r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		ids, err := resourceIDs(kind, res)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		var wsIDs, prjIDs []string
		if kind == "workspaces" {
			wsIDs = ids
		} else {
			prjIDs = ids
		}
		if err := a.Service.changeLinks(r.Context(), r.PathValue("vs"), add, wsIDs, prjIDs); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// --- variable set variables ---

func (a *API) listVarsetVars(w http.ResponseWriter, r *http.Request) {
	a.respondVarList(w, r, func() ([]*Variable, error) {
		return a.Service.ListVarsetVariables(r.Context(), r.PathValue("vs"))
	})
}

func (a *API) createVarsetVar(w http.ResponseWriter, r *http.Request) {
	opts, err := decodeVar(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusCreated, toJSONVar)(a.Service.CreateVarsetVariable(r.Context(), r.PathValue("vs"), opts))
}

func (a *API) getVarsetVar(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, toJSONVar)(a.Service.GetVarsetVariable(r.Context(), r.PathValue("vs"), r.PathValue("var")))
}

func (a *API) updateVarsetVar(w http.ResponseWriter, r *http.Request) {
	opts, err := decodeVar(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusOK, toJSONVar)(a.Service.UpdateVarsetVariable(r.Context(), r.PathValue("vs"), r.PathValue("var"), opts))
}

func (a *API) deleteVarsetVar(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DeleteVarsetVariable(r.Context(), r.PathValue("vs"), r.PathValue("var")))
}
