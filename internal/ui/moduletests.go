package ui

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
)

// testPath is the module of a module test page.
func testPath(r *http.Request) moduletest.Path {
	return moduletest.Path{Organization: r.PathValue("org"), Registry: "private", Namespace: r.PathValue("ns"),
		Name: r.PathValue("name"), Provider: r.PathValue("provider")}
}

// moduleTests lists a module's test runs, newest first.
func (u *UI) moduleTests(w http.ResponseWriter, r *http.Request) {
	if u.o.ModuleTests == nil {
		u.fail(w, r, core.NotFound("module tests are not served here"))
		return
	}
	p := testPath(r)
	runs, total, err := u.o.ModuleTests.List(r.Context(), p, 0, 50)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "moduletests", "Tests of "+p.Name+"/"+p.Provider, p.Organization, map[string]any{"Module": p, "Runs": runs, "Total": total})
}

// logLine is one line of a test run's log as the page shows it.
type logLine struct {
	Text  string
	Level string // terraform's @level ("" for a line that is not JSON)
}

// testLog turns a test run's log (terraform test's JSON lines, and the
// executor's own plain lines) into what a reader wants: each JSON line's
// @message, with its diagnostic's detail.
func testLog(raw []byte) []logLine {
	raw = bytes.Trim(raw, "\x02\x03")
	var out []logLine
	for _, l := range bytes.Split(raw, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var m struct {
			Level      string `json:"@level"`
			Message    string `json:"@message"`
			Diagnostic *struct {
				Detail string `json:"detail"`
			} `json:"diagnostic"`
		}
		if json.Unmarshal(l, &m) != nil || m.Message == "" {
			out = append(out, logLine{Text: string(l)})
			continue
		}
		text := m.Message
		if m.Diagnostic != nil && m.Diagnostic.Detail != "" {
			text += ": " + m.Diagnostic.Detail
		}
		out = append(out, logLine{Text: text, Level: m.Level})
	}
	return out
}

// moduleTest shows one test run and its log.
func (u *UI) moduleTest(w http.ResponseWriter, r *http.Request) {
	u.showModuleTest(w, r, http.StatusOK, "")
}

// showModuleTest renders a test run's page, with formErr (the refusal of
// an action) above it, and the actions the caller may take: those who
// may run the module's tests cancel a queued or running run, and kill
// one whose cancel terraform has not yet answered.
func (u *UI) showModuleTest(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	if u.o.ModuleTests == nil {
		u.fail(w, r, core.NotFound("module tests are not served here"))
		return
	}
	ctx := r.Context()
	p := testPath(r)
	tr, err := u.o.ModuleTests.Get(ctx, p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	raw, err := u.o.Runs.ReadLog(ctx, tr.ID, 0, 0)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	_, err = u.o.ModuleTests.ModuleForTests(ctx, p)
	manage := err == nil
	can := map[string]bool{
		"cancel":       manage && (tr.Status == moduletest.StatusQueued || tr.Status == moduletest.StatusRunning && tr.Signal == moduletest.NoSignal),
		"force-cancel": manage && tr.Status == moduletest.StatusRunning && tr.Signal == moduletest.SignalCancel,
	}
	u.render(w, r, status, "moduletest", "Test run "+tr.ID, p.Organization, map[string]any{"Module": p, "Run": tr, "Log": testLog(raw), "Can": can,
		"Path": orgPath(p.Organization, "registry", "modules", "private", p.Namespace, p.Name, p.Provider, "tests", tr.ID), "Error": formErr})
}

// moduleTestAction cancels or force-cancels a test run, as the API's
// cancel and force-cancel do (the service decides who may).
func (u *UI) moduleTestAction(w http.ResponseWriter, r *http.Request) {
	if u.o.ModuleTests == nil {
		u.fail(w, r, core.NotFound("module tests are not served here"))
		return
	}
	p, id, action := testPath(r), r.PathValue("id"), r.PathValue("action")
	if action != "cancel" && action != "force-cancel" {
		u.fail(w, r, core.NotFound("a test run can be canceled or force-canceled, not %q", action))
		return
	}
	if err := u.o.ModuleTests.Cancel(r.Context(), p, id, action == "force-cancel"); err != nil {
		if k := core.KindOf(err); k == core.KindConflict || k == core.KindInvalid {
			u.showModuleTest(w, r, http.StatusConflict, err.Error())
			return
		}
		u.fail(w, r, err)
		return
	}
	u.record(r, p.Organization, "POST "+moduletest.Base+"/test-runs/{id}/"+action, http.StatusAccepted, "",
		"org", p.Organization, "registry", p.Registry, "ns", p.Namespace, "name", p.Name, "provider", p.Provider, "id", id)
	http.Redirect(w, r, orgPath(p.Organization, "registry", "modules", "private", p.Namespace, p.Name, p.Provider, "tests", id), http.StatusSeeOther)
}
