package orchestration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/orchestrator"
)

// Prefix is where the orchestrator's API lives.
const Prefix = "/api/terrace/v1"

// API serves the orchestrator as plain JSON under Prefix.
type API struct {
	Service *Service
}

// route is one kind's collection path; {scope} is the project of an
// environment and the provider type of a provider.
type route struct {
	kind       string
	collection string // with {org} and, when scoped, {scope}
}

var routes = []route{
	{KindProject, "/orgs/{org}/projects"},
	{KindEnvType, "/orgs/{org}/env-types"},
	{KindEnvironment, "/orgs/{org}/projects/{scope}/envs"},
	{KindResourceType, "/orgs/{org}/resource-types"},
	{KindProvider, "/orgs/{org}/module-providers/{scope}"},
	{KindModule, "/orgs/{org}/modules"},
	{KindModuleRule, "/orgs/{org}/module-rules"},
}

// Register adds the routes to mux (which the server mounts behind the
// token middleware).
func (a *API) Register(mux *http.ServeMux) {
	for _, rt := range routes {
		rt := rt
		coll := Prefix + rt.collection
		mux.HandleFunc("GET "+coll, func(w http.ResponseWriter, r *http.Request) {
			objs, err := a.Service.List(r.Context(), r.PathValue("org"), rt.kind, r.PathValue("scope"))
			respond(w, r, http.StatusOK, objs, err)
		})
		mux.HandleFunc("POST "+coll, func(w http.ResponseWriter, r *http.Request) {
			body, err := readBody(r)
			if err != nil {
				Error(w, r, err)
				return
			}
			o, err := a.Service.Create(r.Context(), r.PathValue("org"), rt.kind, r.PathValue("scope"), "", body)
			respond(w, r, http.StatusCreated, o, err)
		})
		mux.HandleFunc("GET "+coll+"/{id}", func(w http.ResponseWriter, r *http.Request) {
			o, err := a.Service.Get(r.Context(), r.PathValue("org"), rt.kind, r.PathValue("scope"), r.PathValue("id"))
			respond(w, r, http.StatusOK, o, err)
		})
		mux.HandleFunc("PUT "+coll+"/{id}", func(w http.ResponseWriter, r *http.Request) {
			body, err := readBody(r)
			if err != nil {
				Error(w, r, err)
				return
			}
			o, err := a.Service.Update(r.Context(), r.PathValue("org"), rt.kind, r.PathValue("scope"), r.PathValue("id"), body)
			respond(w, r, http.StatusOK, o, err)
		})
		mux.HandleFunc("DELETE "+coll+"/{id}", func(w http.ResponseWriter, r *http.Request) {
			err := a.Service.Delete(r.Context(), r.PathValue("org"), rt.kind, r.PathValue("scope"), r.PathValue("id"))
			if err != nil {
				Error(w, r, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/module-providers", func(w http.ResponseWriter, r *http.Request) {
		objs, err := a.Service.List(r.Context(), r.PathValue("org"), KindProvider, "")
		respond(w, r, http.StatusOK, objs, err)
	})
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/modules/{id}/versions", func(w http.ResponseWriter, r *http.Request) {
		vs, err := a.Service.ModuleVersions(r.Context(), r.PathValue("org"), r.PathValue("id"))
		respond(w, r, http.StatusOK, vs, err)
	})
	mux.HandleFunc("POST "+Prefix+"/orgs/{org}/deployments", func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		var req DeployRequest
		dec := json.NewDecoder(bytesReader(body))
		dec.UseNumber()
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			Error(w, r, core.BadRequest("the body is not a deployment request: %v", err))
			return
		}
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			if req.IdempotencyKey != "" && req.IdempotencyKey != k {
				Error(w, r, core.BadRequest("the Idempotency-Key header and idempotency_key differ"))
				return
			}
			req.IdempotencyKey = k
		}
		out, err := a.Service.Deploy(r.Context(), r.PathValue("org"), req)
		status := http.StatusAccepted
		if _, ok := out.(*DryRun); ok {
			status = http.StatusOK
		}
		respond(w, r, status, out, err)
	})
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/deployments/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, err := a.Service.GetDeployment(r.Context(), r.PathValue("org"), r.PathValue("id"))
		respond(w, r, http.StatusOK, d, err)
	})
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/projects/{project}/envs/{env}/deployments", func(w http.ResponseWriter, r *http.Request) {
		ds, err := a.Service.ListDeployments(r.Context(), r.PathValue("org"), r.PathValue("project"), r.PathValue("env"))
		respond(w, r, http.StatusOK, ds, err)
	})
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/projects/{project}/envs/{env}/outputs", func(w http.ResponseWriter, r *http.Request) {
		show, err := boolQuery(r, "sensitive")
		if err != nil {
			Error(w, r, err)
			return
		}
		o, err := a.Service.GetEnvOutputs(r.Context(), r.PathValue("org"), r.PathValue("project"), r.PathValue("env"), show)
		respond(w, r, http.StatusOK, o, err)
	})
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/deployments/{id}/graph", func(w http.ResponseWriter, r *http.Request) {
		g, err := a.Service.GetDeploymentGraph(r.Context(), r.PathValue("org"), r.PathValue("id"))
		respond(w, r, http.StatusOK, g, err)
	})
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/deployments/{id}/tf", func(w http.ResponseWriter, r *http.Request) {
		tf, err := a.Service.GetDeploymentTerraform(r.Context(), r.PathValue("org"), r.PathValue("id"))
		respond(w, r, http.StatusOK, tf, err)
	})
	mux.HandleFunc("GET "+Prefix+"/orgs/{org}/deployments/{id}/diff", func(w http.ResponseWriter, r *http.Request) {
		d, err := a.Service.DiffDeployments(r.Context(), r.PathValue("org"), r.PathValue("id"), r.URL.Query().Get("from"))
		respond(w, r, http.StatusOK, d, err)
	})
}

const maxBody = 1 << 20

// boolQuery reads an optional true/false query parameter.
func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, core.BadRequest("query parameter %s must be true or false (got %q)", name, v)
	}
	return b, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &core.Error{Kind: core.KindTooLarge, Detail: "the body is larger than 1 MiB"}
	}
	return b, err
}

func respond(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// ErrorObject is one error of an error response.
type ErrorObject struct {
	Status string                  `json:"status"`
	Title  string                  `json:"title"`
	Detail string                  `json:"detail,omitempty"`
	Field  string                  `json:"field,omitempty"`
	Node   *orchestrator.Coord     `json:"node,omitempty"`
	Code   string                  `json:"code,omitempty"`
	Graph  *orchestrator.GraphJSON `json:"-"`
}

var statuses = map[core.Kind]int{
	core.KindInternal:     http.StatusInternalServerError,
	core.KindNotFound:     http.StatusNotFound,
	core.KindConflict:     http.StatusConflict,
	core.KindInvalid:      http.StatusUnprocessableEntity,
	core.KindBadRequest:   http.StatusBadRequest,
	core.KindUnauthorized: http.StatusUnauthorized,
	core.KindForbidden:    http.StatusForbidden,
	core.KindTooLarge:     http.StatusRequestEntityTooLarge,
}

// Error writes err as {"errors":[{status,title,detail,field|node,code}]}:
// one entry per field of a validation error and per node of a compile
// error.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	kind := core.KindOf(err)
	status := statuses[kind]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	st := strconv.Itoa(status)
	title := http.StatusText(status)
	var objs []ErrorObject
	var cf *CompileFailure
	switch {
	case kind == core.KindInternal:
		slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		objs = append(objs, ErrorObject{Status: st, Title: title})
	case errors.As(err, &cf):
		for _, ne := range cf.Errors {
			node := ne.Node
			objs = append(objs, ErrorObject{Status: st, Title: title, Detail: ne.Detail, Node: &node, Code: ne.Code})
		}
	case orchestrator.FieldErrors(err) != nil:
		for _, fe := range orchestrator.FieldErrors(err) {
			objs = append(objs, ErrorObject{Status: st, Title: title, Detail: fe.Detail, Field: fe.Field})
		}
	default:
		detail := err.Error()
		var ce *core.Error
		if errors.As(err, &ce) && ce.Detail != "" {
			detail = ce.Detail
		}
		objs = append(objs, ErrorObject{Status: st, Title: title, Detail: detail})
	}
	writeJSON(w, status, map[string]any{"errors": objs})
}
