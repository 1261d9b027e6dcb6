package providerregistry

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the registry-providers endpoints of the TFE API v2, the GPG
// keys and the provider registry protocol (under /api/registry), and the
// upload and download capability URLs.
type API struct {
	Service *Service
}

const orgBase = "/api/v2/organizations/{org}/registry-providers"

// Register adds the token-authenticated /api/v2 routes.
func (a *API) Register(mux *http.ServeMux) {
	const prov = orgBase + "/{registry}/{ns}/{name}"
	mux.HandleFunc("GET "+orgBase, tfeapi.Handle(a.list))
	mux.HandleFunc("POST "+orgBase, tfeapi.Handle(a.create))
	mux.HandleFunc("GET "+prov, tfeapi.Handle(a.get))
	mux.HandleFunc("PATCH "+prov, tfeapi.Handle(a.update))
	mux.HandleFunc("DELETE "+prov, tfeapi.Handle(a.delete))
	mux.HandleFunc("GET "+prov+"/versions", tfeapi.Handle(a.listVersions))
	mux.HandleFunc("POST "+prov+"/versions", tfeapi.Handle(a.createVersion))
	mux.HandleFunc("GET "+prov+"/versions/{version}", tfeapi.Handle(a.getVersion))
	mux.HandleFunc("DELETE "+prov+"/versions/{version}", tfeapi.Handle(a.deleteVersion))
	mux.HandleFunc("GET "+prov+"/versions/{version}/platforms", tfeapi.Handle(a.listPlatforms))
	mux.HandleFunc("POST "+prov+"/versions/{version}/platforms", tfeapi.Handle(a.createPlatform))
	mux.HandleFunc("GET "+prov+"/versions/{version}/platforms/{os}/{arch}", tfeapi.Handle(a.getPlatform))
	mux.HandleFunc("DELETE "+prov+"/versions/{version}/platforms/{os}/{arch}", tfeapi.Handle(a.deletePlatform))
	mux.HandleFunc("GET /api/v2/registry-providers/{id}", tfeapi.Handle(a.getByID))
	mux.HandleFunc("GET /api/v2/registry-providers/{id}/tag-bindings", tfeapi.Handle(a.tagBindings))
}

// RegisterRegistry adds the routes under /api/registry to a mux whose
// requests carry an authenticated caller: the GPG keys of the private
// registry and the provider registry protocol (providers.v1).
func (a *API) RegisterRegistry(mux *http.ServeMux) {
	const keys = "/api/registry/private/v2/gpg-keys"
	mux.HandleFunc("GET "+keys, tfeapi.Handle(a.listKeys))
	mux.HandleFunc("POST "+keys, tfeapi.Handle(a.createKey))
	mux.HandleFunc("GET "+keys+"/{ns}/{keyid}", tfeapi.Handle(a.getKey))
	mux.HandleFunc("PATCH "+keys+"/{ns}/{keyid}", tfeapi.Handle(a.updateKey))
	mux.HandleFunc("DELETE "+keys+"/{ns}/{keyid}", tfeapi.Handle(a.deleteKey))
	const proto = "/api/registry/v1/providers/{ns}/{type}"
	mux.HandleFunc("GET "+proto+"/versions", a.protoVersions)
	mux.HandleFunc("GET "+proto+"/{version}/download/{os}/{arch}", a.protoDownload)
}

// RegisterCapability adds the upload and download routes to the capability
// mux (requests there carry a verified capability URL, no token).
func (a *API) RegisterCapability(mux *http.ServeMux) {
	mux.HandleFunc("PUT "+CapabilityShasumsUpload("{id}"), a.uploadShasums)
	mux.HandleFunc("PUT "+CapabilitySigUpload("{id}"), a.uploadSig)
	mux.HandleFunc("PUT "+CapabilityBinaryUpload("{id}"), a.uploadBinary)
	mux.HandleFunc("GET /object/registry-provider-versions/{id}/{digest}/{file}", a.downloadVersionFile)
	mux.HandleFunc("GET /object/registry-provider-platforms/{id}/{file}", a.downloadBinary)
}

func ref(r *http.Request) Ref {
	return Ref{Organization: r.PathValue("org"), RegistryName: r.PathValue("registry"), Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

type jsonProviderRef struct {
	ID string `jsonapi:"primary,registry-providers"`
}

type jsonVersionRef struct {
	ID string `jsonapi:"primary,registry-provider-versions"`
}

type jsonPlatformRef struct {
	ID string `jsonapi:"primary,registry-provider-platforms"`
}

type jsonProviderPermissions struct {
	CanDelete bool `json:"can-delete"`
}

// jsonProvider is go-tfe's RegistryProvider.
type jsonProvider struct {
	ID           string                   `jsonapi:"primary,registry-providers"`
	Name         string                   `jsonapi:"attr,name"`
	Namespace    string                   `jsonapi:"attr,namespace"`
	RegistryName string                   `jsonapi:"attr,registry-name"`
	Permissions  *jsonProviderPermissions `jsonapi:"attr,permissions"`
	CreatedAt    time.Time                `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt    time.Time                `jsonapi:"attr,updated-at,iso8601"`
	Organization *jsonOrgRef              `jsonapi:"relation,organization"`
	Versions     []*jsonVersionRef        `jsonapi:"relation,registry-provider-versions"`
	links        jsonapi.Links
}

// JSONAPILinks implements jsonapi.Linkable.
func (j *jsonProvider) JSONAPILinks() *jsonapi.Links { return &j.links }

type jsonVersionPermissions struct {
	CanDelete      bool `json:"can-delete"`
	CanUploadAsset bool `json:"can-upload-asset"`
}

// jsonVersion is go-tfe's RegistryProviderVersion.
type jsonVersion struct {
	ID                 string                  `jsonapi:"primary,registry-provider-versions"`
	Version            string                  `jsonapi:"attr,version"`
	KeyID              string                  `jsonapi:"attr,key-id"`
	Protocols          []string                `jsonapi:"attr,protocols"`
	ShasumsUploaded    bool                    `jsonapi:"attr,shasums-uploaded"`
	ShasumsSigUploaded bool                    `jsonapi:"attr,shasums-sig-uploaded"`
	Permissions        *jsonVersionPermissions `jsonapi:"attr,permissions"`
	CreatedAt          time.Time               `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt          time.Time               `jsonapi:"attr,updated-at,iso8601"`
	Provider           *jsonProviderRef        `jsonapi:"relation,registry-provider"`
	Platforms          []*jsonPlatformRef      `jsonapi:"relation,platforms"`
	links              jsonapi.Links
}

// JSONAPILinks implements jsonapi.Linkable.
func (j *jsonVersion) JSONAPILinks() *jsonapi.Links { return &j.links }

// jsonPlatform is go-tfe's RegistryProviderPlatform.
type jsonPlatform struct {
	ID                     string                  `jsonapi:"primary,registry-provider-platforms"`
	OS                     string                  `jsonapi:"attr,os"`
	Arch                   string                  `jsonapi:"attr,arch"`
	Filename               string                  `jsonapi:"attr,filename"`
	Shasum                 string                  `jsonapi:"attr,shasum"`
	ProviderBinaryUploaded bool                    `jsonapi:"attr,provider-binary-uploaded"`
	Permissions            *jsonVersionPermissions `jsonapi:"attr,permissions"`
	Version                *jsonVersionRef         `jsonapi:"relation,registry-provider-version"`
	links                  jsonapi.Links
}

// JSONAPILinks implements jsonapi.Linkable.
func (j *jsonPlatform) JSONAPILinks() *jsonapi.Links { return &j.links }

// jsonKey is go-tfe's GPGKey.
type jsonKey struct {
	ID             string    `jsonapi:"primary,gpg-keys"`
	ASCIIArmor     string    `jsonapi:"attr,ascii-armor"`
	KeyID          string    `jsonapi:"attr,key-id"`
	Namespace      string    `jsonapi:"attr,namespace"`
	Source         string    `jsonapi:"attr,source"`
	SourceURL      *string   `jsonapi:"attr,source-url"`
	TrustSignature string    `jsonapi:"attr,trust-signature"`
	CreatedAt      time.Time `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt      time.Time `jsonapi:"attr,updated-at,iso8601"`
	// Organization is the namespace's organization (not in HCP
	// Terraform's answer; it names the organization of the audit event).
	Organization *jsonOrgRef `jsonapi:"relation,organization"`
}

func providerPath(p *Provider) string {
	return "/api/v2/organizations/" + url.PathEscape(p.Organization) + "/registry-providers/" + url.PathEscape(p.RegistryName) + "/" + url.PathEscape(p.Namespace) + "/" + url.PathEscape(p.Name)
}

// The JSON of providers, versions and platforms takes can, whether the
// caller may manage the organization's registry (CanManage), decided once
// per response: it sets their permissions and upload links.

func (a *API) providerJSON(can bool, p *Provider, versions []*Version) *jsonProvider {
	j := &jsonProvider{ID: p.ID, Name: p.Name, Namespace: p.Namespace, RegistryName: p.RegistryName,
		Permissions: &jsonProviderPermissions{CanDelete: can},
		CreatedAt:   p.CreatedAt, UpdatedAt: p.UpdatedAt, Organization: &jsonOrgRef{Name: p.Organization},
		Versions: []*jsonVersionRef{}, links: jsonapi.Links{"self": providerPath(p)}}
	for _, v := range versions {
		j.Versions = append(j.Versions, &jsonVersionRef{ID: v.ID})
	}
	return j
}

func (a *API) versionJSON(can bool, v *Version, platformIDs []string) *jsonVersion {
	j := &jsonVersion{ID: v.ID, Version: v.Version, KeyID: v.KeyID, Protocols: v.Protocols,
		ShasumsUploaded: v.ShasumsUploaded(), ShasumsSigUploaded: v.ShasumsSigUploaded(),
		Permissions: &jsonVersionPermissions{CanDelete: can, CanUploadAsset: can},
		CreatedAt:   v.CreatedAt, UpdatedAt: v.UpdatedAt, Provider: &jsonProviderRef{ID: v.ProviderID},
		Platforms: []*jsonPlatformRef{}, links: jsonapi.Links{}}
	for _, id := range platformIDs {
		j.Platforms = append(j.Platforms, &jsonPlatformRef{ID: id})
	}
	if can {
		j.links["shasums-upload"] = a.Service.upload(CapabilityShasumsUpload(v.ID))
		j.links["shasums-sig-upload"] = a.Service.upload(CapabilitySigUpload(v.ID))
	}
	if v.ShasumsUploaded() {
		j.links["shasums-download"] = a.Service.download(ShasumsPath(v))
	}
	if v.ShasumsSigUploaded() {
		j.links["shasums-sig-download"] = a.Service.download(ShasumsSigPath(v))
	}
	return j
}

func (a *API) platformJSON(can bool, p *Platform) *jsonPlatform {
	j := &jsonPlatform{ID: p.ID, OS: p.OS, Arch: p.Arch, Filename: p.Filename, Shasum: p.Shasum,
		ProviderBinaryUploaded: p.BinaryUploaded(), Permissions: &jsonVersionPermissions{CanDelete: can, CanUploadAsset: can},
		Version: &jsonVersionRef{ID: p.VersionID}, links: jsonapi.Links{}}
	if can {
		j.links["provider-binary-upload"] = a.Service.upload(CapabilityBinaryUpload(p.ID))
	}
	if p.BinaryUploaded() {
		j.links["provider-binary-download"] = a.Service.download(BinaryPath(p))
	}
	return j
}

func keyJSON(k *GPGKey) *jsonKey {
	return &jsonKey{ID: k.ID, ASCIIArmor: k.ASCIIArmor, KeyID: k.KeyID, Namespace: k.Namespace, CreatedAt: k.CreatedAt, UpdatedAt: k.UpdatedAt,
		Organization: &jsonOrgRef{Name: k.Namespace}}
}

// respondProvider answers a provider, with its versions (and them in
// included when asked for).
func (a *API) respondProvider(w http.ResponseWriter, r *http.Request, status int, p *Provider) error {
	inc, err := tfeapi.Includes(r, "registry-provider-versions")
	if err != nil {
		return err
	}
	vs, err := a.Service.Versions(r.Context(), []*Provider{p})
	if err != nil {
		return err
	}
	can := CanManage(r.Context(), p.Organization)
	var included []any
	if inc["registry_provider_versions"] {
		for _, v := range vs[p.ID] {
			included = append(included, a.versionJSON(can, v, nil))
		}
	}
	tfeapi.Respond(w, r, status, a.providerJSON(can, p, vs[p.ID]), included...)
	return nil
}

func (a *API) create(w http.ResponseWriter, r *http.Request) error {
	_, opts, err := tfeapi.DecodeAttrs[CreateOptions](w, r, 0)
	if err != nil {
		return err
	}
	p, err := a.Service.Create(r.Context(), r.PathValue("org"), opts)
	if err != nil {
		return err
	}
	return a.respondProvider(w, r, http.StatusCreated, p)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	inc, err := tfeapi.Includes(r, "registry-provider-versions")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	ps, total, err := a.Service.List(r.Context(), r.PathValue("org"), ListOptions{
		RegistryName: q.Get("filter[registry_name]"), Namespace: q.Get("filter[organization_name]"), Search: q.Get("q"),
	}, page.Offset(), page.Size)
	if err != nil {
		return err
	}
	versions, err := a.Service.Versions(r.Context(), ps)
	if err != nil {
		return err
	}
	can := CanManage(r.Context(), r.PathValue("org"))
	out := make([]*jsonProvider, len(ps))
	var included []any
	for i, p := range ps {
		vs := versions[p.ID]
		out[i] = a.providerJSON(can, p, vs)
		if inc["registry_provider_versions"] {
			for _, v := range vs {
				included = append(included, a.versionJSON(can, v, nil))
			}
		}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total, EmptyHasNoPages: true}, included...)
	return nil
}

func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	p, err := a.Service.Get(r.Context(), ref(r))
	if err != nil {
		return err
	}
	return a.respondProvider(w, r, http.StatusOK, p)
}

func (a *API) getByID(w http.ResponseWriter, r *http.Request) error {
	p, err := a.Service.GetByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return a.respondProvider(w, r, http.StatusOK, p)
}

type jsonTagBinding struct {
	ID    string `jsonapi:"primary,tag-bindings"`
	Key   string `jsonapi:"attr,key"`
	Value string `jsonapi:"attr,value"`
}

func (a *API) tagBindings(w http.ResponseWriter, r *http.Request) error {
	p, err := a.Service.GetByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := make([]*jsonTagBinding, len(p.TagBindings))
	for i, tb := range p.TagBindings {
		out[i] = &jsonTagBinding{ID: tb.ID, Key: tb.Key, Value: tb.Value}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 20), Total: len(out)})
	return nil
}

// update changes a provider's tag bindings (the only updatable thing).
func (a *API) update(w http.ResponseWriter, r *http.Request) error {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return err
	}
	p, err := a.Service.Get(r.Context(), ref(r))
	if err != nil {
		return err
	}
	if _, ok := doc.Relationships["tag-bindings"]; ok {
		res, err := doc.RelResources("tag-bindings")
		if err != nil {
			return err
		}
		tags := []TagBinding{}
		for _, x := range res {
			var tb TagBinding
			if len(x.Attributes) > 0 {
				if err := json.Unmarshal(x.Attributes, &tb); err != nil {
					return core.BadRequest("tag-bindings: %v", err)
				}
			}
			tags = append(tags, TagBinding{Key: tb.Key, Value: tb.Value})
		}
		if p, err = a.Service.SetTagBindings(r.Context(), ref(r), tags); err != nil {
			return err
		}
	}
	return a.respondProvider(w, r, http.StatusOK, p)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) error {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), ref(r)))
	return nil
}

func (a *API) createVersion(w http.ResponseWriter, r *http.Request) error {
	_, opts, err := tfeapi.DecodeAttrs[VersionOptions](w, r, 0)
	if err != nil {
		return err
	}
	p, v, err := a.Service.CreateVersion(r.Context(), ref(r), opts)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, a.versionJSON(CanManage(r.Context(), p.Organization), v, nil))
	return nil
}

func (a *API) listVersions(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	p, all, err := a.Service.ListVersions(r.Context(), ref(r))
	if err != nil {
		return err
	}
	items, pg := tfeapi.Paginate(all, page)
	pg.EmptyHasNoPages = true
	platforms, err := a.Service.PlatformIDs(r.Context(), items)
	if err != nil {
		return err
	}
	can := CanManage(r.Context(), p.Organization)
	out := make([]*jsonVersion, len(items))
	for i, v := range items {
		out[i] = a.versionJSON(can, v, platforms[v.ID])
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) getVersion(w http.ResponseWriter, r *http.Request) error {
	p, v, err := a.Service.GetVersion(r.Context(), ref(r), r.PathValue("version"))
	if err != nil {
		return err
	}
	platforms, err := a.Service.PlatformIDs(r.Context(), []*Version{v})
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.versionJSON(CanManage(r.Context(), p.Organization), v, platforms[v.ID]))
	return nil
}

func (a *API) deleteVersion(w http.ResponseWriter, r *http.Request) error {
	tfeapi.NoContent(w, r, a.Service.DeleteVersion(r.Context(), ref(r), r.PathValue("version")))
	return nil
}

func (a *API) createPlatform(w http.ResponseWriter, r *http.Request) error {
	_, opts, err := tfeapi.DecodeAttrs[PlatformOptions](w, r, 0)
	if err != nil {
		return err
	}
	pl, err := a.Service.CreatePlatform(r.Context(), ref(r), r.PathValue("version"), opts)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, a.platformJSON(CanManage(r.Context(), r.PathValue("org")), pl))
	return nil
}

func (a *API) listPlatforms(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	_, pls, total, err := a.Service.ListPlatforms(r.Context(), ref(r), r.PathValue("version"), page.Offset(), page.Size)
	if err != nil {
		return err
	}
	can := CanManage(r.Context(), r.PathValue("org"))
	out := make([]*jsonPlatform, len(pls))
	for i, p := range pls {
		out[i] = a.platformJSON(can, p)
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total, EmptyHasNoPages: true})
	return nil
}

func (a *API) getPlatform(w http.ResponseWriter, r *http.Request) error {
	_, pl, err := a.Service.GetPlatform(r.Context(), ref(r), r.PathValue("version"), r.PathValue("os"), r.PathValue("arch"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, a.platformJSON(CanManage(r.Context(), r.PathValue("org")), pl))
	return nil
}

func (a *API) deletePlatform(w http.ResponseWriter, r *http.Request) error {
	tfeapi.NoContent(w, r, a.Service.DeletePlatform(r.Context(), ref(r), r.PathValue("version"), r.PathValue("os"), r.PathValue("arch")))
	return nil
}

// GPG keys.

// namespaces reads filter[namespace], given once comma-separated or
// repeated.
func namespaces(r *http.Request) []string {
	var out []string
	for _, v := range r.URL.Query()["filter[namespace]"] {
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				out = append(out, ns)
			}
		}
	}
	return out
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.StorePage(w, r, func(offset, limit int) ([]*GPGKey, int, error) {
		return a.Service.ListKeys(r.Context(), namespaces(r), offset, limit)
	}, keyJSON)
}

type keyOptions struct {
	Namespace  *string `json:"namespace"`
	ASCIIArmor *string `json:"ascii-armor"`
}

func (a *API) createKey(w http.ResponseWriter, r *http.Request) error {
	_, opts, err := tfeapi.DecodeAttrs[keyOptions](w, r, 0)
	if err != nil {
		return err
	}
	k, err := a.Service.CreateKey(r.Context(), str(opts.Namespace), str(opts.ASCIIArmor))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, keyJSON(k))
	return nil
}

func (a *API) getKey(w http.ResponseWriter, r *http.Request) error {
	k, err := a.Service.GetKey(r.Context(), r.PathValue("ns"), r.PathValue("keyid"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, keyJSON(k))
	return nil
}

func (a *API) updateKey(w http.ResponseWriter, r *http.Request) error {
	_, opts, err := tfeapi.DecodeAttrs[keyOptions](w, r, 0)
	if err != nil {
		return err
	}
	if opts.ASCIIArmor != nil {
		return core.Invalid("ascii-armor cannot be changed: add the new key and delete the old one")
	}
	k, err := a.Service.MoveKey(r.Context(), r.PathValue("ns"), r.PathValue("keyid"), str(opts.Namespace))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, keyJSON(k))
	return nil
}

func (a *API) deleteKey(w http.ResponseWriter, r *http.Request) error {
	tfeapi.NoContent(w, r, a.Service.DeleteKey(r.Context(), r.PathValue("ns"), r.PathValue("keyid")))
	return nil
}

// Uploads and downloads (capability URLs).

func (a *API) uploadShasums(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.UploadShasums(r.Context(), r.PathValue("id"), r.Body); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *API) uploadSig(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.UploadSignature(r.Context(), r.PathValue("id"), r.Body); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *API) uploadBinary(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.UploadBinary(r.Context(), r.PathValue("id"), r.Body); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *API) downloadVersionFile(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	if file != "SHA256SUMS" && file != "SHA256SUMS.sig" {
		http.NotFound(w, r)
		return
	}
	b, err := a.Service.versionFile(r.Context(), r.PathValue("id"), r.PathValue("digest"), file == "SHA256SUMS.sig")
	if err != nil {
		if core.KindOf(err) == core.KindNotFound {
			http.NotFound(w, r)
			return
		}
		tfeapi.Error(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func (a *API) downloadBinary(w http.ResponseWriter, r *http.Request) {
	sha, ok := strings.CutSuffix(r.PathValue("file"), ".zip")
	if !ok || !sha256Re.MatchString(sha) {
		http.NotFound(w, r)
		return
	}
	rc, size, err := a.Service.openBinary(r.Context(), r.PathValue("id"), sha)
	if err != nil {
		if core.KindOf(err) == core.KindNotFound {
			http.NotFound(w, r)
			return
		}
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Stream(w, r, "application/zip", rc, size)
}

// The provider registry protocol answers plain JSON, errors as
// {"errors": ["..."]} (what terraform reads).

func protoError(w http.ResponseWriter, err error) {
	status, msg := http.StatusInternalServerError, "internal error"
	switch core.KindOf(err) {
	case core.KindNotFound:
		status, msg = http.StatusNotFound, err.Error()
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
	vs, err := a.Service.ProtocolVersions(r.Context(), r.PathValue("ns"), r.PathValue("type"))
	if err != nil {
		protoError(w, err)
		return
	}
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", map[string]any{"versions": vs})
}

func (a *API) protoDownload(w http.ResponseWriter, r *http.Request) {
	d, err := a.Service.ProtocolDownload(r.Context(), r.PathValue("ns"), r.PathValue("type"), r.PathValue("version"), r.PathValue("os"), r.PathValue("arch"))
	if err != nil {
		protoError(w, err)
		return
	}
	tfeapi.WriteJSON(w, http.StatusOK, "application/json", d)
}
