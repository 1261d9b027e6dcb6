package stack

import (
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// EmptyPlanRule is the built-in auto-approval rule: a plan without changes
// is approved in every group.
const EmptyPlanRule = "empty_plan"

// ChangeCounts counts the planned changes of a deployment or a component.
type ChangeCounts struct {
	Add, Change, Import, Remove, Total int
}

// Message is one error or warning of a plan.
type Message struct {
	Summary, Detail string
}

// PlanContext is what deployment_auto_approve checks see as `context`.
type PlanContext struct {
	Operation        string // "plan" or "apply"
	Success          bool
	Errors, Warnings []Message
	Mode             string // normal, refresh-only, import, destroy
	Applyable        bool
	Changes          ChangeCounts
	ComponentChanges map[string]ChangeCounts // keyed "component.<name>"
	Replans          int
	Deployment       string
}

// Approval is the outcome of evaluating a group's checks on a plan.
type Approval struct {
	Approved bool
	// Rule names the rule that approved (EmptyPlanRule or the group's
	// checks); empty when not approved.
	Rule string
	// Failed holds the reasons of the checks that did not pass.
	Failed []string
}

func counts(c ChangeCounts) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"add": cty.NumberIntVal(int64(c.Add)), "change": cty.NumberIntVal(int64(c.Change)),
		"import": cty.NumberIntVal(int64(c.Import)), "remove": cty.NumberIntVal(int64(c.Remove)),
		"total": cty.NumberIntVal(int64(c.Total)),
	})
}

func messages(ms []Message) cty.Value {
	if len(ms) == 0 {
		return cty.SetValEmpty(cty.Object(map[string]cty.Type{"summary": cty.String, "detail": cty.String}))
	}
	var vs []cty.Value
	for _, m := range ms {
		vs = append(vs, cty.ObjectVal(map[string]cty.Value{"summary": cty.StringVal(m.Summary), "detail": cty.StringVal(m.Detail)}))
	}
	return cty.SetVal(vs)
}

func deploymentValue(name string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"deployment_name": cty.StringVal(name)})
}

func (pc PlanContext) value() cty.Value {
	comps := map[string]cty.Value{}
	for k, c := range pc.ComponentChanges {
		comps[k] = counts(c)
	}
	compVal := cty.EmptyObjectVal
	if len(comps) > 0 {
		compVal = cty.ObjectVal(comps)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"operation": cty.StringVal(pc.Operation),
		"success":   cty.BoolVal(pc.Success),
		"errors":    messages(pc.Errors),
		"warnings":  messages(pc.Warnings),
		"plan": cty.ObjectVal(map[string]cty.Value{
			"mode":              cty.StringVal(pc.Mode),
			"applyable":         cty.BoolVal(pc.Applyable),
			"changes":           counts(pc.Changes),
			"component_changes": compVal,
			"replans":           cty.NumberIntVal(int64(pc.Replans)),
			"deployment":        deploymentValue(pc.Deployment),
		}),
	})
}

// checkFunctions are the functions a check may call: pure ones only.
var checkFunctions = map[string]function.Function{
	"length": stdlib.LengthFunc, "contains": stdlib.ContainsFunc, "keys": stdlib.KeysFunc,
	"values": stdlib.ValuesFunc, "lookup": stdlib.LookupFunc, "lower": stdlib.LowerFunc,
	"upper": stdlib.UpperFunc, "min": stdlib.MinFunc, "max": stdlib.MaxFunc,
	"concat": stdlib.ConcatFunc, "coalesce": stdlib.CoalesceFunc, "format": stdlib.FormatFunc,
	"join": stdlib.JoinFunc, "split": stdlib.SplitFunc, "regex": stdlib.RegexFunc,
}

// AutoApprove evaluates the checks of the named deployment group on pc.
// A plan with no changes is approved by the built-in rule; otherwise every
// check of every rule the group lists must pass, and a group without rules
// needs an operator. A check that cannot be evaluated fails and adds a
// diagnostic.
func (c *Config) AutoApprove(group string, pc PlanContext) (Approval, Diagnostics) {
	if pc.Success && pc.Changes.Total == 0 {
		return Approval{Approved: true, Rule: EmptyPlanRule}, nil
	}
	g := c.Group(group)
	if g == nil || len(g.AutoApproveChecks) == 0 {
		return Approval{}, nil
	}
	deps := map[string]cty.Value{}
	for _, d := range c.Deployments {
		deps[d.Name] = deploymentValue(d.Name)
	}
	depVal := cty.EmptyObjectVal
	if len(deps) > 0 {
		depVal = cty.ObjectVal(deps)
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"context": pc.value(), "deployment": depVal},
		Functions: checkFunctions,
	}
	var diags hcl.Diagnostics
	out := Approval{Approved: true, Rule: group}
	for _, name := range g.AutoApproveChecks {
		rule := c.AutoApproveRule(name)
		if rule == nil {
			out.Approved = false
			out.Failed = append(out.Failed, "the rule "+name+" is not declared")
			continue
		}
		for _, chk := range rule.Checks {
			v, d := chk.Condition.Value(ctx)
			diags = append(diags, d...)
			pass := !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type().Equals(cty.Bool) && v.True()
			if !d.HasErrors() && (!v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.Bool)) {
				r := chk.Condition.Range()
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid check condition",
					Detail: "A check's condition must be true or false.", Subject: &r})
			}
			if pass {
				continue
			}
			out.Approved = false
			reason := name + ": a check did not pass"
			if rv, rd := chk.Reason.Value(ctx); !rd.HasErrors() && rv.IsKnown() && !rv.IsNull() && rv.Type().Equals(cty.String) {
				reason = rv.AsString()
			}
			out.Failed = append(out.Failed, reason)
		}
	}
	sort.Strings(out.Failed)
	if !out.Approved {
		out.Rule = ""
	}
	return out, fromHCL(diags, c.Sources)
}
