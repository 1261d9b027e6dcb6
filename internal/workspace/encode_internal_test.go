package workspace

import (
	"testing"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// TestWorkspaceEncoderMatchesJSONAPI holds tfeapi's encoder to the
// generic one's bytes (hashicorp/jsonapi, then encoding/json) over
// workspaces with every field set, with none, and with each kind of lock
// holder and edge of the wire form (escaped strings, explicit null
// attributes, empty lists): the workspace is the API's hottest document.
func TestWorkspaceEncoderMatchesJSONAPI(t *testing.T) {
	at := time.Date(2026, 11, 25, 13, 4, 5, 123456789, time.FixedZone("x", 3600))
	full := func() *jsonWorkspace {
		return &jsonWorkspace{
			ID: "ws-full", Actions: &jsonActions{IsDestroyable: true},
			AllowDestroyPlan: true, AssessmentsEnabled: true, AutoApply: true, AutoApplyRunTrigger: true,
			AutoDestroyAt:               jsonapi.NewNullableAttrWithValue(at),
			AutoDestroyActivityDuration: jsonapi.NewNullableAttrWithValue("14d"),
			CanQueueDestroyPlan:         true, CreatedAt: at, Description: `a "quoted" <b>&amp; ünïcödé\n line` + "\u2028\x01\t",
			Environment: "default", ExecutionMode: "agent", FileTriggersEnabled: true, GlobalRemoteState: true,
			ProjectRemoteState: true, InheritsProjectAutoDestroy: true, Locked: true, MigrationEnvironment: "m",
			Name: "full", NoCodeUpgradeAvailable: true, Operations: true,
			Permissions: &jsonPermissions{CanDestroy: true, CanForceUnlock: true, CanLock: true, CanManageRunTasks: true, CanManageHYOK: true,
				CanQueueApply: true, CanQueueDestroy: true, CanQueueRun: true, CanReadSettings: true, CanReadStateVersions: true,
				CanReadVariable: true, CanUnlock: true, CanUpdate: true, CanUpdateVariable: true, CanForceDelete: true},
			QueueAllRuns: true, SpeculativeEnabled: true, Source: "tfe-api", SourceName: "n", SourceURL: "https://x.test/a?b=c&d=<e>",
			SourceModuleID: "mod-1", StructuredRunOutputEnabled: true, TerraformVersion: "~> 1.11", TriggerPrefixes: []string{"a/", "b"},
			TriggerPatterns: []string{"**/*.tf"}, WorkingDirectory: "dir", UpdatedAt: at.Add(time.Hour), ResourceCount: 7,
			ApplyDurationAverage: 12, PlanDurationAverage: 34, PolicyCheckFailures: 1, RunFailures: 2, RunsCount: 99,
			TagNames: []string{"x", "y:z"}, SettingOverwrites: &jsonSettingOverwrites{ExecutionMode: true, AgentPool: true},
			AgentPool: &jsonRef{ID: "apool-1"}, CurrentRun: &jsonRunRef{ID: "run-1"}, CurrentConfigVersion: &jsonCVRef{ID: "cv-1"},
			CurrentAssessment: &jsonAssessmentRef{ID: "asmtres-1"}, CurrentStateVersion: &jsonStateVersionRef{ID: "sv-1"},
			Organization: &jsonOrgRef{Name: "org"}, Project: &jsonProjectRef{ID: "prj-1", Name: "p", Description: "d"},
			LockedBy: &jsonLockedBy{User: &jsonUserRef{ID: "user-1"}},
			Outputs:  []*jsonOutput{{ID: "wsout-1", Name: "o", Type: "string", Value: "v"}, {ID: "wsout-2", Sensitive: true}},
			Vars:     []*jsonVarRef{{ID: "var-1"}, {ID: "var-2"}}, SSHKey: &jsonSSHKeyRef{ID: "sshkey-1"},
			EffectiveTagBindings: []*jsonEffectiveBinding{{ID: "tb-1", Key: "k", Value: "v"}, {ID: "tb-2", Key: "k2"}},
			links:                &jsonapi.Links{"self": "/api/v2/organizations/org/workspaces/full", "self-html": "/app/org/workspaces/full"},
		}
	}
	cases := map[string]*jsonWorkspace{
		"every field set": full(),
		"nothing set":     {ID: "ws-empty", Outputs: []*jsonOutput{}, Vars: []*jsonVarRef{}, links: &jsonapi.Links{"self": "/s", "self-html": "/h"}},
		"nil lists":       {ID: "ws-nil", links: &jsonapi.Links{"self": "", "self-html": "<&>"}},
	}
	run := full()
	run.LockedBy, run.AutoDestroyAt, run.AutoDestroyActivityDuration = &jsonLockedBy{Run: &jsonRunRef{ID: "run-9"}}, jsonapi.NewNullNullableAttr[time.Time](), jsonapi.NewNullNullableAttr[string]()
	run.EffectiveTagBindings = []*jsonEffectiveBinding{}
	cases["locked by a run, null attributes, no bindings"] = run
	team := full()
	team.LockedBy, team.Actions, team.Permissions, team.SettingOverwrites = &jsonLockedBy{Team: &jsonTeamRef{ID: "team-1"}}, nil, nil, nil
	team.TagNames, team.TriggerPatterns, team.TriggerPrefixes = []string{}, nil, []string{}
	cases["locked by a team, nil objects"] = team
	invalid := full()
	invalid.Name, invalid.Description = "bad\xffutf8", "\u2029"
	cases["invalid UTF-8"] = invalid

	for name, j := range cases {
		t.Run(name, func(t *testing.T) {
			if err := tfeapi.CheckEncoding(j); err != nil {
				t.Fatal(err)
			}
		})
	}
}
