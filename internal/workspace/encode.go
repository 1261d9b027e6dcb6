package workspace

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// The workspace read is the API's hottest response. The generic JSON:API
// encoder (hashicorp/jsonapi, then encoding/json) walks jsonWorkspace by
// reflection into maps of attributes and relationships and encodes those
// again; appendDocument writes the same bytes directly. The test
// TestWorkspaceEncoderMatchesJSONAPI holds the two to the same output
// over workspaces with every field set and none; a response with
// included objects still takes the generic path.

// appendDocument appends {"data": j} as tfeapi.Respond writes it (a
// newline after it, as json.Encoder ends).
func (j *jsonWorkspace) appendDocument(b []byte) []byte {
	b = append(b, `{"data":{"type":"workspaces"`...)
	b = appendID(b, j.ID)
	b = append(b, `,"attributes":{"actions":`...)
	if j.Actions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"is-destroyable":`...)
		b = strconv.AppendBool(b, j.Actions.IsDestroyable)
		b = append(b, '}')
	}
	b = appendBool(b, "allow-destroy-plan", j.AllowDestroyPlan)
	b = appendInt(b, "apply-duration-average", j.ApplyDurationAverage)
	b = appendBool(b, "assessments-enabled", j.AssessmentsEnabled)
	b = appendBool(b, "auto-apply", j.AutoApply)
	b = appendBool(b, "auto-apply-run-trigger", j.AutoApplyRunTrigger)
	if j.AutoDestroyActivityDuration.IsSpecified() {
		b = appendKey(b, "auto-destroy-activity-duration")
		if j.AutoDestroyActivityDuration.IsNull() {
			b = append(b, "null"...)
		} else {
			v, _ := j.AutoDestroyActivityDuration.Get()
			b = appendString(b, v)
		}
	}
	if j.AutoDestroyAt.IsSpecified() {
		b = appendKey(b, "auto-destroy-at")
		if j.AutoDestroyAt.IsNull() {
			b = append(b, "null"...)
		} else {
			v, _ := j.AutoDestroyAt.Get()
			b = appendTime(b, v)
		}
	}
	b = appendBool(b, "can-queue-destroy-plan", j.CanQueueDestroyPlan)
	if !j.CreatedAt.IsZero() { // jsonapi leaves a zero time out
		b = appendKey(b, "created-at")
		b = appendTime(b, j.CreatedAt)
	}
	b = appendStr(b, "description", j.Description)
	b = appendStr(b, "environment", j.Environment)
	b = appendStr(b, "execution-mode", j.ExecutionMode)
	b = appendBool(b, "file-triggers-enabled", j.FileTriggersEnabled)
	b = appendBool(b, "global-remote-state", j.GlobalRemoteState)
	b = appendBool(b, "inherits-project-auto-destroy", j.InheritsProjectAutoDestroy)
	b = appendBool(b, "locked", j.Locked)
	b = appendStr(b, "migration-environment", j.MigrationEnvironment)
	b = appendStr(b, "name", j.Name)
	b = appendBool(b, "no-code-upgrade-available", j.NoCodeUpgradeAvailable)
	b = appendBool(b, "operations", j.Operations)
	b = appendKey(b, "permissions")
	if p := j.Permissions; p == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"can-destroy":`...)
		b = strconv.AppendBool(b, p.CanDestroy)
		b = appendBool(b, "can-force-unlock", p.CanForceUnlock)
		b = appendBool(b, "can-lock", p.CanLock)
		b = appendBool(b, "can-manage-run-tasks", p.CanManageRunTasks)
		b = appendBool(b, "can-manage-hyok", p.CanManageHYOK)
		b = appendBool(b, "can-queue-apply", p.CanQueueApply)
		b = appendBool(b, "can-queue-destroy", p.CanQueueDestroy)
		b = appendBool(b, "can-queue-run", p.CanQueueRun)
		b = appendBool(b, "can-read-settings", p.CanReadSettings)
		b = appendBool(b, "can-read-state-versions", p.CanReadStateVersions)
		b = appendBool(b, "can-read-variable", p.CanReadVariable)
		b = appendBool(b, "can-unlock", p.CanUnlock)
		b = appendBool(b, "can-update", p.CanUpdate)
		b = appendBool(b, "can-update-variable", p.CanUpdateVariable)
		b = appendBool(b, "can-force-delete", p.CanForceDelete)
		b = append(b, '}')
	}
	b = appendInt(b, "plan-duration-average", j.PlanDurationAverage)
	b = appendInt(b, "policy-check-failures", int64(j.PolicyCheckFailures))
	b = appendBool(b, "project-remote-state", j.ProjectRemoteState)
	b = appendBool(b, "queue-all-runs", j.QueueAllRuns)
	b = appendInt(b, "resource-count", int64(j.ResourceCount))
	b = appendInt(b, "run-failures", int64(j.RunFailures))
	b = appendKey(b, "setting-overwrites")
	if o := j.SettingOverwrites; o == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"execution-mode":`...)
		b = strconv.AppendBool(b, o.ExecutionMode)
		b = appendBool(b, "agent-pool", o.AgentPool)
		b = append(b, '}')
	}
	b = appendStr(b, "source", j.Source)
	b = appendStr(b, "source-module-id", j.SourceModuleID)
	b = appendStr(b, "source-name", j.SourceName)
	b = appendStr(b, "source-url", j.SourceURL)
	b = appendBool(b, "speculative-enabled", j.SpeculativeEnabled)
	b = appendBool(b, "structured-run-output-enabled", j.StructuredRunOutputEnabled)
	b = appendStrings(b, "tag-names", j.TagNames)
	b = appendStr(b, "terraform-version", j.TerraformVersion)
	b = appendStrings(b, "trigger-patterns", j.TriggerPatterns)
	b = appendStrings(b, "trigger-prefixes", j.TriggerPrefixes)
	if !j.UpdatedAt.IsZero() { // jsonapi leaves a zero time out
		b = appendKey(b, "updated-at")
		b = appendTime(b, j.UpdatedAt)
	}
	b = appendStr(b, "working-directory", j.WorkingDirectory)
	b = appendInt(b, "workspace-kpis-runs-count", int64(j.RunsCount))

	b = append(b, `},"relationships":{"agent-pool":`...)
	b = appendRef(b, "agent-pools", j.AgentPool != nil, func() string { return j.AgentPool.ID })
	if j.CurrentAssessment != nil {
		b = appendKey(b, "current-assessment-result")
		b = appendRef(b, "assessment-results", true, func() string { return j.CurrentAssessment.ID })
	}
	if j.CurrentConfigVersion != nil {
		b = appendKey(b, "current-configuration-version")
		b = appendRef(b, "configuration-versions", true, func() string { return j.CurrentConfigVersion.ID })
	}
	b = appendKey(b, "current-run")
	b = appendRef(b, "runs", j.CurrentRun != nil, func() string { return j.CurrentRun.ID })
	b = appendKey(b, "current-state-version")
	b = appendRef(b, "state-versions", j.CurrentStateVersion != nil, func() string { return j.CurrentStateVersion.ID })
	if len(j.EffectiveTagBindings) > 0 {
		b = appendKey(b, "effective-tag-bindings")
		b = appendRefs(b, "effective-tag-bindings", len(j.EffectiveTagBindings), func(i int) string { return j.EffectiveTagBindings[i].ID })
	}
	switch l := j.LockedBy; { // jsonapi leaves an unlocked workspace's out
	case l != nil && l.Run != nil:
		b = appendKey(b, "locked-by")
		b = appendRef(b, "runs", true, func() string { return l.Run.ID })
	case l != nil && l.User != nil:
		b = appendKey(b, "locked-by")
		b = appendRef(b, "users", true, func() string { return l.User.ID })
	case l != nil && l.Team != nil:
		b = appendKey(b, "locked-by")
		b = appendRef(b, "teams", true, func() string { return l.Team.ID })
	}
	b = appendKey(b, "organization")
	b = appendRef(b, "organizations", j.Organization != nil, func() string { return j.Organization.Name })
	b = appendKey(b, "outputs")
	b = appendRefs(b, "workspace-outputs", len(j.Outputs), func(i int) string { return j.Outputs[i].ID })
	b = appendKey(b, "project")
	b = appendRef(b, "projects", j.Project != nil, func() string { return j.Project.ID })
	b = appendKey(b, "ssh-key")
	b = appendRef(b, "ssh-keys", j.SSHKey != nil, func() string { return j.SSHKey.ID })
	b = appendKey(b, "vars")
	b = appendRefs(b, "vars", len(j.Vars), func(i int) string { return j.Vars[i].ID })
	b = append(b, '}')
	b = append(b, `,"links":{"self":`...)
	b = appendString(b, (*j.links)["self"].(string))
	b = append(b, `,"self-html":`...)
	b = appendString(b, (*j.links)["self-html"].(string))
	b = append(b, '}')
	return append(b, "}}\n"...)
}

// encodable reports whether appendDocument writes j as the generic
// encoder would: links of exactly self and self-html (as toJSON sets
// them), and a lock holder, if any, named.
func (j *jsonWorkspace) encodable() bool {
	if j.links == nil || j.LockedBy != nil && j.LockedBy.Run == nil && j.LockedBy.User == nil && j.LockedBy.Team == nil {
		return false
	}
	l := *j.links
	_, ok1 := l["self"].(string)
	_, ok2 := l["self-html"].(string)
	return len(l) == 2 && ok1 && ok2
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func appendBool(b []byte, k string, v bool) []byte {
	return strconv.AppendBool(appendKey(b, k), v)
}

func appendInt(b []byte, k string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, k), v, 10)
}

func appendStr(b []byte, k, v string) []byte {
	return appendString(appendKey(b, k), v)
}

// appendStrings writes a list as encoding/json does (null for nil).
func appendStrings(b []byte, k string, vs []string) []byte {
	b = appendKey(b, k)
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	return append(b, ']')
}

// appendTime writes t as jsonapi's iso8601 attributes are.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
	return append(b, '"')
}

// appendRef writes a to-one relationship: {"data":{"type":..,"id":..}},
// or {"data":null} when there is none.
func appendRef(b []byte, typ string, ok bool, id func() string) []byte {
	if !ok {
		return append(b, `{"data":null}`...)
	}
	b = append(b, `{"data":{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	b = appendID(b, id())
	return append(b, "}}"...)
}

// appendRefs writes a to-many relationship of n nodes.
func appendRefs(b []byte, typ string, n int, id func(int) string) []byte {
	b = append(b, `{"data":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"`...)
		b = append(b, typ...)
		b = append(b, '"')
		b = appendID(b, id(i))
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendID writes a node's "id" member, left out when empty (omitempty).
func appendID(b []byte, id string) []byte {
	if id == "" {
		return b
	}
	return appendStr(b, "id", id)
}

// appendString writes s as a JSON string exactly as encoding/json does
// (with its HTML escaping): printable ASCII that needs no escape is
// copied, anything else is left to encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, _ := json.Marshal(s)
			return append(b, js...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
