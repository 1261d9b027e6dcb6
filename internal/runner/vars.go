package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-version"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/terracehq/terrace/internal/run"
)

// writeVarFiles writes the run's terraform variables into dir, a folder of
// the job's outside its configuration, and returns the -var-file flags
// that hand them to terraform: the workspace's plain values as JSON (taken
// literally, no template interpretation), its HCL values as HCL, then the
// run's own variables.
//
// Flags, not auto-loaded files in the configuration, because terraform
// reads terraform.tfvars and the *.auto.tfvars files in lexical order and
// -var-file flags after all of them, in their order: workspace variables
// then win over every file of the configuration, whatever its name (a
// zzz.auto.tfvars sorts after any name Terrace could pick), and run
// variables over workspace variables, as HCP Terraform documents. The
// files hold sensitive values: dir is the job's and goes with it.
//
// With only, just the variables it names are written (see applyVarFiles).
func writeVarFiles(dir string, vars []Variable, runVars []run.RunVar, only map[string]bool) ([]string, error) {
	plain := map[string]string{}
	var hcl strings.Builder
	for _, v := range vars {
		if v.Category != "terraform" || only != nil && !only[v.Key] {
			continue
		}
		if v.HCL {
			fmt.Fprintf(&hcl, "%s = %s\n", v.Key, v.Value)
		} else {
			plain[v.Key] = v.Value
		}
	}
	var runHCL strings.Builder
	for _, v := range runVars {
		if only == nil || only[v.Key] {
			fmt.Fprintf(&runHCL, "%s = %s\n", v.Key, v.Value)
		}
	}
	files := []struct {
		name string
		data []byte
	}{
		{"workspace.tfvars.json", nil},
		{"workspace.tfvars", []byte(hcl.String())},
		{"run.tfvars", []byte(runHCL.String())},
	}
	if len(plain) > 0 {
		files[0].data, _ = json.Marshal(plain)
	}
	var flags []string
	for _, f := range files {
		if len(f.data) == 0 {
			continue
		}
		if flags == nil {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
		}
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o600); err != nil {
			return nil, err
		}
		flags = append(flags, "-var-file="+path)
	}
	return flags, nil
}

// opentofu says whether the job's engine is OpenTofu, by its binary's
// name: tofu, or the engine finder's tofu_<version> and tofu-<version>
// (the run log's header and the engine's version checks ask this alike).
func (j *jobExec) opentofu() bool {
	return strings.HasPrefix(filepath.Base(j.bin), "tofu")
}

// engineAtLeast says whether the job's engine is OpenTofu at least tofu
// or terraform at least terraform ("" for none of that engine): false when
// its version is unknown.
func (j *jobExec) engineAtLeast(ctx context.Context, tofu, terraform string) bool {
	want := terraform
	if j.opentofu() {
		want = tofu
	}
	if want == "" {
		return false
	}
	v, err := j.r.cfg.Engines.Version(ctx, j.bin)
	if err != nil {
		return false
	}
	have, err := version.NewVersion(v)
	return err == nil && have.GreaterThanOrEqual(version.Must(version.NewVersion(want)))
}

// schemaVarFiles returns the -var-file flags for `providers schema`:
// OpenTofu 1.8 and later evaluate variables while they load the
// configuration (a module source or a backend setting may name one), so
// a command that takes no plan needs them as plan does, and takes the
// flags; terraform refuses them there.
func (j *jobExec) schemaVarFiles(ctx context.Context) []string {
	if len(j.varFiles) == 0 || !j.engineAtLeast(ctx, "1.8.0", "") {
		return nil
	}
	return j.varFiles
}

// applyVarFiles returns the -var-file flags for applying the saved plan
// in the working directory. The plan holds the values of the variables
// it was made with, and the apply applies those, as HCP Terraform does
// when a workspace variable changed while the run waited for its
// confirmation; what an engine wants besides differs:
//   - OpenTofu 1.8 and later read every variable again (the
//     configuration's own files too) and refuse a value that differs from
//     the plan's: they get the run's files (for the ephemeral variables,
//     which a plan does not keep), then a file of the plan's own values,
//     which wins over them all;
//   - terraform 1.10 and later want the ephemeral variables set while
//     planning (the plan's apply-time variables) again, and refuse a
//     -var-file value that differs from the plan's: they get those
//     variables only;
//   - older engines take no variables with a saved plan.
func (j *jobExec) applyVarFiles(ctx context.Context, in *Inputs) ([]string, error) {
	switch {
	case len(j.varFiles) == 0:
		return nil, nil
	case j.engineAtLeast(ctx, "1.8.0", ""):
		p, err := j.savedPlan()
		if err != nil || len(p.variables) == 0 {
			// Unreadable: OpenTofu says what differs, if anything.
			return j.varFiles, nil
		}
		planned, err := writePlanVarFile(filepath.Join(j.dir, "apply-vars"), p.variables)
		if err != nil {
			return nil, err
		}
		return append(append([]string{}, j.varFiles...), planned...), nil
	case !j.engineAtLeast(ctx, "", "1.10.0"):
		return nil, nil
	}
	p, err := j.savedPlan()
	if err != nil || len(p.applyTimeVars) == 0 {
		// Unreadable: terraform says what it misses, if anything.
		return nil, nil
	}
	only := map[string]bool{}
	for _, name := range p.applyTimeVars {
		only[name] = true
	}
	return writeVarFiles(filepath.Join(j.dir, "apply-vars"), in.Variables, j.job.Run.Variables, only)
}

// writePlanVarFile writes the variables a saved plan keeps (planValues)
// into dir as a JSON variable file and returns its -var-file flag (none
// when there is nothing to write).
func writePlanVarFile(dir string, vars map[string][]byte) ([]string, error) {
	values, err := planValues(vars)
	if err != nil || len(values) == 0 {
		return nil, err
	}
	b, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "plan.tfvars.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	return []string{"-var-file=" + path}, nil
}

// planValues turns the variables a saved plan keeps (msgpack of
// dynamically typed values, by name) into JSON variable values. A plan
// keeps each variable as it was given (a string, number, bool, tuple or
// object, as HCL and JSON variable files give them), which JSON gives
// back as the same value. Null values are left out: the other files or
// the configuration's default give them as they did for the plan.
func planValues(vars map[string][]byte) (map[string]json.RawMessage, error) {
	values := map[string]json.RawMessage{}
	for name, mp := range vars {
		v, err := ctymsgpack.Unmarshal(mp, cty.DynamicPseudoType)
		if err != nil {
			return nil, fmt.Errorf("the plan's variable %q: %w", name, err)
		}
		if v.IsNull() || !v.IsWhollyKnown() {
			continue
		}
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return nil, fmt.Errorf("the plan's variable %q: %w", name, err)
		}
		values[name] = b
	}
	return values, nil
}
