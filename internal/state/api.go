package state

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// SnapshotInterval is sent as x-terraform-snapshot-interval (seconds) on
// state version responses: terraform then persists intermediate snapshots
// during long applies at most this often.
const SnapshotInterval = 300

// API serves the state version endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the token-authenticated routes to api and the capability
// (upload and download URL) routes to capability.
func (a *API) Register(api, capability *http.ServeMux) {
	api.HandleFunc("POST /api/v2/workspaces/{id}/state-versions", a.create)
	api.HandleFunc("GET /api/v2/workspaces/{id}/current-state-version", a.current)
	api.HandleFunc("GET /api/v2/workspaces/{id}/current-state-version-outputs", a.currentOutputs)
	api.HandleFunc("GET /api/v2/state-versions", a.list)
	api.HandleFunc("GET /api/v2/state-versions/{id}", a.get)
	api.HandleFunc("GET /api/v2/state-versions/{id}/outputs", a.outputs)
	api.HandleFunc("GET /api/v2/state-versions/{id}/download", a.download)
	api.HandleFunc("POST /api/v2/state-versions/{id}/actions/soft_delete_backing_data", a.backingData(SoftDeleteBackingData))
	api.HandleFunc("POST /api/v2/state-versions/{id}/actions/restore_backing_data", a.backingData(RestoreBackingData))
	api.HandleFunc("POST /api/v2/state-versions/{id}/actions/permanently_delete_backing_data", a.backingData(PermanentlyDeleteBackingData))
	api.HandleFunc("GET /api/v2/state-version-outputs/{id}", a.output)
	api.HandleFunc("GET /api/v2/workspaces/{id}/resources", a.resources)

	capability.HandleFunc("PUT /state-versions/{id}/content", a.upload)
	capability.HandleFunc("PUT /state-versions/{id}/json-content", a.uploadJSON)
	capability.HandleFunc("GET /state-versions/{id}/content", a.capDownload)
	capability.HandleFunc("GET /state-versions/{id}/json-content", a.capDownloadJSON)
}

type jsonStateVersion struct {
	ID                 string                    `jsonapi:"primary,state-versions"`
	CreatedAt          time.Time                 `jsonapi:"attr,created-at,iso8601"`
	Status             string                    `jsonapi:"attr,status"`
	Serial             int64                     `jsonapi:"attr,serial"`
	Size               int64                     `jsonapi:"attr,size"`
	Lineage            string                    `jsonapi:"attr,lineage,omitempty"`
	MD5                string                    `jsonapi:"attr,md5,omitempty"`
	DownloadURL        string                    `jsonapi:"attr,hosted-state-download-url,omitempty"`
	UploadURL          string                    `jsonapi:"attr,hosted-state-upload-url,omitempty"`
	JSONDownloadURL    string                    `jsonapi:"attr,hosted-json-state-download-url,omitempty"`
	JSONUploadURL      string                    `jsonapi:"attr,hosted-json-state-upload-url,omitempty"`
	VCSCommitSHA       *string                   `jsonapi:"attr,vcs-commit-sha"`
	VCSCommitURL       *string                   `jsonapi:"attr,vcs-commit-url"`
	BillableRUMCount   *uint32                   `jsonapi:"attr,billable-rum-count,omitempty"`
	ResourcesProcessed bool                      `jsonapi:"attr,resources-processed"`
	StateVersion       int                       `jsonapi:"attr,state-version,omitempty"`
	TerraformVersion   string                    `jsonapi:"attr,terraform-version,omitempty"`
	Modules            map[string]map[string]int `jsonapi:"attr,modules,omitempty"`
	Providers          map[string]map[string]int `jsonapi:"attr,providers,omitempty"`
	Resources          []jsonResource            `jsonapi:"attr,resources,omitempty"`
	Run                *jsonRunRef               `jsonapi:"relation,run"`
	Outputs            []*jsonOutputRef          `jsonapi:"relation,outputs"`
}

type jsonResource struct {
	Name     string `json:"name"`
	Count    int    `json:"count"`
	Type     string `json:"type"`
	Module   string `json:"module"`
	Provider string `json:"provider"`
}

type jsonRunRef struct {
	ID string `jsonapi:"primary,runs"`
}

type jsonOutputRef struct {
	ID string `jsonapi:"primary,state-version-outputs"`
}

type jsonOutput struct {
	ID           string `jsonapi:"primary,state-version-outputs"`
	Name         string `jsonapi:"attr,name"`
	Sensitive    bool   `jsonapi:"attr,sensitive"`
	Type         string `jsonapi:"attr,type"`
	Value        any    `jsonapi:"attr,value"`
	DetailedType any    `jsonapi:"attr,detailed-type"`
}

// toJSON renders a version. Upload URLs are write capabilities: they are
// shown only when upload is true (to the creator and the lock holder).
func (a *API) toJSON(v *Version, outputs []*Output, upload bool) *jsonStateVersion {
	sg := a.Service.signer
	j := &jsonStateVersion{
		ID: v.ID, CreatedAt: v.CreatedAt, Status: string(v.Status), Serial: v.Serial, Size: v.Size,
		Lineage: v.Lineage, MD5: v.StateMD5, Outputs: []*jsonOutputRef{},
	}
	if j.MD5 == "" {
		j.MD5 = v.MD5
	}
	if v.RunID != "" {
		j.Run = &jsonRunRef{ID: v.RunID}
	}
	switch v.Status {
	case StatusPending:
		if !upload {
			break
		}
		j.UploadURL = sg.URL(http.MethodPut, "/state-versions/"+v.ID+"/content", UploadURLTTL)
		j.JSONUploadURL = sg.URL(http.MethodPut, "/state-versions/"+v.ID+"/json-content", UploadURLTTL)
	case StatusFinalized:
		j.DownloadURL = sg.URL(http.MethodGet, "/state-versions/"+v.ID+"/content", DownloadURLTTL)
		if v.JSONStateKey != "" {
			j.JSONDownloadURL = sg.URL(http.MethodGet, "/state-versions/"+v.ID+"/json-content", DownloadURLTTL)
		} else if upload {
			// The JSON state may still be on its way (it is uploaded in
			// parallel with the raw state).
			j.JSONUploadURL = sg.URL(http.MethodPut, "/state-versions/"+v.ID+"/json-content", UploadURLTTL)
		}
		j.ResourcesProcessed = true
		j.StateVersion = v.FormatVersion
		j.TerraformVersion = v.TerraformVersion
		rum := uint32(v.Summary.BillableRUM)
		j.BillableRUMCount = &rum
		j.Modules, j.Providers = v.Summary.Modules, v.Summary.Providers
		for _, r := range v.Summary.Resources {
			j.Resources = append(j.Resources, jsonResource{Name: r.Name, Count: r.Count, Type: r.Type, Module: r.Module, Provider: r.Provider})
		}
	}
	for _, o := range outputs {
		j.Outputs = append(j.Outputs, &jsonOutputRef{ID: o.ID})
	}
	return j
}

func outputJSON(o *Output, hideSensitive bool) *jsonOutput {
	j := &jsonOutput{ID: o.ID, Name: o.Name, Sensitive: o.Sensitive, Type: o.Type, DetailedType: o.DetailedType, Value: o.Value}
	if o.Sensitive && hideSensitive {
		j.Value = nil
	}
	return j
}

func snapshotHeader(w http.ResponseWriter) {
	w.Header().Set("X-Terraform-Snapshot-Interval", strconv.Itoa(SnapshotInterval))
}

// Render is a state version's wire form for other domains' includes (a
// workspace's current_state_version).
func (a *API) Render(r *http.Request, id string) (any, error) {
	v, err := a.Service.Get(r.Context(), id)
	if err != nil {
		return nil, err
	}
	var outputs []*Output
	if v.Status == StatusFinalized {
		if outputs, err = a.Service.outputs(r.Context(), v.ID); err != nil {
			return nil, err
		}
	}
	upload := false
	if v.Status != StatusDiscarded {
		if upload, err = a.Service.CallerHoldsLock(r.Context(), v.WorkspaceID); err != nil {
			return nil, err
		}
	}
	return a.toJSON(v, outputs, upload), nil
}

// respondVersion writes a version with its outputs linked, and included
// when asked for.
func (a *API) respondVersion(w http.ResponseWriter, r *http.Request, status int, v *Version) {
	inc, err := tfeapi.Includes(r, "created_by", "run", "run.created_by", "run.configuration_version", "outputs")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var outputs []*Output
	if v.Status == StatusFinalized {
		if outputs, err = a.Service.outputs(r.Context(), v.ID); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
	}
	var included []any
	if inc["outputs"] {
		for _, o := range outputs {
			included = append(included, outputJSON(o, false))
		}
	}
	snapshotHeader(w)
	upload := status == http.StatusCreated
	if !upload && v.Status != StatusDiscarded {
		if upload, err = a.Service.CallerHoldsLock(r.Context(), v.WorkspaceID); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
	}
	tfeapi.Respond(w, r, status, a.toJSON(v, outputs, upload), included...)
}

type createAttrs struct {
	Serial           *int64  `json:"serial"`
	MD5              *string `json:"md5"`
	Lineage          *string `json:"lineage"`
	Force            *bool   `json:"force"`
	State            *string `json:"state"`
	JSONState        *string `json:"json-state"`
	JSONStateOutputs *string `json:"json-state-outputs"`
}

func decodeB64(name string, s *string, limit int64) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	if int64(base64.StdEncoding.DecodedLen(len(*s))) > limit+3 {
		return nil, tooLarge(name, limit)
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if err != nil {
		return nil, core.Invalid("%s must be base64-encoded: %v", name, err)
	}
	return b, nil
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	max := a.Service.MaxSize()
	// Two base64 documents of the maximum size plus the outputs fit.
	doc, err := tfeapi.Decode(w, r, 3*(max/3*4+4)+1<<20)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs createAttrs
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	runID, err := doc.RelID("run")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	opts := CreateOptions{Serial: attrs.Serial, MD5: attrs.MD5, Lineage: attrs.Lineage, RunID: runID}
	if attrs.Force != nil {
		opts.Force = *attrs.Force
	}
	if opts.State, err = decodeB64("state", attrs.State, max); err == nil {
		if opts.JSONState, err = decodeB64("json-state", attrs.JSONState, max); err == nil {
			opts.JSONStateOutputs, err = decodeB64("json-state-outputs", attrs.JSONStateOutputs, max)
		}
	}
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	v, err := a.Service.Create(r.Context(), r.PathValue("id"), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondVersion(w, r, http.StatusCreated, v)
}

// backingData serves a backing data action: the version as it is now.
func (a *API) backingData(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := a.Service.ManageBackingData(r.Context(), r.PathValue("id"), action)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		a.respondVersion(w, r, http.StatusOK, v)
	}
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	v, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondVersion(w, r, http.StatusOK, v)
}

func (a *API) current(w http.ResponseWriter, r *http.Request) {
	v, err := a.Service.Current(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondVersion(w, r, http.StatusOK, v)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	versions, total, err := a.Service.List(r.Context(), q.Get("filter[organization][name]"), q.Get("filter[workspace][name]"), page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonStateVersion, 0, len(versions))
	for _, v := range versions {
		var outputs []*Output
		if v.Status == StatusFinalized {
			if outputs, err = a.Service.outputs(r.Context(), v.ID); err != nil {
				tfeapi.Error(w, r, err)
				return
			}
		}
		out = append(out, a.toJSON(v, outputs, false))
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total})
}

func (a *API) outputs(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	outputs, err := a.Service.Outputs(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(outputs, page)
	out := make([]*jsonOutput, len(items))
	for i, o := range items {
		out[i] = outputJSON(o, false)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) currentOutputs(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	outputs, err := a.Service.CurrentOutputs(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(outputs, page)
	out := make([]*jsonOutput, len(items))
	for i, o := range items {
		out[i] = outputJSON(o, true)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) output(w http.ResponseWriter, r *http.Request) {
	o, err := a.Service.Output(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, outputJSON(o, false))
}

func (a *API) download(w http.ResponseWriter, r *http.Request) {
	v, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.stream(w, r, v.ID, false)
}

func (a *API) capDownload(w http.ResponseWriter, r *http.Request) {
	a.stream(w, r, r.PathValue("id"), false)
}

func (a *API) capDownloadJSON(w http.ResponseWriter, r *http.Request) {
	a.stream(w, r, r.PathValue("id"), true)
}

func (a *API) stream(w http.ResponseWriter, r *http.Request, id string, jsonState bool) {
	rc, size, err := a.Service.Content(r.Context(), id, jsonState)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	tfeapi.Stream(w, r, "application/json", rc, size)
}

// readUpload reads a PUT body of at most the size limit.
func (a *API) readUpload(w http.ResponseWriter, r *http.Request, what string) ([]byte, error) {
	max := a.Service.MaxSize()
	if r.ContentLength > max {
		return nil, tooLarge(what, max)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(what, max)
		}
		return nil, core.BadRequest("reading %s: %v", what, err)
	}
	return b, nil
}

func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	b, err := a.readUpload(w, r, "state")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if _, err := a.Service.Upload(r.Context(), r.PathValue("id"), b); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *API) uploadJSON(w http.ResponseWriter, r *http.Request) {
	b, err := a.readUpload(w, r, "JSON state")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if err := a.Service.UploadJSON(r.Context(), r.PathValue("id"), b); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

type jsonResourceInstance struct {
	ID                       string  `jsonapi:"primary,resources"`
	Address                  string  `jsonapi:"attr,address"`
	Name                     string  `jsonapi:"attr,name"`
	CreatedAt                string  `jsonapi:"attr,created-at"`
	UpdatedAt                string  `jsonapi:"attr,updated-at"`
	Module                   string  `jsonapi:"attr,module"`
	Provider                 string  `jsonapi:"attr,provider"`
	ProviderType             string  `jsonapi:"attr,provider-type"`
	ModifiedByStateVersionID string  `jsonapi:"attr,modified-by-state-version-id"`
	NameIndex                *string `jsonapi:"attr,name-index"`
}

// resources lists the managed resource instances of the current state
// (GET workspaces/:id/resources). Created and updated times are those of
// the current version: Terrace does not diff state history.
func (a *API) resources(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	rs, total, v, err := a.Service.ResourcesPage(r.Context(), r.PathValue("id"), page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonResourceInstance, len(rs))
	for i, res := range rs {
		at := v.CreatedAt.UTC().Format(time.RFC3339)
		j := &jsonResourceInstance{ID: res.ID, Address: res.Address, Name: res.Name, CreatedAt: at, UpdatedAt: at,
			Module: res.Module, Provider: res.Provider, ProviderType: res.Type, ModifiedByStateVersionID: v.ID}
		if res.HasIndex {
			idx := res.NameIndex
			j.NameIndex = &idx
		}
		out[i] = j
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total})
}
