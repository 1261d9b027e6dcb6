package configversion

import (
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the configuration version endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the token-authenticated routes to the api mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v2/workspaces/{id}/configuration-versions", a.create)
	mux.HandleFunc("GET /api/v2/workspaces/{id}/configuration-versions", a.list)
	mux.HandleFunc("GET /api/v2/configuration-versions/{id}", a.get)
	mux.HandleFunc("GET /api/v2/configuration-versions/{id}/download", a.download)
	mux.HandleFunc("GET /api/v2/configuration-versions/{id}/ingress-attributes", a.ingress)
	mux.HandleFunc("POST /api/v2/configuration-versions/{id}/actions/archive", a.archive)
	mux.HandleFunc("POST /api/v2/configuration-versions/{id}/actions/soft_delete_backing_data", a.backingData(SoftDeleteBackingData))
	mux.HandleFunc("POST /api/v2/configuration-versions/{id}/actions/restore_backing_data", a.backingData(RestoreBackingData))
	mux.HandleFunc("POST /api/v2/configuration-versions/{id}/actions/permanently_delete_backing_data", a.backingData(PermanentlyDeleteBackingData))
}

// RegisterCapability adds the upload route to the capability mux (requests
// there carry a verified capability URL and no token).
func (a *API) RegisterCapability(mux *http.ServeMux) {
	mux.HandleFunc("PUT "+UploadPath("{id}"), a.upload)
}

// jsonCV is the wire form (go-tfe's ConfigurationVersion).
type jsonCV struct {
	ID               string       `jsonapi:"primary,configuration-versions"`
	AutoQueueRuns    bool         `jsonapi:"attr,auto-queue-runs"`
	Error            *string      `jsonapi:"attr,error"`
	ErrorMessage     *string      `jsonapi:"attr,error-message"`
	Source           string       `jsonapi:"attr,source"`
	Speculative      bool         `jsonapi:"attr,speculative"`
	Provisional      bool         `jsonapi:"attr,provisional"`
	Status           string       `jsonapi:"attr,status"`
	StatusTimestamps *jsonTS      `jsonapi:"attr,status-timestamps"`
	UploadURL        string       `jsonapi:"attr,upload-url,omitempty"`
	IngressAttrs     *jsonIngress `jsonapi:"relation,ingress-attributes,omitempty"`
	Workspace        *jsonWSRef   `jsonapi:"relation,workspace,omitempty"`
	links            jsonapi.Links
}

// JSONAPILinks implements jsonapi.Linkable.
func (j *jsonCV) JSONAPILinks() *jsonapi.Links { return &j.links }

type jsonTS struct {
	StartedAt  *time.Time `json:"started-at,omitempty"`
	FinishedAt *time.Time `json:"finished-at,omitempty"`
	ErroredAt  *time.Time `json:"errored-at,omitempty"`
	ArchivedAt *time.Time `json:"archived-at,omitempty"`
}

// jsonIngress is a version's ingress attributes (go-tfe's
// IngressAttributes); a version's relationship names it by ID only.
type jsonIngress struct {
	ID                string `jsonapi:"primary,ingress-attributes"`
	Branch            string `jsonapi:"attr,branch"`
	CloneURL          string `jsonapi:"attr,clone-url"`
	CommitMessage     string `jsonapi:"attr,commit-message"`
	CommitSHA         string `jsonapi:"attr,commit-sha"`
	CommitURL         string `jsonapi:"attr,commit-url"`
	CompareURL        string `jsonapi:"attr,compare-url"`
	Identifier        string `jsonapi:"attr,identifier"`
	IsPullRequest     bool   `jsonapi:"attr,is-pull-request"`
	OnDefaultBranch   bool   `jsonapi:"attr,on-default-branch"`
	PullRequestNumber int    `jsonapi:"attr,pull-request-number"`
	PullRequestURL    string `jsonapi:"attr,pull-request-url"`
	PullRequestTitle  string `jsonapi:"attr,pull-request-title"`
	Tag               string `jsonapi:"attr,tag"`
	SenderUsername    string `jsonapi:"attr,sender-username"`
	SenderHTMLURL     string `jsonapi:"attr,sender-html-url"`
}

// ingressID names a version's ingress attributes (HCP Terraform's ia-
// prefix, the version's own random part).
func ingressID(cvID string) string {
	return "ia-" + strings.TrimPrefix(cvID, core.PrefixConfigVersion+"-")
}

func ingressJSON(cv *ConfigurationVersion) *jsonIngress {
	in := cv.Ingress
	return &jsonIngress{ID: ingressID(cv.ID), Branch: in.Branch, CloneURL: in.CloneURL, CommitMessage: in.CommitMessage, CommitSHA: in.CommitSHA,
		CommitURL: in.CommitURL, CompareURL: in.CompareURL, Identifier: in.Identifier, IsPullRequest: in.IsPullRequest,
		OnDefaultBranch: in.OnDefaultBranch, PullRequestNumber: in.PullRequestNumber, PullRequestURL: in.PullRequestURL,
		PullRequestTitle: in.PullRequestTitle, Tag: in.Tag, SenderUsername: in.SenderUsername, SenderHTMLURL: in.SenderHTMLURL}
}

// included renders the ingress attributes of versions when include asks.
func included(r *http.Request, cvs ...*ConfigurationVersion) ([]any, error) {
	inc, err := tfeapi.Includes(r, "ingress_attributes", "run")
	if err != nil || !inc["ingress_attributes"] {
		return nil, err
	}
	var out []any
	for _, cv := range cvs {
		if cv.Ingress != nil {
			out = append(out, ingressJSON(cv))
		}
	}
	return out, nil
}

type jsonWSRef struct {
	ID string `jsonapi:"primary,workspaces"`
}

func toJSON(cv *ConfigurationVersion) *jsonCV {
	j := &jsonCV{
		ID:            cv.ID,
		AutoQueueRuns: cv.AutoQueueRuns,
		Source:        cv.Source,
		Speculative:   cv.Speculative,
		Provisional:   cv.Provisional,
		Status:        string(cv.Status),
		StatusTimestamps: &jsonTS{
			StartedAt:  cv.StatusTimestamps.StartedAt,
			FinishedAt: cv.StatusTimestamps.FinishedAt,
			ErroredAt:  cv.StatusTimestamps.ErroredAt,
			ArchivedAt: cv.StatusTimestamps.ArchivedAt,
		},
		Workspace: &jsonWSRef{ID: cv.WorkspaceID},
		links:     jsonapi.Links{"self": "/api/v2/configuration-versions/" + cv.ID},
	}
	if cv.Error != "" {
		j.Error, j.ErrorMessage = &cv.Error, &cv.ErrorMessage
	}
	if cv.Status == StatusUploaded {
		j.links["download"] = "/api/v2/configuration-versions/" + cv.ID + "/download"
	}
	if cv.Ingress != nil {
		j.IngressAttrs = &jsonIngress{ID: ingressID(cv.ID)}
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
	opts.Source = ""
	cv, err := a.Service.Create(r.Context(), r.PathValue("id"), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.RespondCreated(w, r, cv)
}

// RespondCreated answers the creation of cv: its document with its
// upload URL (a module's version names no workspace).
func (a *API) RespondCreated(w http.ResponseWriter, r *http.Request, cv *ConfigurationVersion) {
	j := toJSON(cv)
	if !core.HasPrefix(cv.WorkspaceID, core.PrefixWorkspace) {
		j.Workspace = nil
	}
	j.UploadURL = a.Service.UploadURL(cv)
	tfeapi.Respond(w, r, http.StatusCreated, j)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if _, err := tfeapi.Includes(r, "ingress_attributes", "run"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, total, err := a.Service.List(r.Context(), r.PathValue("id"), page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonCV, len(items))
	for i, cv := range items {
		out[i] = toJSON(cv)
	}
	inc, _ := included(r, items...)
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}, inc...)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	if _, err := tfeapi.Includes(r, "ingress_attributes", "run"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	cv, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	inc, _ := included(r, cv)
	tfeapi.Respond(w, r, http.StatusOK, toJSON(cv), inc...)
}

// ingress answers a version's ingress attributes; a version uploaded
// through the API has none (404).
func (a *API) ingress(w http.ResponseWriter, r *http.Request) {
	cv, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if cv.Ingress == nil {
		tfeapi.Error(w, r, core.NotFound("configuration version %s was not made from a commit: it has no ingress attributes", cv.ID))
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, ingressJSON(cv))
}

func (a *API) download(w http.ResponseWriter, r *http.Request) {
	rc, size, err := a.Service.OpenArchive(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Stream(w, r, "application/octet-stream", rc, size)
}

func (a *API) archive(w http.ResponseWriter, r *http.Request) {
	if err := a.Service.MarkArchived(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// backingData serves a backing data action: the version as it is now.
func (a *API) backingData(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cv, err := a.Service.ManageBackingData(r.Context(), r.PathValue("id"), action)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		tfeapi.Respond(w, r, http.StatusOK, toJSON(cv))
	}
}

func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Service.Upload(r.Context(), r.PathValue("id"), r.Body); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Render is a configuration version's wire form for other domains'
// ?include=configuration_version.
func Render(cv *ConfigurationVersion) any { return toJSON(cv) }
