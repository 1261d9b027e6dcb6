package nocode

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/workspace"
)

// WorkspaceResponder renders a workspace as the workspace endpoints do.
type WorkspaceResponder interface {
	Respond(w http.ResponseWriter, r *http.Request, status int, ws *workspace.Workspace)
}

// API serves the no-code endpoints.
type API struct {
	Service    *Service
	Workspaces WorkspaceResponder
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v2/organizations/{org}/no-code-modules", a.create)
	mux.HandleFunc("GET /api/v2/no-code-modules/{id}", a.read)
	mux.HandleFunc("PATCH /api/v2/no-code-modules/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/no-code-modules/{id}", a.delete)
	mux.HandleFunc("GET /api/v2/no-code-modules/{id}/versions/{version}/module-variables", a.variables)
	mux.HandleFunc("POST /api/v2/no-code-modules/{id}/workspaces", a.createWorkspace)
	mux.HandleFunc("POST /api/v2/no-code-modules/{id}/workspaces/{ws}/upgrade", a.initiate)
	mux.HandleFunc("GET /api/v2/no-code-modules/{id}/workspaces/{ws}/upgrade/{run}", a.readUpgrade)
	mux.HandleFunc("POST /api/v2/no-code-modules/{id}/workspaces/{ws}/upgrade/{run}", a.confirm)
	// Workspace-scoped aliases (the no-code module is the workspace's).
	mux.HandleFunc("POST /api/v2/workspaces/{ws}/actions/initiate-no-code-upgrade", a.byWorkspace(a.initiate))
	mux.HandleFunc("GET /api/v2/workspaces/{ws}/no-code-upgrade/{run}", a.byWorkspace(a.readUpgrade))
	mux.HandleFunc("POST /api/v2/workspaces/{ws}/no-code-upgrade/{run}/actions/confirm", a.byWorkspace(a.confirm))
}

type jsonModule struct {
	ID              string                `jsonapi:"primary,no-code-modules"`
	VersionPin      string                `jsonapi:"attr,version-pin"`
	Enabled         bool                  `jsonapi:"attr,enabled"`
	CreatedAt       string                `jsonapi:"attr,created-at"`
	UpdatedAt       string                `jsonapi:"attr,updated-at"`
	Organization    *jsonOrgRef           `jsonapi:"relation,organization"`
	RegistryModule  *jsonModuleRef        `jsonapi:"relation,registry-module"`
	VariableOptions []*jsonVariableOption `jsonapi:"relation,variable-options"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonModuleRef struct {
	ID string `jsonapi:"primary,registry-modules"`
}

type jsonVariableOption struct {
	ID           string   `jsonapi:"primary,variable-options"`
	VariableName string   `jsonapi:"attr,variable-name"`
	VariableType string   `jsonapi:"attr,variable-type"`
	Options      []string `jsonapi:"attr,options"`
}

type jsonVariable struct {
	ID          string   `jsonapi:"primary,registry-module-variables"`
	Name        string   `jsonapi:"attr,name"`
	Type        string   `jsonapi:"attr,type"`
	Description string   `jsonapi:"attr,description"`
	Default     any      `jsonapi:"attr,default"`
	Required    bool     `jsonapi:"attr,required"`
	Sensitive   bool     `jsonapi:"attr,sensitive"`
	Options     []string `jsonapi:"attr,options"`
	HasGlobal   bool     `jsonapi:"attr,has-global"`
}

type jsonUpgrade struct {
	ID        string            `jsonapi:"primary,workspace-upgrade"`
	Status    string            `jsonapi:"attr,status"`
	PlanURL   string            `jsonapi:"attr,plan-url"`
	Message   string            `jsonapi:"attr,message"`
	Workspace *jsonWorkspaceRef `jsonapi:"relation,workspace"`
}

type jsonWorkspaceRef struct {
	ID string `jsonapi:"primary,workspaces"`
}

func toJSON(n *Module) (*jsonModule, []any) {
	j := &jsonModule{ID: n.ID, VersionPin: n.VersionPin, Enabled: n.Enabled,
		CreatedAt: n.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"), UpdatedAt: n.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		Organization: &jsonOrgRef{Name: n.Organization}, RegistryModule: &jsonModuleRef{ID: n.RegistryModuleID},
		VariableOptions: []*jsonVariableOption{}}
	var inc []any
	for _, o := range n.VariableOptions {
		jo := &jsonVariableOption{ID: o.ID, VariableName: o.VariableName, VariableType: o.VariableType, Options: o.Options}
		j.VariableOptions = append(j.VariableOptions, jo)
		inc = append(inc, jo)
	}
	return j, inc
}

// respond writes a no-code module; variable options are included when
// asked for (and always after a write, as HCP Terraform does).
func (a *API) respond(w http.ResponseWriter, r *http.Request, status int, n *Module, always bool) {
	inc, err := tfeapi.Includes(r, "variable_options")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	j, included := toJSON(n)
	if !inc["variable_options"] && !always {
		included = nil
	}
	tfeapi.Respond(w, r, status, j, included...)
}

type moduleAttrs struct {
	Enabled    *bool   `json:"enabled"`
	VersionPin *string `json:"version-pin"`
}

type optionAttrs struct {
	VariableName string   `json:"variable-name"`
	VariableType string   `json:"variable-type"`
	Options      []string `json:"options"`
}

// decodeOptions reads the variable-options relationship; present reports
// whether it was sent.
func decodeOptions(doc *tfeapi.Document) ([]VariableOptionInput, bool, error) {
	if _, ok := doc.Relationships["variable-options"]; !ok {
		return nil, false, nil
	}
	res, err := doc.RelResources("variable-options")
	if err != nil {
		return nil, false, err
	}
	out := []VariableOptionInput{}
	for _, r := range res {
		var a optionAttrs
		if len(r.Attributes) > 0 {
			if err := json.Unmarshal(r.Attributes, &a); err != nil {
				return nil, false, core.Invalid("variable-options: attributes must be variable-name, variable-type and options (a list of strings): %v", err)
			}
		}
		id := r.ID
		// go-tfe's NoCodeVariableOption puts its type name in the id slot.
		if id == "variable-options" {
			id = ""
		}
		out = append(out, VariableOptionInput{ID: id, VariableName: a.VariableName, VariableType: a.VariableType, Options: a.Options})
	}
	return out, true, nil
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var at moduleAttrs
	if err := doc.Attrs(&at); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	modID, err := doc.RelID("registry-module")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	opts, _, err := decodeOptions(doc)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	o := CreateOptions{RegistryModuleID: modID, Enabled: at.Enabled, VariableOptions: opts}
	if at.VersionPin != nil {
		o.VersionPin = *at.VersionPin
	}
	n, err := a.Service.Create(r.Context(), r.PathValue("org"), o)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusCreated, n, true)
}

func (a *API) read(w http.ResponseWriter, r *http.Request) {
	n, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusOK, n, false)
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var at moduleAttrs
	if err := doc.Attrs(&at); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	modID, err := doc.RelID("registry-module")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	opts, present, err := decodeOptions(doc)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	o := UpdateOptions{RegistryModuleID: modID, Enabled: at.Enabled, VersionPin: at.VersionPin}
	if present {
		o.VariableOptions = &opts
	}
	n, err := a.Service.Update(r.Context(), r.PathValue("id"), o)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respond(w, r, http.StatusOK, n, true)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}

func variableID(nocodeID, version, name string) string {
	h := sha256.Sum256([]byte(nocodeID + "\x00" + version + "\x00" + name))
	return "rmvar-" + hex.EncodeToString(h[:8])
}

func (a *API) variables(w http.ResponseWriter, r *http.Request) {
	id, version := r.PathValue("id"), r.PathValue("version")
	vars, err := a.Service.ModuleVariables(r.Context(), id, version)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items := make([]*jsonVariable, len(vars))
	for i, v := range vars {
		items[i] = &jsonVariable{ID: variableID(id, version, v.Name), Name: v.Name, Type: v.Type, Description: v.Description,
			Required: v.Required, Sensitive: v.Sensitive, Options: v.Options}
		if len(v.Default) > 0 {
			var d any
			if json.Unmarshal(v.Default, &d) == nil {
				items[i].Default = d
			}
		}
	}
	page, meta := tfeapi.Paginate(items, pg)
	tfeapi.RespondList(w, r, page, meta)
}

type workspaceAttrs struct {
	Name             *string `json:"name"`
	Description      *string `json:"description"`
	AutoApply        *bool   `json:"auto-apply"`
	AutoApplyUnder   *bool   `json:"auto_apply"`
	ExecutionMode    *string `json:"execution-mode"`
	AgentPoolID      *string `json:"agent-pool-id"`
	SourceName       *string `json:"source-name"`
	SourceURL        *string `json:"source-url"`
	TerraformVersion *string `json:"terraform-version"`
}

// decodeVars reads relationships.vars.data[] (inline attributes).
func decodeVars(doc *tfeapi.Document) ([]Var, error) {
	res, err := doc.RelResources("vars")
	if err != nil {
		return nil, err
	}
	out := []Var{}
	for _, r := range res {
		var v struct {
			Key         *string `json:"key"`
			Value       *string `json:"value"`
			Description *string `json:"description"`
			Category    *string `json:"category"`
			HCL         *bool   `json:"hcl"`
			Sensitive   *bool   `json:"sensitive"`
		}
		if len(r.Attributes) > 0 {
			if err := json.Unmarshal(r.Attributes, &v); err != nil {
				return nil, core.Invalid("vars: attributes must be key, value, description, category, hcl and sensitive: %v", err)
			}
		}
		x := Var{Category: "terraform"}
		if v.Key != nil {
			x.Key = *v.Key
		}
		if v.Value != nil {
			x.Value = *v.Value
		}
		if v.Description != nil {
			x.Description = *v.Description
		}
		if v.Category != nil && *v.Category != "" {
			x.Category = *v.Category
		}
		if v.HCL != nil {
			x.HCL = *v.HCL
		}
		if v.Sensitive != nil {
			x.Sensitive = *v.Sensitive
		}
		out = append(out, x)
	}
	return out, nil
}

func (a *API) createWorkspace(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var at workspaceAttrs
	if err := doc.Attrs(&at); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	o := WorkspaceOptions{Description: at.Description, AutoApply: at.AutoApply, ExecutionMode: at.ExecutionMode, AgentPoolID: at.AgentPoolID,
		SourceName: at.SourceName, SourceURL: at.SourceURL, TerraformVersion: at.TerraformVersion}
	if o.AutoApply == nil {
		o.AutoApply = at.AutoApplyUnder
	}
	if at.Name != nil {
		o.Name = *at.Name
	}
	if o.ProjectID, err = doc.RelID("project"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if o.Vars, err = decodeVars(doc); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ws, err := a.Service.CreateWorkspace(r.Context(), r.PathValue("id"), o)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.Workspaces.Respond(w, r, http.StatusOK, ws)
}

func upgradeJSON(u *Upgrade) *jsonUpgrade {
	id := u.RunID
	if id == "" {
		id = u.WorkspaceID
	}
	return &jsonUpgrade{ID: id, Status: u.Status, PlanURL: u.PlanURL, Message: u.Message, Workspace: &jsonWorkspaceRef{ID: u.WorkspaceID}}
}

// byWorkspace serves the workspace-scoped aliases: the no-code module is
// the one the workspace was provisioned from.
func (a *API) byWorkspace(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Service.WorkspaceModule(r.Context(), r.PathValue("ws"))
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		r.SetPathValue("id", id)
		h(w, r)
	}
}

func (a *API) initiate(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	vars, err := decodeVars(doc)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusOK, upgradeJSON)(a.Service.InitiateUpgrade(r.Context(), r.PathValue("id"), r.PathValue("ws"), vars))
}

func (a *API) readUpgrade(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, upgradeJSON)(a.Service.ReadUpgrade(r.Context(), r.PathValue("id"), r.PathValue("ws"), r.PathValue("run")))
}

func (a *API) confirm(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.ConfirmUpgrade(r.Context(), r.PathValue("id"), r.PathValue("ws"), r.PathValue("run")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("Workspace update completed"))
}
