package moduletest

import (
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Base is the path of a module's test routes.
const Base = "/api/v2/organizations/{org}/tests/registry-modules/{registry}/{ns}/{name}/{provider}"

// API serves test runs (go-tfe's TestRuns and
// ConfigurationVersions.CreateForRegistryModule).
type API struct {
	Service *Service
	// Signer signs the log-read-url (the run domain's /logs/{id}).
	Signer *blob.Signer
	// LogTTL is how long a log-read-url stays valid (default 1 h).
	LogTTL time.Duration
	// NewConfig creates a configuration version owned by the module and
	// answers with it and its upload URL (internal/configversion).
	NewConfig func(w http.ResponseWriter, r *http.Request, moduleID string)
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	// go-tfe names the test runs first (CreateForRegistryModule).
	mux.HandleFunc("POST "+Base+"/test-runs/configuration-versions", a.createConfig)
	mux.HandleFunc("GET "+Base+"/test-runs", a.list)
	mux.HandleFunc("POST "+Base+"/test-runs", a.create)
	mux.HandleFunc("GET "+Base+"/test-runs/{id}", a.get)
	mux.HandleFunc("POST "+Base+"/test-runs/{id}/cancel", a.cancel(false))
	mux.HandleFunc("POST "+Base+"/test-runs/{id}/force-cancel", a.cancel(true))
}

// PathOf is the module path of a test route.
func PathOf(r *http.Request) Path {
	return Path{Organization: r.PathValue("org"), Registry: r.PathValue("registry"), Namespace: r.PathValue("ns"),
		Name: r.PathValue("name"), Provider: r.PathValue("provider")}
}

// jsonTestRun is go-tfe's TestRun.
type jsonTestRun struct {
	ID               string            `jsonapi:"primary,test-runs"`
	Status           string            `jsonapi:"attr,status"`
	StatusTimestamps map[string]string `jsonapi:"attr,status-timestamps"`
	TestStatus       string            `jsonapi:"attr,test-status"`
	TestsPassed      int               `jsonapi:"attr,tests-passed"`
	TestsFailed      int               `jsonapi:"attr,tests-failed"`
	TestsErrored     int               `jsonapi:"attr,tests-errored"`
	TestsSkipped     int               `jsonapi:"attr,tests-skipped"`
	Filters          []string          `jsonapi:"attr,filters"`
	TestDirectory    string            `jsonapi:"attr,test-directory,omitempty"`
	Verbose          bool              `jsonapi:"attr,verbose"`
	LogReadURL       string            `jsonapi:"attr,log-read-url"`
	CreatedAt        time.Time         `jsonapi:"attr,created-at,iso8601"`
	ConfigVersion    *jsonRef          `jsonapi:"relation,configuration-version"`
	RegistryModule   *jsonModuleRef    `jsonapi:"relation,registry-module"`
}

type jsonRef struct {
	ID string `jsonapi:"primary,configuration-versions"`
}

type jsonModuleRef struct {
	ID string `jsonapi:"primary,registry-modules"`
}

func (a *API) toJSON(tr *TestRun) *jsonTestRun {
	ttl := a.LogTTL
	if ttl == 0 {
		ttl = time.Hour
	}
	ts := map[string]string{}
	for k, t := range map[string]*time.Time{"queued-at": tr.Timestamps.QueuedAt, "started-at": tr.Timestamps.StartedAt,
		"finished-at": tr.Timestamps.FinishedAt, "errored-at": tr.Timestamps.ErroredAt, "canceled-at": tr.Timestamps.CanceledAt,
		"force-canceled-at": tr.Timestamps.ForceCanceledAt} {
		if t != nil {
			ts[k] = t.UTC().Format(time.RFC3339)
		}
	}
	filters := tr.Options.Filters
	if filters == nil {
		filters = []string{}
	}
	// Run variables are never shown: a -var may carry a secret.
	return &jsonTestRun{ID: tr.ID, Status: string(tr.Status), StatusTimestamps: ts, TestStatus: string(tr.TestStatus),
		TestsPassed: tr.Counts.Passed, TestsFailed: tr.Counts.Failed, TestsErrored: tr.Counts.Errored, TestsSkipped: tr.Counts.Skipped,
		Filters: filters, TestDirectory: tr.Options.TestDirectory, Verbose: tr.Options.Verbose,
		LogReadURL: a.Signer.URL(http.MethodGet, "/logs/"+tr.ID, ttl), CreatedAt: tr.CreatedAt,
		ConfigVersion: &jsonRef{ID: tr.ConfigurationVersionID}, RegistryModule: &jsonModuleRef{ID: tr.ModuleID}}
}

func (a *API) createConfig(w http.ResponseWriter, r *http.Request) {
	m, err := a.Service.ModuleForTests(r.Context(), PathOf(r))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.NewConfig(w, r, m.ID)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs struct {
		Filters       []string   `json:"filters"`
		TestDirectory *string    `json:"test-directory"`
		Verbose       *bool      `json:"verbose"`
		Parallelism   *int       `json:"parallelism"`
		Variables     []Variable `json:"variables"`
	}
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	cv, err := doc.RelID("configuration-version")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	o := CreateOptions{ConfigurationVersionID: cv, Variables: attrs.Variables}
	o.Filters = attrs.Filters
	if attrs.TestDirectory != nil {
		// The CLI sends its default, "tests", when given none.
		o.TestDirectory = strings.TrimSuffix(*attrs.TestDirectory, "/")
	}
	if attrs.Verbose != nil {
		o.Verbose = *attrs.Verbose
	}
	if attrs.Parallelism != nil {
		o.Parallelism = *attrs.Parallelism
	}
	tfeapi.Reply(w, r, http.StatusCreated, a.toJSON)(a.Service.Create(r.Context(), PathOf(r), o))
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, total, err := a.Service.List(r.Context(), PathOf(r), page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonTestRun, len(items))
	for i, tr := range items {
		out[i] = a.toJSON(tr)
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total})
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, a.toJSON)(a.Service.Get(r.Context(), PathOf(r), r.PathValue("id")))
}

func (a *API) cancel(force bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := a.Service.Cancel(r.Context(), PathOf(r), r.PathValue("id"), force); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}
