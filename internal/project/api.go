package project

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the project endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organizations/{org}/projects", a.list)
	mux.HandleFunc("POST /api/v2/organizations/{org}/projects", a.create)
	mux.HandleFunc("GET /api/v2/projects/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/projects/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/projects/{id}", a.delete)
	mux.HandleFunc("GET /api/v2/projects/{id}/tag-bindings", a.listTagBindings)
	mux.HandleFunc("PATCH /api/v2/projects/{id}/tag-bindings", a.addTagBindings)
	mux.HandleFunc("GET /api/v2/projects/{id}/effective-tag-bindings", a.listEffectiveTagBindings)
}

// jsonProject is the wire form (go-tfe's Project).
type jsonProject struct {
	ID                          string                       `jsonapi:"primary,projects"`
	Name                        string                       `jsonapi:"attr,name"`
	Description                 string                       `jsonapi:"attr,description"`
	DefaultExecutionMode        string                       `jsonapi:"attr,default-execution-mode"`
	IsUnified                   bool                         `jsonapi:"attr,is-unified"`
	AutoDestroyActivityDuration jsonapi.NullableAttr[string] `jsonapi:"attr,auto-destroy-activity-duration,omitempty"`
	SettingOverwrites           *jsonSettingOverwrites       `jsonapi:"attr,setting-overwrites"`
	Organization                *jsonOrgRef                  `jsonapi:"relation,organization"`
	DefaultAgentPool            *jsonAgentPoolRef            `jsonapi:"relation,default-agent-pool"`
	EffectiveTagBindings        []*jsonEffectiveTagBinding   `jsonapi:"relation,effective-tag-bindings,omitempty"`
}

type jsonSettingOverwrites struct {
	ExecutionMode bool `json:"default-execution-mode"`
	AgentPool     bool `json:"default-agent-pool"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonAgentPoolRef struct {
	ID string `jsonapi:"primary,agent-pools"`
}

// JSONTagBinding is the wire form of a tag binding (go-tfe's TagBinding).
type JSONTagBinding struct {
	ID    string `jsonapi:"primary,tag-bindings"`
	Key   string `jsonapi:"attr,key"`
	Value string `jsonapi:"attr,value"`
}

type jsonEffectiveTagBinding struct {
	ID    string `jsonapi:"primary,effective-tag-bindings"`
	Key   string `jsonapi:"attr,key"`
	Value string `jsonapi:"attr,value"`
}

func (a *API) toJSON(r *http.Request, p *Project, includeTags bool) (*jsonProject, []any) {
	mode, pool, err := a.Service.Effective(r.Context(), p)
	if err != nil {
		mode = "remote"
	}
	j := &jsonProject{
		ID:                   p.ID,
		Name:                 p.Name,
		Description:          p.Description,
		DefaultExecutionMode: mode,
		SettingOverwrites:    &jsonSettingOverwrites{ExecutionMode: p.Settings.ExecutionModeOverwrite, AgentPool: p.Settings.AgentPoolOverwrite},
		Organization:         &jsonOrgRef{Name: p.Organization},
	}
	if p.Settings.AutoDestroyActivityDuration != "" {
		j.AutoDestroyActivityDuration = jsonapi.NewNullableAttrWithValue(p.Settings.AutoDestroyActivityDuration)
	}
	if pool != "" {
		j.DefaultAgentPool = &jsonAgentPoolRef{ID: pool}
	}
	var inc []any
	if includeTags {
		j.EffectiveTagBindings = []*jsonEffectiveTagBinding{}
		for _, b := range p.TagBindings {
			e := &jsonEffectiveTagBinding{ID: b.ID, Key: b.Key, Value: b.Value}
			j.EffectiveTagBindings = append(j.EffectiveTagBindings, e)
			inc = append(inc, e)
		}
	}
	return j, inc
}

// body is a project's attributes as sent.
type body struct {
	Name                        *string         `json:"name"`
	Description                 *string         `json:"description"`
	DefaultExecutionMode        *string         `json:"default-execution-mode"`
	DefaultAgentPoolID          *string         `json:"default-agent-pool-id"`
	AutoDestroyActivityDuration json.RawMessage `json:"auto-destroy-activity-duration"`
	SettingOverwrites           *struct {
		ExecutionMode *bool `json:"default-execution-mode"`
		AgentPool     *bool `json:"default-agent-pool"`
	} `json:"setting-overwrites"`
}

func decodeOptions(w http.ResponseWriter, r *http.Request) (Options, error) {
	var o Options
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return o, err
	}
	var b body
	if err := doc.Attrs(&b); err != nil {
		return o, err
	}
	o.Name, o.Description, o.ExecutionMode, o.AgentPoolID = b.Name, b.Description, b.DefaultExecutionMode, b.DefaultAgentPoolID
	if b.SettingOverwrites != nil {
		o.ExecutionModeOverwrite, o.AgentPoolOverwrite = b.SettingOverwrites.ExecutionMode, b.SettingOverwrites.AgentPool
	}
	if len(b.AutoDestroyActivityDuration) > 0 {
		d := ""
		if string(b.AutoDestroyActivityDuration) != "null" {
			if err := json.Unmarshal(b.AutoDestroyActivityDuration, &d); err != nil {
				return o, core.Invalid("attribute \"auto-destroy-activity-duration\" must be a string")
			}
		}
		o.AutoDestroyActivityDuration = &d
	}
	if _, ok := doc.Relationships["tag-bindings"]; ok {
		res, err := doc.RelResources("tag-bindings")
		if err != nil {
			return o, err
		}
		bs, err := ParseTagBindings(res)
		if err != nil {
			return o, err
		}
		o.TagBindings = &bs
	}
	return o, nil
}

// ParseTagBindings reads tag bindings sent as JSON:API resources.
func ParseTagBindings(res []tfeapi.Resource) ([]TagBinding, error) {
	out := make([]TagBinding, 0, len(res))
	for _, r := range res {
		var kv struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		}
		if len(r.Attributes) > 0 {
			if err := json.Unmarshal(r.Attributes, &kv); err != nil {
				return nil, core.Invalid("tag binding attributes must hold string key and value")
			}
		}
		out = append(out, TagBinding{Key: kv.Key, Value: kv.Value})
	}
	return out, nil
}

// ParseTagFilters reads filter[tagged][N][key] and filter[tagged][N][value].
func ParseTagFilters(r *http.Request) []TagBinding {
	q := r.URL.Query()
	var out []TagBinding
	for i := 0; ; i++ {
		k, ok := q[fmt.Sprintf("filter[tagged][%d][key]", i)]
		if !ok || len(k) == 0 {
			return out
		}
		out = append(out, TagBinding{Key: k[0], Value: q.Get(fmt.Sprintf("filter[tagged][%d][value]", i))})
	}
}

func (a *API) includes(r *http.Request) (bool, error) {
	inc, err := tfeapi.Includes(r, "effective_tag_bindings", "organization")
	if err != nil {
		return false, err
	}
	return inc["effective_tag_bindings"], nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	withTags, err := a.includes(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	opts := ListOptions{Query: q.Get("q"), Tagged: ParseTagFilters(r)}
	names := q.Get("filter[names]")
	if names == "" {
		names = q.Get("name")
	}
	if names != "" {
		opts.Names = strings.Split(names, ",")
	}
	items, total, err := a.Service.ListPage(r.Context(), r.PathValue("org"), opts, page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	out := make([]*jsonProject, len(items))
	var inc []any
	for i, p := range items {
		var pi []any
		out[i], pi = a.toJSON(r, p, withTags)
		inc = append(inc, pi...)
	}
	tfeapi.RespondList(w, r, out, pg, inc...)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	o, err := decodeOptions(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	p, err := a.Service.Create(r.Context(), r.PathValue("org"), o)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	j, _ := a.toJSON(r, p, false)
	tfeapi.Respond(w, r, http.StatusCreated, j)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	withTags, err := a.includes(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	p, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	j, inc := a.toJSON(r, p, withTags)
	tfeapi.Respond(w, r, http.StatusOK, j, inc...)
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	o, err := decodeOptions(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	p, err := a.Service.Update(r.Context(), r.PathValue("id"), o)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	j, _ := a.toJSON(r, p, false)
	tfeapi.Respond(w, r, http.StatusOK, j)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}

func bindingsJSON(bs []TagBinding) []*JSONTagBinding {
	out := make([]*JSONTagBinding, len(bs))
	for i, b := range bs {
		out[i] = &JSONTagBinding{ID: b.ID, Key: b.Key, Value: b.Value}
	}
	return out
}

func (a *API) listTagBindings(w http.ResponseWriter, r *http.Request) {
	p, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := bindingsJSON(p.TagBindings)
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 1), Total: len(out)})
}

func (a *API) listEffectiveTagBindings(w http.ResponseWriter, r *http.Request) {
	p, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonEffectiveTagBinding, len(p.TagBindings))
	for i, b := range p.TagBindings {
		out[i] = &jsonEffectiveTagBinding{ID: b.ID, Key: b.Key, Value: b.Value}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 1), Total: len(out)})
}

func (a *API) addTagBindings(w http.ResponseWriter, r *http.Request) {
	res, err := tfeapi.DecodeResources(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	bs, err := ParseTagBindings(res)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out, err := a.Service.AddTagBindings(r.Context(), r.PathValue("id"), bs)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	j := bindingsJSON(out)
	tfeapi.RespondList(w, r, j, tfeapi.Pagination{Page: 1, Size: max(len(j), 1), Total: len(j)})
}
