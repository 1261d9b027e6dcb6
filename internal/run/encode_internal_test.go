package run

import (
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// TestRunDocumentMatchesJSONAPI holds tfeapi's encoder to hashicorp/
// jsonapi's bytes for the run document, which clients poll all through a
// run: every field set, none, and its included plan, apply and comments.
func TestRunDocumentMatchesJSONAPI(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 8, 7, 6, time.FixedZone("x", -3600))
	later := at.Add(time.Minute)
	plan := &jsonPlan{ID: "plan-1", HasChanges: true, LogReadURL: "https://h.test/logs/x?sig=a&b=<c>", ResourceAdditions: 20,
		Status: "finished", StatusTimestamps: map[string]string{"started-at": "2026-11-27T08:08:07Z", "finished-at": "x"}, GeneratedConfig: true}
	apply := &jsonApply{ID: "apply-1", LogReadURL: "u", ResourceChanges: 1, ResourceDestructions: 2, ResourceImports: 3, Status: "finished",
		StatusTimestamps: map[string]string{}}
	comment := &jsonComment{ID: "wsc-1", Body: "ok <b>", CreatedAt: &at, RunEvent: &jsonEventRef{ID: "re-1"}}
	full := &jsonRun{
		ID: "run-1", Actions: &jsonRunActions{IsCancelable: true, IsConfirmable: true, IsDiscardable: true, IsForceCancelable: true},
		AutoApply: true, AllowEmptyApply: true, DebuggingMode: true, CanceledAt: &at, CreatedAt: createdAtText(at), ForceCancelAvailableAt: &later,
		HasChanges: true, IsDestroy: true, Message: "Queued \"manually\" using Terraform\n", Permissions: &jsonRunPermissions{CanApply: true, CanForceExecute: true},
		PositionInQueue: 3, PlanOnly: true, Refresh: true, RefreshOnly: true, ReplaceAddrs: []string{"a.b"}, InvokeActionAddrs: []string{"action.x"},
		PolicyPaths: []string{"p"}, SavePlan: true, Source: "tfe-api", Status: "applied", StatusTimestamps: map[string]string{"applied-at": "t", "plan-queued-at": "u"},
		TargetAddrs: []string{"t"}, TerraformVersion: "1.11.4", TriggerReason: "manual", Variables: []RunVar{{Key: "k", Value: `"v"`}, {Key: "s", Sensitive: true}},
		Workspace: &jsonRef{ID: "ws-1"}, ConfigurationVersion: &jsonCVRef{ID: "cv-1"}, Plan: plan, Apply: apply,
		CreatedBy: &jsonUserRef{ID: "user-1"}, ConfirmedBy: &jsonUserRef{ID: "user-2"}, RunEvents: []*jsonEventRef{{ID: "re-1"}, {ID: "re-2"}},
		TaskStages: []*jsonTaskStageRef{{ID: "ts-1"}}, PolicyChecks: []*jsonRef{}, Comments: []*jsonComment{comment},
	}
	for name, c := range map[string]struct {
		run      *jsonRun
		included []any
	}{
		"every field set":        {full, nil},
		"nothing set":            {&jsonRun{ID: "run-2"}, nil},
		"plan, apply, comments":  {full, []any{plan, apply, []*jsonComment{comment}}},
		"empty lists, nil times": {&jsonRun{ID: "run-3", RunEvents: []*jsonEventRef{}, Variables: []RunVar{}, StatusTimestamps: map[string]string{}}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tfeapi.CheckEncoding(c.run, c.included...); err != nil {
				t.Fatal(err)
			}
		})
	}
}
