package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/variable"
)

// servesModuleTests answers 404 when this server runs no module tests.
func (u *UI) servesModuleTests(w http.ResponseWriter, r *http.Request) bool {
	if u.o.ModuleTests == nil {
		u.fail(w, r, core.NotFound("module tests are not served here"))
		return false
	}
	return true
}

// testsPagePath is the page of module p's tests, or (with a run's ID) of
// one test run.
func testsPagePath(p moduletest.Path, run ...string) string {
	return orgPath(p.Organization, append([]string{"registry", "modules", "private", p.Namespace, p.Name, p.Provider, "tests"}, run...)...)
}

// testPath is the module of a module test page.
func testPath(r *http.Request) moduletest.Path {
	return moduletest.Path{Organization: r.PathValue("org"), Registry: "private", Namespace: r.PathValue("ns"),
		Name: r.PathValue("name"), Provider: r.PathValue("provider")}
}

// testVar is a module's test variable as its page shows it: a sensitive
// one's value never.
type testVar struct {
	ID, Key, Value string
	Sensitive      bool
}

// moduleTests lists a module's test runs, newest first, and says where
// they run; to those who may run its tests, it also turns them on or off,
// chooses where they run and keeps its test variables.
func (u *UI) moduleTests(w http.ResponseWriter, r *http.Request) {
	u.showModuleTests(w, r, http.StatusOK, "")
}

// testVarForm is what the add test variable form was given, shown again
// after a refusal: all of it but a value marked sensitive, which never
// goes back to the browser.
type testVarForm struct {
	Key, Value string
	Sensitive  bool
}

func (u *UI) showModuleTests(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	u.showModuleTestsForm(w, r, status, formErr, testVarForm{})
}

// showModuleTestsForm renders a module's tests page with formErr (a
// refusal) above it and form in the add test variable form.
func (u *UI) showModuleTestsForm(w http.ResponseWriter, r *http.Request, status int, formErr string, form testVarForm) {
	if !u.servesModuleTests(w, r) {
		return
	}
	ctx := r.Context()
	p := testPath(r)
	runs, total, err := u.o.ModuleTests.List(ctx, p, 0, 50)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	mod, err := u.o.Registry.Get(ctx, p.Organization, p.Registry, p.Namespace, p.Name, p.Provider)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	pool, pools, err := u.testPools(ctx, p.Organization, mod.TestsAgentPoolID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	// -cloud-run names the module as a module source does: the host
	// terraform accepts (moduleSourceHost), the module page's.
	host, _ := moduleSourceHost(u.o.Hostname)
	d := map[string]any{"Module": p, "Runs": runs, "Total": total, "Enabled": mod.TestsEnabled, "Error": formErr,
		"Path": testsPagePath(p), "PoolID": mod.TestsAgentPoolID, "Pool": pool, "Pools": pools,
		"Hostname": host, "VarForm": form}
	if m, err := u.o.ModuleTests.ModuleForTests(ctx, p); err == nil {
		// Sensitive values are not even opened: the page never shows them.
		vars, err := u.o.Variables.RedactedModuleTestVariables(ctx, m.Organization, m.ID)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		view := make([]testVar, len(vars))
		for i, v := range vars {
			view[i] = testVar{ID: v.ID, Key: v.Key, Value: v.Value, Sensitive: v.Sensitive}
		}
		d["Manage"], d["Vars"] = true, view
	}
	u.render(w, r, status, "moduletests", "Tests of "+p.Name+"/"+p.Provider, p.Organization, d)
}

// testPools names the agent pool poolID a module's tests run on ("" when
// they run on the server; the ID when the pool is not listed) and lists
// organization org's pools, the choices of the page's execution form
// (none without an agent pool service).
func (u *UI) testPools(ctx context.Context, org, poolID string) (string, []*agent.Pool, error) {
	if u.o.AgentPools == nil {
		return poolID, nil, nil
	}
	pools, err := u.o.AgentPools.List(ctx, org)
	if err != nil {
		return "", nil, err
	}
	name := poolID
	for _, p := range pools {
		if p.ID == poolID {
			name = p.Name
		}
	}
	return name, pools, nil
}

// moduleTestsAction turns a module's tests on or off, chooses where they
// run (the server or an agent pool), or adds or deletes a test variable,
// as the API's module update and test variable routes do (the same
// services, the same checks).
func (u *UI) moduleTestsAction(w http.ResponseWriter, r *http.Request) {
	if !u.servesModuleTests(w, r) {
		return
	}
	ctx := r.Context()
	p := testPath(r)
	m, err := u.o.ModuleTests.ModuleForTests(ctx, p)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	vals := []string{"org", p.Organization, "registry", p.Registry, "ns", p.Namespace, "name", p.Name, "provider", p.Provider}
	var route, created string
	answer := http.StatusOK
	var form testVarForm
	switch r.PathValue("action") {
	case "enable", "disable":
		on := r.PathValue("action") == "enable"
		_, err = u.o.Registry.Update(ctx, p.Organization, p.Registry, p.Namespace, p.Name, p.Provider, registry.UpdateOptions{TestConfig: &registry.TestConfig{TestsEnabled: &on}})
		route = "PATCH /api/v2/organizations/{org}/registry-modules/{registry}/{ns}/{name}/{provider}"
	case "execution":
		// The form's choice is a pool's ID, or "" for the server: the
		// test-config the API takes for either.
		mode, pool := registry.TestsRemote, r.PostFormValue("agent-pool")
		tc := registry.TestConfig{AgentExecutionMode: &mode}
		if pool != "" {
			mode, tc.AgentPoolID = registry.TestsAgent, &pool
		}
		_, err = u.o.Registry.Update(ctx, p.Organization, p.Registry, p.Namespace, p.Name, p.Provider, registry.UpdateOptions{TestConfig: &tc})
		route = "PATCH /api/v2/organizations/{org}/registry-modules/{registry}/{ns}/{name}/{provider}"
	case "add-variable":
		key, value, sensitive := strings.TrimSpace(r.PostFormValue("key")), r.PostFormValue("value"), r.PostFormValue("sensitive") == "on"
		form = testVarForm{Key: r.PostFormValue("key"), Sensitive: sensitive}
		if !sensitive {
			form.Value = value
		}
		var v *variable.Variable
		v, err = u.o.Variables.CreateModuleTestVariable(ctx, m.Organization, m.ID, variable.VarOptions{Key: &key, Value: &value, Sensitive: &sensitive})
		if err == nil {
			created = v.ID
		}
		route, answer = "POST "+moduletest.Base+"/vars", http.StatusCreated
	case "delete-variable":
		id := r.PostFormValue("variable")
		err = u.o.Variables.DeleteModuleTestVariable(ctx, m.Organization, m.ID, id)
		route, answer = "DELETE "+moduletest.Base+"/vars/{var}", http.StatusNoContent
		vals = append(vals, "var", id)
	default:
		u.fail(w, r, core.NotFound("a module's tests can be enabled, disabled, moved (execution), or get or lose a variable, not %q", r.PathValue("action")))
		return
	}
	if err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showModuleTestsForm(w, r, status, formErr, form)
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, p.Organization, route, answer, created, vals...)
	http.Redirect(w, r, testsPagePath(p), http.StatusSeeOther)
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
	if !u.servesModuleTests(w, r) {
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
		"Path": testsPagePath(p, tr.ID), "Error": formErr})
}

// moduleTestAction cancels or force-cancels a test run, as the API's
// cancel and force-cancel do (the service decides who may).
func (u *UI) moduleTestAction(w http.ResponseWriter, r *http.Request) {
	if !u.servesModuleTests(w, r) {
		return
	}
	p, id, action := testPath(r), r.PathValue("id"), r.PathValue("action")
	if action != "cancel" && action != "force-cancel" {
		u.fail(w, r, core.NotFound("a test run can be canceled or force-canceled, not %q", action))
		return
	}
	if err := u.o.ModuleTests.Cancel(r.Context(), p, id, action == "force-cancel"); err != nil {
		u.failForm(w, r, err, u.showModuleTest, http.StatusConflict, core.KindConflict, core.KindInvalid)
		return
	}
	u.record(r, p.Organization, "POST "+moduletest.Base+"/test-runs/{id}/"+action, http.StatusAccepted, "",
		"org", p.Organization, "registry", p.Registry, "ns", p.Namespace, "name", p.Name, "provider", p.Provider, "id", id)
	http.Redirect(w, r, testsPagePath(p, id), http.StatusSeeOther)
}
