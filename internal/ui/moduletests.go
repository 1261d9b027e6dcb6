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
	if u.o.ModuleTests == nil {
		u.fail(w, r, core.NotFound("module tests are not served here"))
		return
	}
	p := testPath(r)
	tr, err := u.o.ModuleTests.Get(r.Context(), p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	raw, err := u.o.Runs.ReadLog(r.Context(), tr.ID, 0, 0)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "moduletest", "Test run "+tr.ID, p.Organization, map[string]any{"Module": p, "Run": tr, "Log": testLog(raw)})
}
