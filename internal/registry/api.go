package registry

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// API serves the registry-modules endpoints of the TFE API v2, the module
// registry protocol and the archive capability URLs.
type API struct {
	Service *Service
}

// Register adds the token-authenticated /api/v2 routes.
func (a *API) Register(mux *http.ServeMux) {
	const org = "/api/v2/organizations/{org}/registry-modules"
	mux.HandleFunc("POST "+org, a.create)
	mux.HandleFunc("POST "+org+"/vcs", a.createVCS)
	mux.HandleFunc("POST /api/v2/registry-modules", a.createVCS)
	mux.HandleFunc("GET "+org+"/{registry}/{ns}/{name}/{provider}/commits", a.commits)
	mux.HandleFunc("GET "+org, a.list)
	mux.HandleFunc("GET /api/v2/registry-modules/{id}", a.getByID)
	mux.HandleFunc("GET /api/v2/registry-modules/{id}/tag-bindings", a.tagBindings)
	mux.HandleFunc("GET "+org+"/{registry}/{ns}/{name}/{provider}", a.get)
	mux.HandleFunc("PATCH "+org+"/{registry}/{ns}/{name}/{provider}", a.update)
	// Legacy version creation and deletion share the path's shape
	// (registry-modules/{org}/{name}/{provider}/versions and
	// registry-modules/actions/delete/{org}/{name}[/{provider}[/{version}]]),
	// which ServeMux patterns cannot tell apart: dispatch by hand.
	mux.HandleFunc("POST /api/v2/registry-modules/{rest...}", a.legacyPost)
	mux.HandleFunc("POST "+org+"/{registry}/{ns}/{name}/{provider}/versions", a.createVersion)
	mux.HandleFunc("GET "+org+"/{registry}/{ns}/{name}/{provider}/version", a.readVersion)
	mux.HandleFunc("DELETE "+org+"/{registry}/{ns}/{name}", a.delete)
	mux.HandleFunc("DELETE "+org+"/{registry}/{ns}/{name}/{provider}", a.delete)
	mux.HandleFunc("DELETE "+org+"/{registry}/{ns}/{name}/{provider}/{version}", a.delete)
}

// RegisterProtocol adds the module registry protocol (modules.v1, at
// /api/registry/v1/modules/) to a mux whose requests carry an
// authenticated caller.
func (a *API) RegisterProtocol(mux *http.ServeMux) {
	const base = "/api/registry/v1/modules/{ns}/{name}/{provider}"
	mux.HandleFunc("GET "+base+"/versions", a.protoVersions)
	mux.HandleFunc("GET "+base+"/{version}/download", a.protoDownload)
	mux.HandleFunc("GET "+base+"/{version}", a.protoModule)
	mux.HandleFunc("GET "+base, a.protoModule)
}

// RegisterCapability adds the archive upload and download routes to the
// capability mux (requests there carry a verified capability URL, no token).
func (a *API) RegisterCapability(mux *http.ServeMux) {
	mux.HandleFunc("PUT "+UploadPath("{id}"), a.upload)
	mux.HandleFunc("GET /object/registry-module-versions/{id}/{file}", a.download)
}

type jsonPermissions struct {
	CanDelete bool `json:"can-delete"`
	CanResync bool `json:"can-resync"`
	CanRetry  bool `json:"can-retry"`
}

type jsonVersionStatus struct {
	Version string `json:"version"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
}

// jsonModule is go-tfe's RegistryModule.
type jsonModule struct {
	ID              string              `jsonapi:"primary,registry-modules"`
	Name            string              `jsonapi:"attr,name"`
	Provider        string              `jsonapi:"attr,provider"`
	RegistryName    string              `jsonapi:"attr,registry-name"`
	Namespace       string              `jsonapi:"attr,namespace"`
	NoCode          bool                `jsonapi:"attr,no-code"`
	Permissions     *jsonPermissions    `jsonapi:"attr,permissions"`
	Publishing      string              `jsonapi:"attr,publishing-mechanism,omitempty"`
	VCSRepo         *vcsrepo.View       `jsonapi:"attr,vcs-repo,omitempty"`
	TestConfig      jsonTestConfig      `jsonapi:"attr,test-config"`
	Status          string              `jsonapi:"attr,status"`
	VersionStatuses []jsonVersionStatus `jsonapi:"attr,version-statuses"`
	CreatedAt       time.Time           `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt       time.Time           `jsonapi:"attr,updated-at,iso8601"`
	Organization    *jsonOrgRef         `jsonapi:"relation,organization"`
	NoCodeModules   []*jsonNoCodeRef    `jsonapi:"relation,no-code-modules"`
}

// jsonTestConfig is go-tfe's TestConfig: whether tests run, and where
// (agent-pool-id only in mode "agent").
type jsonTestConfig struct {
	TestsEnabled       bool   `json:"tests-enabled"`
	AgentExecutionMode string `json:"agent-execution-mode"`
	AgentPoolID        string `json:"agent-pool-id,omitempty"`
}

func testConfigJSON(m *Module) jsonTestConfig {
	if m.TestsAgentPoolID != "" {
		return jsonTestConfig{TestsEnabled: m.TestsEnabled, AgentExecutionMode: TestsAgent, AgentPoolID: m.TestsAgentPoolID}
	}
	return jsonTestConfig{TestsEnabled: m.TestsEnabled, AgentExecutionMode: TestsRemote}
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonNoCodeRef struct {
	ID string `jsonapi:"primary,no-code-modules"`
}

func (a *API) toJSON(ctx context.Context, m *Module, noCode []string) *jsonModule {
	can := CanManage(ctx, m.Organization)
	j := &jsonModule{
		ID: m.ID, Name: m.Name, Provider: m.Provider, RegistryName: m.RegistryName, Namespace: m.Namespace,
		NoCode: m.NoCode, Permissions: &jsonPermissions{CanDelete: can, CanResync: can, CanRetry: can},
		Status: string(m.Status()), VersionStatuses: []jsonVersionStatus{},
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Organization: &jsonOrgRef{Name: m.Organization},
		NoCodeModules: []*jsonNoCodeRef{}, Publishing: m.PublishingMechanism(),
		TestConfig: testConfigJSON(m),
	}
	j.VCSRepo = m.VCSRepo.View()
	for _, v := range m.Versions {
		j.VersionStatuses = append(j.VersionStatuses, jsonVersionStatus{Version: v.Version, Status: string(v.Status), Error: v.Error})
	}
	for _, id := range noCode {
		j.NoCodeModules = append(j.NoCodeModules, &jsonNoCodeRef{ID: id})
	}
	return j
}

func (a *API) noCodeIDs(ctx context.Context, mods ...*Module) (map[string][]string, error) {
	if a.Service.NoCode == nil || len(mods) == 0 {
		return nil, nil
	}
	ids := make([]string, len(mods))
	for i, m := range mods {
		ids[i] = m.ID
	}
	return a.Service.NoCode.NoCodeModuleIDs(ctx, ids)
}

func (a *API) respondModule(w http.ResponseWriter, r *http.Request, status int, m *Module) {
	nc, err := a.noCodeIDs(r.Context(), m)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, status, a.toJSON(r.Context(), m, nc[m.ID]))
}

// jsonVersion is go-tfe's RegistryModuleVersion, with the inspected root
// module (as the registry shows it) and the ingress error.
type jsonVersion struct {
	ID        string         `jsonapi:"primary,registry-module-versions"`
	Source    string         `jsonapi:"attr,source"`
	Status    string         `jsonapi:"attr,status"`
	Version   string         `jsonapi:"attr,version"`
	Error     string         `jsonapi:"attr,error,omitempty"`
	CommitSHA string         `jsonapi:"attr,commit-sha,omitempty"`
	Root      *jsonRoot      `jsonapi:"attr,root,omitempty"`
	CreatedAt time.Time      `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt time.Time      `jsonapi:"attr,updated-at,iso8601"`
	Module    *jsonModuleRef `jsonapi:"relation,registry-module"`
	links     jsonapi.Links
}

// JSONAPILinks implements jsonapi.Linkable.
func (j *jsonVersion) JSONAPILinks() *jsonapi.Links { return &j.links }

type jsonModuleRef struct {
	ID string `jsonapi:"primary,registry-modules"`
}

// jsonRoot is the registry's view of a module's root (go-tfe's Root).
type jsonRoot struct {
	Path                 string               `json:"path"`
	Name                 string               `json:"name"`
	Readme               string               `json:"readme"`
	Empty                bool                 `json:"empty"`
	Inputs               []jsonInput          `json:"inputs"`
	Outputs              []Output             `json:"outputs"`
	Dependencies         []any                `json:"dependencies"`
	ProviderDependencies []ProviderDependency `json:"provider_dependencies"`
	Resources            []Resource           `json:"resources"`
}

// jsonInput is an input as the registry shows it: default is the JSON of
// the value, as a string ("" when required).
type jsonInput struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Default     string `json:"default"`
	Required    bool   `json:"required"`
	Sensitive   bool   `json:"sensitive"`
}

func toRoot(name string, in *Inspection, readme string) *jsonRoot {
	if in == nil {
		return nil
	}
	r := &jsonRoot{Name: name, Readme: readme, Empty: in.Empty, Inputs: []jsonInput{}, Outputs: in.Outputs, Dependencies: []any{},
		ProviderDependencies: in.Providers, Resources: in.Resources}
	for _, v := range in.Variables {
		r.Inputs = append(r.Inputs, jsonInput{Name: v.Name, Type: v.Type, Description: v.Description, Default: string(v.Default), Required: v.Required, Sensitive: v.Sensitive})
	}
	return r
}

// versionJSON is version v of module m, with its README (readme).
func (a *API) versionJSON(ctx context.Context, m *Module, v *Version, readme string) *jsonVersion {
	j := &jsonVersion{ID: v.ID, Source: v.Source, Status: string(v.Status), Version: v.Version, Error: v.Error, CommitSHA: v.CommitSHA,
		Root: toRoot(m.Name, v.Inspection, readme), CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt,
		Module: &jsonModuleRef{ID: m.ID}, links: jsonapi.Links{}}
	if v.Source == SourceAPI && CanManage(ctx, m.Organization) {
		j.links["upload"] = a.Service.UploadURL(v)
	}
	return j
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts CreateOptions
	if err := doc.Attrs(&opts); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var vcs struct {
		Repo json.RawMessage `json:"vcs-repo"`
	}
	if err := doc.Attrs(&vcs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if len(vcs.Repo) > 0 && string(vcs.Repo) != "null" {
		a.createVCSDoc(w, r, doc)
		return
	}
	m, err := a.Service.Create(r.Context(), r.PathValue("org"), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondModule(w, r, http.StatusCreated, m)
}

// createVCS creates a VCS-backed module: POST
// organizations/:org/registry-modules/vcs, or POST registry-modules (the
// organization is the OAuth token's).
func (a *API) createVCS(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.createVCSDoc(w, r, doc)
}

func (a *API) createVCSDoc(w http.ResponseWriter, r *http.Request, doc *tfeapi.Document) {
	var attrs struct {
		Name           *string         `json:"name"`
		Provider       *string         `json:"provider"`
		Repo           json.RawMessage `json:"vcs-repo"`
		InitialVersion *string         `json:"initial-version"`
		NoCode         *bool           `json:"no-code"`
		TestConfig     *TestConfig     `json:"test-config"`
	}
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if attrs.NoCode != nil && *attrs.NoCode {
		tfeapi.Error(w, r, core.Invalid("no-code: enable a VCS-backed module's no-code provisioning once it has a version (POST registry-modules/:id/no-code-modules)"))
		return
	}
	repo, org, err := DecodeModuleRepo(attrs.Repo)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	m, err := a.Service.CreateVCS(r.Context(), r.PathValue("org"), VCSCreateOptions{Name: attrs.Name, Provider: attrs.Provider, Repo: repo,
		OrganizationName: org, InitialVersion: attrs.InitialVersion, TestConfig: attrs.TestConfig})
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondModule(w, r, http.StatusCreated, m)
}

// jsonCommit is go-tfe's Commit.
type jsonCommit struct {
	ID              string `jsonapi:"primary,commit"`
	SHA             string `jsonapi:"attr,sha"`
	Date            string `jsonapi:"attr,date"`
	URL             string `jsonapi:"attr,url"`
	Author          string `jsonapi:"attr,author"`
	AuthorAvatarURL string `jsonapi:"attr,author-avatar-url"`
	AuthorHTMLURL   string `jsonapi:"attr,author-html-url"`
	Message         string `jsonapi:"attr,message"`
}

func (a *API) commits(w http.ResponseWriter, r *http.Request) {
	if err := privatePath(r); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	log, err := a.Service.Commits(r.Context(), r.PathValue("org"), r.PathValue("name"), r.PathValue("provider"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonCommit, len(log))
	for i, c := range log {
		out[i] = &jsonCommit{ID: c.SHA, SHA: c.SHA, Date: c.Date, URL: c.URL, Author: c.Author, AuthorAvatarURL: c.AuthorAvatarURL,
			AuthorHTMLURL: c.AuthorHTMLURL, Message: c.Message}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 20), Total: len(out)})
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if _, err := tfeapi.Includes(r, "no-code-modules"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	items, total, err := a.Service.ListPage(r.Context(), r.PathValue("org"), ListOptions{
		Search: q.Get("q"), Provider: q.Get("filter[provider]"),
		RegistryName: q.Get("filter[registry_name]"), Namespace: q.Get("filter[organization_name]"),
	}, page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	nc, err := a.noCodeIDs(r.Context(), items...)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonModule, len(items))
	for i, m := range items {
		out[i] = a.toJSON(r.Context(), m, nc[m.ID])
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) getByID(w http.ResponseWriter, r *http.Request) {
	m, err := a.Service.GetByID(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondModule(w, r, http.StatusOK, m)
}

type jsonTagBinding struct {
	ID    string `jsonapi:"primary,tag-bindings"`
	Key   string `jsonapi:"attr,key"`
	Value string `jsonapi:"attr,value"`
}

func (a *API) tagBindings(w http.ResponseWriter, r *http.Request) {
	m, err := a.Service.GetByID(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonTagBinding, len(m.TagBindings))
	for i, tb := range m.TagBindings {
		out[i] = &jsonTagBinding{ID: tb.ID, Key: tb.Key, Value: tb.Value}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 20), Total: len(out)})
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	m, err := a.Service.Get(r.Context(), r.PathValue("org"), r.PathValue("registry"), r.PathValue("ns"), r.PathValue("name"), r.PathValue("provider"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondModule(w, r, http.StatusOK, m)
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts UpdateOptions
	if err := doc.Attrs(&opts); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if _, ok := doc.Relationships["tag-bindings"]; ok {
		res, err := doc.RelResources("tag-bindings")
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		tags := []TagBinding{}
		for _, x := range res {
			var tb struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			}
			if len(x.Attributes) > 0 {
				if err := json.Unmarshal(x.Attributes, &tb); err != nil {
					tfeapi.Error(w, r, core.BadRequest("tag-bindings: %v", err))
					return
				}
			}
			tags = append(tags, TagBinding{Key: tb.Key, Value: tb.Value})
		}
		opts.TagBindings = &tags
	}
	m, err := a.Service.Update(r.Context(), r.PathValue("org"), r.PathValue("registry"), r.PathValue("ns"), r.PathValue("name"), r.PathValue("provider"), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondModule(w, r, http.StatusOK, m)
}

// privatePath checks the registry and namespace of an organization-scoped
// version route: versions exist only in the private registry, whose
// namespace is the organization.
func privatePath(r *http.Request) error {
	if reg := r.PathValue("registry"); reg != "" && reg != RegistryPrivate {
		return core.NotFound("only private registry modules have versions here")
	}
	if ns := r.PathValue("ns"); ns != "" && ns != r.PathValue("org") {
		return core.NotFound("registry module not found in namespace %q", ns)
	}
	return nil
}

func (a *API) createVersion(w http.ResponseWriter, r *http.Request) {
	if err := privatePath(r); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts struct {
		Version   *string `json:"version"`
		CommitSHA *string `json:"commit-sha"`
	}
	if err := doc.Attrs(&opts); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ver, sha := "", ""
	if opts.Version != nil {
		ver = *opts.Version
	}
	if opts.CommitSHA != nil {
		sha = strings.TrimSpace(*opts.CommitSHA)
	}
	ctx := r.Context()
	org, name, provider := r.PathValue("org"), r.PathValue("name"), r.PathValue("provider")
	v, err := a.Service.CreateVersion(ctx, org, name, provider, ver, sha)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	m, err := a.Service.GetPrivate(ctx, org, name, provider)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusCreated, a.versionJSON(ctx, m, v, ""))
}

func (a *API) readVersion(w http.ResponseWriter, r *http.Request) {
	if err := privatePath(r); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ver := r.URL.Query().Get("module_version")
	if ver == "" {
		tfeapi.Error(w, r, core.BadRequest("module_version is required"))
		return
	}
	m, v, err := a.Service.ReadVersion(r.Context(), r.PathValue("org"), r.PathValue("name"), r.PathValue("provider"), ver)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	readme, err := a.Service.readme(r.Context(), m, v)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.versionJSON(r.Context(), m, v, readme))
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	sel := Selector{RegistryName: r.PathValue("registry"), Namespace: r.PathValue("ns"), Name: r.PathValue("name"),
		Provider: r.PathValue("provider"), Version: r.PathValue("version")}
	if sel.RegistryName == RegistryPrivate && sel.Namespace != r.PathValue("org") {
		tfeapi.Error(w, r, core.NotFound("registry module %q not found in namespace %q", sel.Name, sel.Namespace))
		return
	}
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("org"), sel))
}

func (a *API) legacyPost(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(r.PathValue("rest"), "/")
	switch {
	case len(parts) >= 4 && len(parts) <= 6 && parts[0] == "actions" && parts[1] == "delete":
		keys := []string{"org", "name", "provider", "version"}
		for i, p := range parts[2:] {
			if p == "" {
				tfeapi.NotFound(w, r)
				return
			}
			r.SetPathValue(keys[i], p)
		}
		a.delete(w, r)
	case len(parts) == 4 && parts[3] == "versions":
		r.SetPathValue("org", parts[0])
		r.SetPathValue("name", parts[1])
		r.SetPathValue("provider", parts[2])
		a.createVersion(w, r)
	default:
		tfeapi.NotFound(w, r)
	}
}

func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.Upload(r.Context(), r.PathValue("id"), r.Body); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *API) download(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	sha, ok := cutSuffix(file, ".tar.gz")
	if !ok {
		http.NotFound(w, r)
		return
	}
	rc, size, err := a.Service.openArchive(r.Context(), r.PathValue("id"), sha)
	if err != nil {
		if core.KindOf(err) == core.KindNotFound {
			http.NotFound(w, r)
			return
		}
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Stream(w, r, "application/gzip", rc, size)
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) <= len(suffix) || s[len(s)-len(suffix):] != suffix {
		return "", false
	}
	return s[:len(s)-len(suffix)], true
}

// The module registry protocol. Namespace is the organization; only
// published (ok) versions of private modules are visible.

func protoError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	msg := "internal error"
	switch core.KindOf(err) {
	case core.KindNotFound:
		status, msg = http.StatusNotFound, "not found"
	case core.KindUnauthorized:
		status, msg = http.StatusUnauthorized, err.Error()
	case core.KindForbidden:
		status, msg = http.StatusForbidden, err.Error()
	case core.KindInternal:
	default:
		status, msg = http.StatusBadRequest, err.Error()
	}
	tfeapi.WriteJSON(w, status, "application/json", map[string]any{"errors": []string{msg}})
}

func (a *API) protoVersions(w http.ResponseWriter, r *http.Request) {
	ns, name, provider := r.PathValue("ns"), r.PathValue("name"), r.PathValue("provider")
	if err := fetch(r.Context(), ns); err != nil {
		protoError(w, err)
		return
	}
	_, vs, err := a.Service.fetchVersions(r.Context(), ns, name, provider)
	if err != nil {
		protoError(w, err)
		return
	}
	type pv struct {
		Version    string `json:"version"`
		Root       any    `json:"root"`
		Submodules []any  `json:"submodules"`
	}
	out := []pv{}
	for _, v := range vs {
		if v.Status != VersionOK {
			continue
		}
		deps := []ProviderDependency{}
		if v.Inspection != nil {
			deps = v.Inspection.Providers
		}
		out = append(out, pv{Version: v.Version, Root: map[string]any{"providers": deps, "dependencies": []any{}}, Submodules: []any{}})
	}
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", map[string]any{
		"modules": []any{map[string]any{"source": ns + "/" + name + "/" + provider, "versions": out}},
	})
}

func (a *API) protoDownload(w http.ResponseWriter, r *http.Request) {
	if err := fetch(r.Context(), r.PathValue("ns")); err != nil {
		protoError(w, err)
		return
	}
	_, v, err := a.Service.fetchPublished(r.Context(), r.PathValue("ns"), r.PathValue("name"), r.PathValue("provider"), r.PathValue("version"))
	if err != nil {
		protoError(w, err)
		return
	}
	w.Header().Set("X-Terraform-Get", a.Service.DownloadURL(v))
	w.WriteHeader(http.StatusNoContent)
}

// protoModule answers go-tfe's ReadTerraformRegistryModule (the registry's
// module details, latest version when none is named).
func (a *API) protoModule(w http.ResponseWriter, r *http.Request) {
	ns, name, provider := r.PathValue("ns"), r.PathValue("name"), r.PathValue("provider")
	if err := fetch(r.Context(), ns); err != nil {
		protoError(w, err)
		return
	}
	m, v, err := a.Service.fetchPublished(r.Context(), ns, name, provider, r.PathValue("version"))
	if err != nil {
		protoError(w, err)
		return
	}
	_, vs, err := a.Service.fetchVersions(r.Context(), ns, name, provider)
	if err != nil {
		protoError(w, err)
		return
	}
	readme, err := a.Service.readme(r.Context(), m, v)
	if err != nil {
		protoError(w, err)
		return
	}
	versions := []string{}
	for _, x := range vs {
		if x.Status == VersionOK {
			versions = append(versions, x.Version)
		}
	}
	body, _ := json.Marshal(map[string]any{
		"id": ns + "/" + name + "/" + provider + "/" + v.Version, "owner": "", "namespace": m.Namespace, "name": m.Name,
		"version": v.Version, "provider": m.Provider, "provider_logo_url": "", "description": "", "source": "", "tag": "",
		"published_at": v.UpdatedAt.Format(time.RFC3339), "downloads": 0, "verified": false,
		"root": toRoot(m.Name, v.Inspection, readme), "submodules": []any{}, "providers": []string{m.Provider}, "versions": versions,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
