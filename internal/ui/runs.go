package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/policy"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runtask"
)

// change is one resource change of a plan.
type change struct {
	Address string
	Actions string
	// Values are the planned attributes known before apply, as
	// name = value (a sensitive one as (sensitive value)): what a text
	// log's diff shows and terraform's JSON log lines do not.
	Values []string
}

type stageView struct {
	Stage   *runtask.TaskStageRecord
	Results []*runtask.Result
	// Policies are the stage's policy set outcomes; CanOverride says the
	// caller may override the stage (it awaits an override and they have
	// policy-overrides).
	Policies    []setOutcomeView
	CanOverride bool
	// Overridden says a user overrode the stage: it passed after it
	// awaited an override, which only an override moves on to passed
	// (runtask's stage moves). Its status says passed; its status
	// timestamps keep when it awaited.
	Overridden bool
}

// setOutcomeView is a policy set's outcome with SetLink, the set's page
// ("" when the set is gone, or the caller may not read the
// organization's sets).
type setOutcomeView struct {
	*policy.SetOutcome
	SetLink string
}

type runData struct {
	Run     *run.Run
	Path    string
	Changes []change
	Stages  []stageView
	// PlanLog and ApplyLog are the logs so far (without the STX/ETX
	// framing); *Live tells whether they may still grow.
	PlanLog, ApplyLog   string
	PlanLive, ApplyLive bool
	// PlanOffset and ApplyOffset are how much of each log the page
	// holds: the live stream goes on from there.
	PlanOffset, ApplyOffset int
	Can                     map[string]bool
	Error                   string
	// Commit is where the run's configuration came from, for a run of
	// a commit.
	Commit *configversion.Ingress
	// ApplyView is what the page shows of the apply: "" nothing (a
	// plan-only run), "log" its status and log (it ran, runs or may
	// still run), "skipped" that it will not run.
	ApplyView string
	// Workspace and WorkspaceName are the run's workspace's page and name.
	Workspace, WorkspaceName string
	// Creator is the username of the user who started the run ("" when
	// a token or the server did, or the user is gone); Source says how
	// it was started.
	Creator, Source string
	// Comments are the run's comments, oldest first (those given with
	// confirm, discard or cancel among them).
	Comments []commentView
}

// commentView is a run's comment as the page shows it.
type commentView struct {
	Body, Author string
	At           time.Time
}

// runSources name how a run was started (its source, as the API spells
// it), as HCP Terraform's run page says it.
var runSources = map[string]string{
	"tfe-ui":                    "the UI",
	"tfe-api":                   "the API",
	"terraform+cloud":           "the CLI",
	"terraform":                 "the CLI",
	"tfe-configuration-version": "a configuration version",
	"tfe-run-trigger":           "a run trigger",
}

// username is the username of user ID id, "" when id names no user (a
// token, a run) or the user is gone.
func (u *UI) username(ctx context.Context, id string) string {
	if u.o.Teams == nil || !core.HasPrefix(id, core.PrefixUser) {
		return ""
	}
	if usr, err := u.o.Teams.User(ctx, id); err == nil {
		return usr.Username
	}
	return ""
}

// creator says who started a run, from its CreatedBy (the user, team,
// run or token whose token started it): a username; "team NAME" (or
// "a team token" when the caller may not see the team); "run ID" for a
// run's own token; "an API token" for an organization's or another
// token; "" for the server's own runs and users since gone.
func (u *UI) creator(ctx context.Context, id string) string {
	switch {
	case id == "":
		return ""
	case core.HasPrefix(id, core.PrefixUser):
		return u.username(ctx, id)
	case core.HasPrefix(id, core.PrefixTeam):
		if u.o.Teams != nil {
			if t, err := u.o.Teams.Get(ctx, id); err == nil {
				return "team " + t.Name
			}
		}
		return "a team token"
	case core.HasPrefix(id, core.PrefixRun):
		return "run " + id
	}
	return "an API token"
}

// applyView tells what the run page shows of rn's apply, given whether
// its log has any output: the apply's own status when it says the apply
// will never run (unreachable), else the run's (a final run whose apply
// never started: errored, discarded, canceled, planned and finished), so
// that a run whose apply status still says pending shows right too.
func applyView(rn *run.Run, logged bool) string {
	switch {
	case rn.PlanOnly:
		return ""
	case logged:
		return "log"
	case rn.Apply.Status == run.PhaseUnreachable:
		return "skipped"
	case rn.Status.Final() && (rn.Apply.Status == run.PhasePending || rn.Apply.Status == run.PhaseQueued || rn.Apply.Status == ""):
		return "skipped"
	}
	return "log"
}

// loadRun finds the page's run inside the page's workspace.
func (u *UI) loadRun(r *http.Request) (*run.Run, authz.Resource, error) {
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		return nil, res, err
	}
	rn, err := u.o.Runs.Get(r.Context(), r.PathValue("run"))
	if err != nil || rn.WorkspaceID != ws.ID {
		return nil, res, core.NotFound("run %q not found in workspace %q", r.PathValue("run"), ws.Name)
	}
	res.RunID = rn.ID
	if err := authz.Allows(r.Context(), authz.RunRead, res); err != nil {
		return nil, res, core.NotFound("run %q not found", rn.ID)
	}
	return rn, res, nil
}

func (u *UI) run(w http.ResponseWriter, r *http.Request) { u.showRun(w, r, http.StatusOK, "") }

func (u *UI) showRun(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	ctx := r.Context()
	rn, res, err := u.loadRun(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := runData{Run: rn, Path: orgPath(rn.Organization, "workspaces", r.PathValue("name"), "runs", rn.ID), Error: formErr,
		Workspace: orgPath(rn.Organization, "workspaces", r.PathValue("name")), WorkspaceName: r.PathValue("name"), Creator: u.creator(ctx, rn.CreatedBy), Source: runSources[rn.Source]}
	if d.Source == "" {
		d.Source = rn.Source
	}
	comments, err := u.o.Runs.Comments(ctx, rn.ID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	names := map[string]string{}
	for _, c := range comments {
		n, ok := names[c.Actor]
		if !ok {
			n = u.username(ctx, c.Actor)
			names[c.Actor] = n
		}
		d.Comments = append(d.Comments, commentView{Body: c.Body, Author: n, At: core.FromMicros(c.CreatedAt)})
	}
	apply := allowed(ctx, authz.RunApply, res)
	d.Can = map[string]bool{
		"apply":   apply && rn.Status.Confirmable() && !rn.PlanOnly,
		"discard": apply && rn.Status.Discardable(),
		"cancel":  allowed(ctx, authz.RunPlan, res) && rn.Status.Cancelable(),
	}
	if u.o.ConfigVersions != nil && rn.ConfigurationVersionID != "" {
		if cv, err := u.o.ConfigVersions.Get(ctx, rn.ConfigurationVersionID); err == nil {
			d.Commit = cv.Ingress
		}
	}
	var done bool
	if d.PlanLog, d.PlanOffset, done, err = u.readLog(r, rn.Plan.ID); err != nil {
		u.fail(w, r, err)
		return
	}
	d.PlanLive = !done && !rn.Status.Final()
	if d.ApplyLog, d.ApplyOffset, done, err = u.readLog(r, rn.Apply.ID); err != nil {
		u.fail(w, r, err)
		return
	}
	d.ApplyLive = !done && !rn.Status.Final() && !rn.PlanOnly
	d.ApplyView = applyView(rn, d.ApplyOffset > 0)
	if raw, err := u.redactedPlan(ctx, rn); err == nil {
		d.Changes = planChanges(raw)
	}
	if u.o.RunTasks != nil {
		stages, results, err := u.o.RunTasks.StagesOfRun(ctx, rn.ID)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		var setIDs []string
		for _, s := range stages {
			v := stageView{Stage: s, Results: results[s.ID]}
			if u.o.Policies != nil {
				outcomes, err := u.o.Policies.StageOutcomes(ctx, s.ID)
				if err != nil {
					u.fail(w, r, err)
					return
				}
				for _, o := range outcomes {
					v.Policies = append(v.Policies, setOutcomeView{SetOutcome: o})
					setIDs = append(setIDs, o.SetID)
				}
			}
			v.CanOverride = s.Status == runtask.StageAwaitingOverride && allowed(ctx, authz.RunOverrideTasks, res)
			_, awaited := s.Timestamps[string(runtask.StageAwaitingOverride)+"-at"]
			v.Overridden = s.Status == runtask.StagePassed && awaited
			d.Stages = append(d.Stages, v)
		}
		if err := u.linkPolicySets(ctx, rn.Organization, setIDs, d.Stages); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	title := "Run " + rn.ID + " · " + r.PathValue("name")
	u.renderPage(w, r, status, "run", page{Title: title, Org: rn.Organization, Data: d,
		Crumbs: []crumb{{Name: r.PathValue("name"), Href: d.Workspace}, {Name: rn.ID}}})
}

// linkPolicySets links the stages' set outcomes to their sets' pages,
// for a caller who reads the organization's policy sets (as the policy
// service asks) and for the sets that still exist.
func (u *UI) linkPolicySets(ctx context.Context, org string, ids []string, stages []stageView) error {
	if len(ids) == 0 || !allowed(ctx, authz.OrgRead, authz.Resource{Organization: org}) {
		return nil
	}
	exists, err := u.o.Policies.ExistingSets(ctx, org, ids)
	if err != nil {
		return err
	}
	for _, st := range stages {
		for i, o := range st.Policies {
			if exists[o.SetID] {
				st.Policies[i].SetLink = orgPath(org, "policy-sets", o.SetID)
			}
		}
	}
	return nil
}

// readLog returns a phase's log so far (its whole lines, terraform's JSON
// log lines as text: legibleLog), its length as stored (the offset to
// follow it from) and whether it has ended.
func (u *UI) readLog(r *http.Request, id string) (string, int, bool, error) {
	b, err := u.o.Runs.ReadLog(r.Context(), id, 0, 0)
	if err != nil {
		return "", 0, false, err
	}
	b = b[:completeLines(b)]
	text, done := unframe(b)
	return legibleLog(text), len(b), done, nil
}

// unframe drops the STX/ETX framing of a log, telling whether ETX ended it.
func unframe(b []byte) (string, bool) {
	done := bytes.HasSuffix(b, []byte{3})
	b = bytes.TrimPrefix(b, []byte{2})
	b = bytes.TrimSuffix(b, []byte{3})
	return string(b), done
}

// planChanges lists the resource changes of a plan's (redacted) JSON.
func planChanges(raw []byte) []change {
	var p struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions        []string                   `json:"actions"`
				After          map[string]json.RawMessage `json:"after"`
				AfterUnknown   map[string]json.RawMessage `json:"after_unknown"`
				AfterSensitive map[string]json.RawMessage `json:"after_sensitive"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	var out []change
	for _, c := range p.ResourceChanges {
		a := strings.Join(c.Change.Actions, ", ")
		if a == "no-op" || a == "read" {
			continue
		}
		ch := change{Address: c.Address, Actions: a}
		names := make([]string, 0, len(c.Change.After))
		for n := range c.Change.After {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v := c.Change.After[n]
			if string(c.Change.AfterUnknown[n]) == "true" || string(v) == "null" {
				continue
			}
			text := string(v)
			if s := string(c.Change.AfterSensitive[n]); s != "" && s != "false" {
				text = "(sensitive value)" // the redacted plan holds a stand-in
			} else if len(text) > 120 {
				text = text[:117] + "..."
			}
			ch.Values = append(ch.Values, n+" = "+text)
		}
		out = append(out, ch)
	}
	return out
}

// runLog streams a phase's log as server-sent events, following it as the
// API's log endpoint does (terraform polls that one): each event carries
// new output; "end" says the phase's log is complete.
func (u *UI) runLog(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rn, _, err := u.loadRun(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	id, err := phaseLogID(rn, r.PathValue("phase"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		u.fail(w, r, fmt.Errorf("ui: response cannot stream"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Start where the page's copy of the log ends, or resume where the
	// browser's EventSource left off.
	var offset int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		offset, _ = strconv.ParseInt(v, 10, 64)
	} else {
		offset, _ = strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	}
	if offset < 0 {
		offset = 0
	}
	fmt.Fprint(w, "retry: 1000\n\n")
	fl.Flush()
	// The loop follows the run as it changes: the request memo would
	// answer its first read of the run forever.
	ctx = core.WithoutMemo(ctx)
	tick := time.NewTicker(u.o.LogPoll)
	defer tick.Stop()
	for {
		b, err := u.o.Runs.ReadLog(ctx, id, offset, 0)
		if err != nil {
			return
		}
		// Whole lines only: a JSON log line is shown once it is whole.
		if b = b[:completeLines(b)]; len(b) > 0 {
			offset += int64(len(b))
			text, done := unframe(b)
			if text != "" {
				writeEvent(w, "", offset, legibleLog(text))
			}
			if done {
				writeEvent(w, "end", offset, "")
				fl.Flush()
				return
			}
			fl.Flush()
		} else if offset == 0 {
			// A phase that will never run (a discarded plan's apply,
			// a finished plan-only run) ends the stream too.
			if cur, err := u.o.Runs.Get(ctx, rn.ID); err == nil && cur.Status.Final() {
				writeEvent(w, "end", offset, "")
				fl.Flush()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func writeEvent(w http.ResponseWriter, event string, id int64, data string) {
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "id: %d\n", id)
	for _, line := range strings.Split(data, "\n") {
		fmt.Fprintf(w, "data: %s\n", line)
	}
	fmt.Fprint(w, "\n")
}

// runAction confirms (apply), discards or cancels a run, with the
// permission the API asks for the same action.
func (u *UI) runAction(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rn, res, err := u.loadRun(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	comment := strings.TrimSpace(r.PostFormValue("comment"))
	var act func() error
	need := authz.RunApply
	route, kv, answer := "POST /api/v2/runs/{id}/actions/{action}", []string{"id", rn.ID, "action", r.PathValue("action")}, http.StatusAccepted
	switch r.PathValue("action") {
	case "override":
		// A task stage awaiting an override (a mandatory policy or task
		// failed). The service knows nothing of the page's run, so the
		// page checks the stage is this run's (another run's stage is not
		// found); the caller's policy-overrides (RunOverrideTasks) is
		// checked below on the run, and again by the service, which also
		// checks the stage awaits an override.
		stageID := r.PostFormValue("stage")
		need = authz.RunOverrideTasks
		route, kv, answer = "POST /api/v2/task-stages/{id}/actions/override", []string{"id", stageID}, http.StatusOK
		act = func() error {
			st, _, err := u.o.RunTasks.Stage(ctx, stageID)
			if err != nil {
				return err
			}
			if st.RunID != rn.ID {
				return core.NotFound("task stage %q not found in run %s", stageID, rn.ID)
			}
			_, err = u.o.RunTasks.Override(ctx, stageID, comment)
			return err
		}
	case "apply":
		act = func() error { return u.o.Runs.Apply(ctx, rn.ID, comment) }
	case "discard":
		act = func() error { return u.o.Runs.Discard(ctx, rn.ID, comment) }
	case "cancel":
		need = authz.RunPlan
		act = func() error { return u.o.Runs.Cancel(ctx, rn.ID, comment) }
	default:
		u.fail(w, r, core.NotFound("a run can be applied, discarded, canceled or its policies overridden, not %q", r.PathValue("action")))
		return
	}
	if err := authz.Allows(ctx, need, res); err != nil {
		u.fail(w, r, err)
		return
	}
	if err := act(); err != nil {
		u.failForm(w, r, err, u.showRun, http.StatusConflict, core.KindConflict, core.KindInvalid)
		return
	}
	u.record(r, rn.Organization, route, answer, "", kv...)
	http.Redirect(w, r, orgPath(rn.Organization, "workspaces", r.PathValue("name"), "runs", rn.ID), http.StatusSeeOther)
}
