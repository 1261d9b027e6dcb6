package runner

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// savedPlan is what the runner reads of a saved plan file (a zip whose
// "tfplan" entry is the plan as protocol buffers, planfile.proto of
// terraform and of OpenTofu): the variables terraform asks for again when
// it applies the plan.
type savedPlan struct {
	// applyTimeVars are terraform's apply_time_variables: the ephemeral
	// variables set while planning, which the apply must be given again
	// (terraform 1.10 and later; OpenTofu records its own elsewhere).
	applyTimeVars []string
}

// The field numbers of planfile.proto the runner reads.
const (
	planApplyTimeVariables protowire.Number = 28 // terraform: repeated string apply_time_variables
)

// maxPlanMessage bounds the plan message read (its resource changes are
// skipped over, but the message is read whole).
const maxPlanMessage = 256 << 20

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
		if num == planApplyTimeVariables && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p, fmt.Errorf("reading the plan: %w", protowire.ParseError(n))
			}
			p.applyTimeVars = append(p.applyTimeVars, string(v))
			b = b[n:]
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
