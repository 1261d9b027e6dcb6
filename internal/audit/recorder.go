package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// TrailPattern is the one route an audit-trails token may use.
const TrailPattern = "GET /api/v2/organization/audit-trail"

// maxCapture bounds how much of a create's response the Recorder reads to
// learn the new resource's ID.
const maxCapture = 1 << 20

type requestIDKey struct{}

// RequestID returns the ID the Recorder gave the request in ctx ("" when
// none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Recorder wraps mux, which must sit behind the token middleware (it reads
// the principal from the request context). Every request gets an ID (the
// X-Request-Id response header); every successful write, and every
// successful sensitive read, is recorded as an event. An audit-trails
// token is refused (401, as for a token that is not valid there), through
// onError, everywhere but the audit trail.
func (s *Service) Recorder(mux *http.ServeMux, onError func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return s.RecorderFor(mux, mux, onError)
}

// RecorderFor is Recorder for a handler (such as the authorization guard)
// in front of mux: routes are matched in mux, requests served by next.
func (s *Service) RecorderFor(mux *http.ServeMux, next http.Handler, onError func(http.ResponseWriter, *http.Request, error)) http.Handler {
	var routes sync.Map // pattern -> route
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqID := newUUID()
		w.Header().Set("X-Request-Id", reqID)
		// The route, matched once here, is remembered for the layers
		// after (the authorization guard).
		_, pattern := mux.Handler(r)
		r = r.WithContext(tfeapi.WithRoute(context.WithValue(r.Context(), requestIDKey{}, reqID), mux, pattern))
		p := auth.FromContext(r.Context())
		if p != nil && p.Kind == auth.KindAuditTrails && pattern != TrailPattern {
			onError(w, r, core.Unauthorized("an audit-trails token can only read its organization's audit trail"))
			return
		}
		if p == nil || pattern == "" || !recorded(r.Method, pattern) {
			next.ServeHTTP(w, r)
			return
		}
		v, ok := routes.Load(pattern)
		if !ok {
			v, _ = routes.LoadOrStore(pattern, parseRoute(pattern))
		}
		rt := v.(route)
		values := pathValues(pattern, r.URL.Path)
		// The organization is found before the request is served: after a
		// delete there would be nothing left to find it through.
		org, orgKnown := s.organizationBefore(r.Context(), rt, values)
		if name := r.URL.Query().Get("filter[organization][name]"); !orgKnown && name != "" {
			// A list filtered by organization (GET /state-versions).
			org, orgKnown = name, true
		}
		if !orgKnown {
			// The response will name the workspace; the authorization
			// guard notes the organization it finds (organizationAfter).
			r = r.WithContext(tfeapi.WithLocated(r.Context()))
		}
		// An organization's update may rename it: its trail is then found
		// by the name the response gives (the old one finds none).
		renames := pattern == orgUpdatePattern
		rw := &recordingWriter{ResponseWriter: w, capture: rt.create || !orgKnown || renames}
		next.ServeHTTP(rw, r)
		if rw.status == 0 {
			rw.status = http.StatusOK
		}
		if rw.status >= 400 {
			return
		}
		e := s.event(r, p, rt, values, rw.status, rw.doc)
		if !orgKnown {
			org = s.organizationAfter(r.Context(), p, rw.doc())
		}
		if d := rw.doc(); renames && d != nil && d.Data.ID != "" {
			org = d.Data.ID // an organization's ID in the API is its name
		}
		s.save(context.WithoutCancel(r.Context()), e, org, rt.site)
	})
}

// orgUpdatePattern is the API's update of an organization, which may
// rename it.
const orgUpdatePattern = "PATCH /api/v2/organizations/{org}"

// save records e in org's trail ("" or site: the site's), logging what
// fails: the request it describes has been served already.
func (s *Service) save(ctx context.Context, e *Event, org string, site bool) {
	if org != "" && !site {
		e.OrganizationName = org // the store finds its ID as it records
	}
	if _, err := s.Record(ctx, e); err != nil {
		s.logger.Error("audit: recording an event failed", "request_id", e.Request.ID, "route", e.Resource.Meta["route"], "error", err)
	}
}

// recorded reports whether requests to pattern are recorded: writes, and
// the sensitive reads.
func recorded(method, pattern string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return sensitiveReads[pattern]
	}
	return true
}

// organizationBefore finds the organization a request acts in from its
// route: "" with known=true for site events; known=false when only the
// response or the caller can tell.
func (s *Service) organizationBefore(ctx context.Context, rt route, values map[string]string) (org string, known bool) {
	switch {
	case rt.site:
		return "", true
	case rt.orgParam != "":
		return values[rt.orgParam], true
	case rt.ownerCollection != "":
		org, err := s.locate(ctx, rt.ownerCollection, values[rt.ownerParam])
		if err != nil {
			// The request will most likely fail (and record nothing);
			// if it succeeds, the response or the caller may tell.
			return "", false
		}
		return org, true
	}
	return "", false
}

// organizationAfter finds the organization of a request whose route names
// none (POST /runs, GET /state-versions): from the resource in the
// response, else from the caller's token.
func (s *Service) organizationAfter(ctx context.Context, p *auth.Principal, d *responseDoc) string {
	if d != nil {
		if name := d.relID("organization"); name != "" {
			return name
		}
		if ws := d.relID("workspace"); ws != "" {
			// The authorization guard found the workspace before the
			// request was served (a read now would follow its write).
			if l, ok := tfeapi.LocatedOf(ctx); ok && l.WorkspaceID == ws && l.Organization != "" {
				return l.Organization
			}
			if org, err := s.locate(ctx, "workspaces", ws); err == nil {
				return org
			}
		}
	}
	if p.Kind != auth.KindUser {
		return p.Organization
	}
	return ""
}

// event describes a served request.
// doc, when called, gives the response (a create's, to name the resource
// created); status is the response's.
func (s *Service) event(r *http.Request, p *auth.Principal, rt route, values map[string]string, status int, doc func() *responseDoc) *Event {
	e := &Event{
		Actor: actorOf(p),
		Resource: Resource{
			Type:   rt.typ,
			ID:     values[rt.idParam],
			Action: rt.action,
			Meta:   map[string]string{"route": rt.pattern, "status": strconv.Itoa(status)},
		},
		Request: Request{ID: RequestID(r.Context()), ClientIP: clientIP(r), UserAgent: r.UserAgent()},
	}
	if rt.actionParam != "" {
		e.Resource.Action = values[rt.actionParam]
	}
	if rest, ok := values["rest"]; ok && rt.typ == "registry-module" {
		// The legacy registry routes: actions/delete/{org}/{name}/… and
		// {org}/{name}/{provider}/versions.
		parts := strings.Split(rest, "/")
		if len(parts) >= 3 && parts[0] == "actions" {
			e.Resource.Action, e.Resource.ID = parts[1], strings.Join(parts[2:], "/")
		} else if len(parts) > 1 && parts[len(parts)-1] == "versions" {
			e.Resource.Action, e.Resource.ID = "create-version", strings.Join(parts[:len(parts)-1], "/")
		}
	}
	if rt.parentType != "" {
		e.Resource.Meta["parent-type"] = rt.parentType
		e.Resource.Meta["parent-id"] = values[rt.parentParam]
	}
	if rt.create {
		if d := doc(); d != nil && d.Data.ID != "" {
			e.Resource.ID = d.Data.ID
		}
	}
	if ws := r.URL.Query().Get("filter[workspace][name]"); ws != "" {
		e.Resource.Meta["workspace-name"] = ws
	}
	if e.Resource.ID == "" {
		// A singleton (an organization's token) or a create whose response
		// names nothing: name it by its parent.
		e.Resource.ID = values[rt.parentParam]
	}
	return e
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// pathValues matches path against the pattern's segments.
func pathValues(pattern, path string) map[string]string {
	_, pp, _ := strings.Cut(pattern, " ")
	psegs := strings.Split(strings.Trim(pp, "/"), "/")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	out := map[string]string{}
	for i, ps := range psegs {
		name, ok := paramName(ps)
		if !ok || i >= len(segs) {
			continue
		}
		if strings.HasSuffix(ps, "...}") {
			out[name] = strings.Join(segs[i:], "/")
			break
		}
		out[name] = segs[i]
	}
	return out
}

// recordingWriter notes the status and, when asked, keeps the start of the
// body (a create's response, to learn the new resource's ID).
type recordingWriter struct {
	http.ResponseWriter
	status  int
	capture bool
	buf     bytes.Buffer
	parsed  *responseDoc
	done    bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.capture && w.buf.Len() < maxCapture {
		w.buf.Write(b[:min(len(b), maxCapture-w.buf.Len())])
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes through.
func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// responseDoc is the part of a JSON:API response the Recorder reads: the
// resource's ID and relationships, never its attributes.
type responseDoc struct {
	Data struct {
		ID            string `json:"id"`
		Relationships map[string]struct {
			Data json.RawMessage `json:"data"`
		} `json:"relationships"`
	} `json:"data"`
}

func (d *responseDoc) relID(name string) string {
	rel, ok := d.Data.Relationships[name]
	if !ok {
		return ""
	}
	var ref struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(rel.Data, &ref) != nil {
		return ""
	}
	return ref.ID
}

func (w *recordingWriter) doc() *responseDoc {
	if w.done {
		return w.parsed
	}
	w.done = true
	var d responseDoc
	if w.buf.Len() > 0 && json.Unmarshal(w.buf.Bytes(), &d) == nil {
		w.parsed = &d
	}
	return w.parsed
}
