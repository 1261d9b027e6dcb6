package runner

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"
)

// savedPlan is what the runner reads of a saved plan file (a zip whose
// "tfplan" entry is the plan as protocol buffers, planfile.proto of
// terraform and of OpenTofu): the workspace it was made in and the
// variables terraform asks for again when it applies the plan.
type savedPlan struct {
	// workspace is the workspace the plan was made in ("" when the plan
	// does not say); terraform 1.15 and later refuse to apply a plan in
	// another, and others would apply it to that other's state.
	workspace string
	// applyTimeVars are terraform's apply_time_variables: the ephemeral
	// variables set while planning, which the apply must be given again
	// (terraform 1.10 and later; OpenTofu records its own elsewhere).
	applyTimeVars []string
	// variables are the values of the variables set while planning, by
	// name: msgpack encodings of dynamically typed values (ephemeral
	// variables are left out).
	variables map[string][]byte
}

// The field numbers of planfile.proto the runner reads.
const (
	planVariables          protowire.Number = 2  // map<string, DynamicValue> variables
	mapKey                 protowire.Number = 1  // a map entry's key
	mapValue               protowire.Number = 2  // a map entry's value
	dynamicMsgpack         protowire.Number = 1  // DynamicValue: bytes msgpack
	planBackend            protowire.Number = 13 // Backend backend
	backendWorkspace       protowire.Number = 3  // Backend: string workspace
	planApplyTimeVariables protowire.Number = 28 // terraform: repeated string apply_time_variables
)

// maxPlanMessage bounds the plan message read (its resource changes are
// skipped over, but the message is read whole).
const maxPlanMessage = 256 << 20

// savedPlan reads the saved plan in the job's working directory, once: an
// apply job reads its workspace before init and its apply-time variables
// before apply, and the file (up to the whole plan) does not change in
// between. A job that plans reads it only after its plan wrote it.
func (j *jobExec) savedPlan() (savedPlan, error) {
	if j.saved == nil {
		p, err := readSavedPlan(filepath.Join(j.wd, "tfplan"))
		if err != nil {
			return p, err
		}
		j.saved = &p
	}
	return *j.saved, nil
}

// readSavedPlan reads the saved plan at path.
func readSavedPlan(path string) (savedPlan, error) {
	var p savedPlan
	zr, err := zip.OpenReader(path)
	if err != nil {
		return p, err
	}
	defer zr.Close()
	f, err := zr.Open("tfplan")
	if err != nil {
		return p, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPlanMessage+1))
	if err != nil {
		return p, err
	}
	if len(b) > maxPlanMessage {
		return p, errors.New("the plan message is too large")
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return p, fmt.Errorf("reading the plan: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if (num == planApplyTimeVariables || num == planBackend || num == planVariables) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p, fmt.Errorf("reading the plan: %w", protowire.ParseError(n))
			}
			b = b[n:]
			if num == planVariables {
				name, err := stringField(v, mapKey)
				if err != nil {
					return p, fmt.Errorf("reading the plan's variables: %w", err)
				}
				dv, err := bytesField(v, mapValue)
				if err != nil {
					return p, fmt.Errorf("reading the plan's variable %q: %w", name, err)
				}
				mp, err := bytesField(dv, dynamicMsgpack)
				if err != nil {
					return p, fmt.Errorf("reading the plan's variable %q: %w", name, err)
				}
				if p.variables == nil {
					p.variables = map[string][]byte{}
				}
				p.variables[name] = mp
				continue
			}
			if num == planApplyTimeVariables {
				p.applyTimeVars = append(p.applyTimeVars, string(v))
				continue
			}
			ws, err := stringField(v, backendWorkspace)
			if err != nil {
				return p, fmt.Errorf("reading the plan's backend: %w", err)
			}
			p.workspace = ws
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return p, fmt.Errorf("reading the plan: %w", protowire.ParseError(n))
		}
		b = b[n:]
	}
	return p, nil
}

// stringField returns the last value of string field num of message b
// ("" when it has none).
func stringField(b []byte, num protowire.Number) (string, error) {
	v, err := bytesField(b, num)
	return string(v), err
}

// bytesField returns the last value of bytes (or string, or message)
// field num of message b (nil when it has none).
func bytesField(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		n2, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if n2 == num && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			out, b = v, b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(n2, typ, b); n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return out, nil
}
