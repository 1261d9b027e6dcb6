package runner

// SummaryCounts reads terraform plan's human output as the runner does
// while the plan streams (for the external tests).
func SummaryCounts(out []byte) (add, change, destroy, imports int) {
	var p planSummary
	_, _ = p.Write(out)
	return p.counts()
}

// StructuredSummaryCounts is SummaryCounts for terraform plan -json's
// JSON log lines (structured run output).
func StructuredSummaryCounts(out []byte) (add, change, destroy, imports int) {
	p := planSummary{structured: true}
	_, _ = p.Write(out)
	return p.counts()
}

// MaskLog masks secrets in text as a job's log writer does.
func MaskLog(secrets []string, text string) string {
	return maskReplacer(secrets).Replace(text)
}

// CountChanges counts a plan JSON's changes as the runner does.
var CountChanges = countChanges

// SavedPlan reads a saved plan file as an apply job does: the workspace
// it was made in and its apply-time variables.
func SavedPlan(path string) (workspace string, applyTimeVars []string, err error) {
	p, err := readSavedPlan(path)
	return p.workspace, p.applyTimeVars, err
}

// PlanVariables reads the variables a saved plan keeps as an OpenTofu
// apply job hands them back: JSON values by name.
func PlanVariables(path string) (map[string]string, error) {
	p, err := readSavedPlan(path)
	if err != nil {
		return nil, err
	}
	values, err := planValues(p.variables)
	out := map[string]string{}
	for k, v := range values {
		out[k] = string(v)
	}
	return out, err
}
