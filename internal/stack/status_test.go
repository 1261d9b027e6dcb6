package stack

import "testing"

// TestTransitions checks the state tables: every status named in a table
// is known, final statuses have no way out, and refused moves leave the
// object unchanged.
func TestTransitions(t *testing.T) {
	t.Parallel()
	for from, tos := range runTransitions {
		for _, to := range tos {
			if to == from {
				t.Errorf("run status %s moves to itself", from)
			}
		}
	}
	for _, s := range []RunStatus{RunSucceeded, RunFailed, RunAbandoned} {
		if !s.Final() {
			t.Errorf("%s is not final", s)
		}
	}
	r := &DeploymentRun{ID: "sdr-x", Status: RunPending}
	if err := transitionRun(r, RunDeploying); err == nil || r.Status != RunPending {
		t.Errorf("pending → deploying allowed: %v, %s", err, r.Status)
	}
	if err := transitionRun(r, RunPreDeploying); err != nil || r.Status != RunPreDeploying || r.Timestamps["pre-deploying-at"].IsZero() {
		t.Errorf("pending → pre-deploying: %v, %+v", err, r)
	}
	st := &Step{ID: "sds-x", Status: StepCompleted}
	if err := transitionStep(st, StepRunning); err == nil {
		t.Error("a completed step ran again")
	}
	c := &Configuration{ID: "stc-x", Status: ConfigCompleted}
	if err := transitionConfig(c, ConfigFailed); err == nil {
		t.Error("a completed configuration failed")
	}
	if ParseRunStatus("pre_deploying_pending_operator") != RunPreDeployingPendingOperator {
		t.Error("underscored status not accepted")
	}
}

func TestGroupStatus(t *testing.T) {
	t.Parallel()
	runs := func(ss ...RunStatus) []*DeploymentRun {
		var out []*DeploymentRun
		for _, s := range ss {
			out = append(out, &DeploymentRun{Status: s})
		}
		return out
	}
	for _, c := range []struct {
		runs []*DeploymentRun
		want GroupStatus
	}{
		{runs(RunPending), GroupPending},
		{runs(RunPreDeployingPendingOperator), GroupDeploying},
		{runs(RunSucceeded), GroupSucceeded},
		{runs(RunSucceeded, RunFailed), GroupFailed},
		{runs(RunAbandoned, RunSucceeded), GroupAbandoned},
	} {
		if got, _ := groupStatus(c.runs); got != c.want {
			t.Errorf("%v: %s, want %s", c.runs, got, c.want)
		}
	}
}
