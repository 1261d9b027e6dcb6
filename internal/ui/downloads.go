package ui

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
)

// registerDownloads adds the routes of the files a page offers to
// download: a state version's raw state (the states page) and a run
// phase's whole log (the run page).
//
// Each asks what the API asks for the same data: a state download asks
// StateRead on the workspace (GET /api/v2/state-versions/{id}/download),
// a log asks what reading the run asks (the log stream's loadRun). Both
// are attachments the browser never renders: no-store, nosniff.
func (u *UI) registerDownloads(mux *http.ServeMux) {
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/states/{sv}/download", u.downloadState)
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/runs/{run}/logs/{phase}/raw", u.downloadLog)
}

// stateDownloadRoute is the API route a state download mirrors, for the
// audit trail: the API records it as a sensitive read.
const stateDownloadRoute = "GET /api/v2/state-versions/{id}/download"

// downloadState serves a state version of the page's workspace as it was
// uploaded. A version of another workspace is not found here; one whose
// content is gone (set aside, deleted, not finalized yet) is the error
// page saying why.
func (u *UI) downloadState(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, _, ok := u.workspaceAllowing(w, r, authz.StateRead)
	if !ok {
		return
	}
	id := r.PathValue("sv")
	v, err := u.o.States.Get(ctx, id)
	if err != nil && core.KindOf(err) != core.KindNotFound {
		u.fail(w, r, err)
		return
	}
	if err != nil || v.WorkspaceID != ws.ID {
		u.fail(w, r, core.NotFound("state version %q not found in workspace %q", id, ws.Name))
		return
	}
	// Content does no access check: the version was read, through Get,
	// as one of this workspace's, which the caller may read state of.
	rc, size, err := u.o.States.Content(ctx, v.ID, false)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	defer rc.Close()
	setDownloadHeaders(w.Header(), "application/json", fmt.Sprintf("%s-%d.tfstate", ws.Name, v.Serial))
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, rc); err != nil {
		u.o.Logger.WarnContext(ctx, "downloading a state version", "state_version", v.ID, "error", err)
	}
	// Recorded as the API records its download (a sensitive read that
	// answered 200), even when the copy broke off: state went out.
	u.record(r, ws.Organization, stateDownloadRoute, http.StatusOK, "", "id", v.ID)
}

// downloadLog serves a run phase's whole log as terraform wrote it (its
// JSON log lines as they are), without the log's STX/ETX framing.
func (u *UI) downloadLog(w http.ResponseWriter, r *http.Request) {
	rn, _, err := u.loadRun(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	phase := r.PathValue("phase")
	id, err := phaseLogID(rn, phase)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	b, err := u.o.Runs.ReadLog(r.Context(), id, 0, 0)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if len(b) == 0 {
		u.fail(w, r, core.NotFound("run %s's %s has no log yet", rn.ID, phase))
		return
	}
	text, _ := unframe(b)
	setDownloadHeaders(w.Header(), "text/plain; charset=utf-8", fmt.Sprintf("%s-%s.log", rn.ID, phase))
	w.Header().Set("Content-Length", strconv.Itoa(len(text)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, text)
	}
}

// phaseLogID is the ID of the log of rn's phase ("plan" or "apply"; any
// other is not found).
func phaseLogID(rn *run.Run, phase string) (string, error) {
	var id string
	switch phase {
	case "plan":
		id = rn.Plan.ID
	case "apply":
		id = rn.Apply.ID
	default:
		return "", core.NotFound("a run has a plan and an apply log, not %q", phase)
	}
	if id == "" {
		return "", core.NotFound("run %s has no %s", rn.ID, phase)
	}
	return id, nil
}

// setDownloadHeaders makes a response a file to save as filename (made
// safe: letters, digits, dot, dash and underscore), never kept by a
// cache nor sniffed into something a browser would render.
func setDownloadHeaders(h http.Header, contentType, filename string) {
	h.Set("Content-Type", contentType)
	h.Set("Content-Disposition", `attachment; filename="`+safeFilename(filename)+`"`)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// safeFilename replaces every byte of name but [A-Za-z0-9._-] with "_",
// so that it cannot end the header's quoted string, name a path or start
// with a dot.
func safeFilename(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.' && i > 0:
		default:
			b[i] = '_'
		}
	}
	return string(b)
}
