package runner

// SummaryCounts reads terraform plan's human output as the runner does
// while the plan streams (for the external tests).
func SummaryCounts(out []byte) (add, change, destroy, imports int) {
	var p planSummary
	_, _ = p.Write(out)
	return p.counts()
}

// CountChanges counts a plan JSON's changes as the runner does.
var CountChanges = countChanges
