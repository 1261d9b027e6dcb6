package jobapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/idtoken"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
)

// A job's workload identity tokens are its phase's, valid for the phase's
// time limit; a plan job also carries the apply phase's, valid until both
// limits have passed, for when it goes on to apply (only a plan job that
// may). A run that asks for no token gets none.
func TestIdentityTokensPerPhase(t *testing.T) {
	t.Parallel()
	type ask struct {
		phase run.JobPhase
		ttl   time.Duration
	}
	var asked []ask
	wants := true
	s := &Server{o: Options{Sources: Sources{IdentityTokens: func(ctx context.Context, r *run.Run, in *runner.Inputs, ttls map[run.JobPhase]time.Duration) (map[run.JobPhase][]runner.Variable, error) {
		out := map[run.JobPhase][]runner.Variable{}
		for _, phase := range []run.JobPhase{run.PhasePlan, run.PhaseApply} {
			ttl, ok := ttls[phase]
			if !ok {
				continue
			}
			asked = append(asked, ask{phase, ttl})
			if wants {
				out[phase] = []runner.Variable{{Key: "TFC_WORKLOAD_IDENTITY_TOKEN", Value: "token for " + string(phase), Category: "env", Sensitive: true}}
			}
		}
		return out, nil
	}}}}
	r := &run.Run{ID: "run-1", AutoApply: true}

	in := &runner.Inputs{ApplyTimeout: 30 * time.Minute, Variables: []runner.Variable{{Key: "TFC_WORKLOAD_IDENTITY_AUDIENCE", Value: "aud", Category: "env"}}}
	if err := s.identityTokens(t.Context(), r, in, run.PhasePlan); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || asked[0] != (ask{run.PhasePlan, idtoken.DefaultTTL}) || asked[1] != (ask{run.PhaseApply, idtoken.DefaultTTL + 30*time.Minute}) {
		t.Errorf("a plan job asked %+v; want its phase for the default lifetime, then the apply's until both limits passed", asked)
	}
	if last := in.Variables[len(in.Variables)-1]; len(in.Variables) != 2 || last.Value != "token for plan" {
		t.Errorf("a plan job's variables: %+v", in.Variables)
	}
	if len(in.ApplyEnv) != 1 || in.ApplyEnv[0].Value != "token for apply" {
		t.Errorf("a plan job's apply environment: %+v", in.ApplyEnv)
	}

	asked = nil
	in = &runner.Inputs{PlanTimeout: time.Hour, ApplyTimeout: 30 * time.Minute}
	if err := s.identityTokens(t.Context(), r, in, run.PhaseApply); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != (ask{run.PhaseApply, 30 * time.Minute}) || len(in.Variables) != 1 || in.Variables[0].Value != "token for apply" || in.ApplyEnv != nil {
		t.Errorf("an apply job asked %+v and got %+v, %+v", asked, in.Variables, in.ApplyEnv)
	}

	// A plan job that cannot go on to apply (a saved plan, here) gets
	// its own phase's tokens only.
	asked = nil
	in = &runner.Inputs{}
	if err := s.identityTokens(t.Context(), &run.Run{ID: "run-2", AutoApply: true, SavePlan: true}, in, run.PhasePlan); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].phase != run.PhasePlan || in.ApplyEnv != nil {
		t.Errorf("a saved plan's plan job asked %+v and got apply tokens %+v", asked, in.ApplyEnv)
	}

	asked, wants = nil, false
	r = &run.Run{ID: "run-3"}
	in = &runner.Inputs{PlanTimeout: time.Hour}
	if err := s.identityTokens(t.Context(), r, in, run.PhasePlan); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != (ask{run.PhasePlan, time.Hour}) || len(in.Variables) != 0 || in.ApplyEnv != nil {
		t.Errorf("a run asking for no token: asked %+v, got %+v, %+v", asked, in.Variables, in.ApplyEnv)
	}
}

// TestRunnerFeatures: a job whose inputs hold run files (dynamic provider
// credentials) goes only to a runner that says it writes them; one that
// predates them (no features header) is refused, saying to upgrade, rather
// than given a run without its credentials; a Vault login needs a runner
// that makes it as well. Other jobs go to any runner.
func TestRunnerFeatures(t *testing.T) {
	plain := &runner.Inputs{Variables: []runner.Variable{{Key: "TF_LOG", Value: "info", Category: "env"}}}
	files := &runner.Inputs{ApplyEnv: []runner.Variable{{Key: "aws/default/token", Value: "tok", Category: runner.CategoryFile, Sensitive: true}}}
	expand := &runner.Inputs{Variables: []runner.Variable{{Key: "AWS_CONFIG_FILE", Value: runner.FilesDir + "/aws/default/config", Category: "env", Expand: true}}}
	vault := &runner.Inputs{Variables: []runner.Variable{{Key: "vault/default/jwt", Value: "tok", Category: runner.CategoryFile, Sensitive: true},
		{Key: "vault/default/token", Value: `{"address":"https://vault.test"}`, Category: runner.CategoryVaultLogin}}}
	for _, tc := range []struct {
		name     string
		in       *runner.Inputs
		features string
		refused  bool
	}{
		{"plain, old runner", plain, "", false},
		{"files, old runner", files, "", true},
		{"expanded env, old runner", expand, "", true},
		{"files, runner with run files", files, "other, " + FeatureRunFiles, false},
		{"vault, runner with run files only", vault, FeatureRunFiles, true},
		{"vault, runner with Vault logins only", vault, FeatureVaultLogin, true},
		{"vault, runner with both", vault, FeatureVaultLogin + "," + FeatureRunFiles, false},
		{"vault read, runner with run files only", &runner.Inputs{ApplyEnv: []runner.Variable{{Key: "vault-backed-aws/default/credentials", Category: runner.CategoryVaultRead}}}, FeatureRunFiles, true},
	} {
		err := needsFeatures(tc.in, tc.features)
		if tc.refused != (err != nil) || err != nil && (core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "upgrade the agent")) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// The protocol's own client says it writes run files and logs in to
	// Vault.
	var got string
	c := &Client{BaseURL: "http://in-process", RunnerID: "r", HTTP: InProcess(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get(FeaturesHeader)
	}))}
	_, _ = c.do(t.Context(), http.MethodGet, "/x", nil, "", nil)
	if err := needsFeatures(vault, got); err != nil {
		t.Errorf("the client's features: %q", got)
	}
}
