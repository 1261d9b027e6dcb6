package runner

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// planDescription is what the API serves about a plan besides its log:
// terraform show -json of the saved plan, its redacted form with the
// provider schemas, and the change counts taken from it. planJSON is nil
// when show -json failed.
type planDescription struct {
	planJSON, redactedJSON        []byte
	add, change, destroy, imports int
}

// describe makes the plan's description from the saved plan in the
// working directory: terraform show -json, then providers schema -json
// for the redacted form. A failure leaves the description empty (the run
// itself does not depend on it) and is logged.
func (j *jobExec) describe(ctx context.Context, in *Inputs) planDescription {
	var d planDescription
	js, err := j.capture(ctx, "show", "-json", "-no-color", "tfplan")
	if err != nil {
		j.log.Warn("the plan's JSON could not be made", "error", err)
		return d
	}
	d.planJSON = js
	d.add, d.change, d.destroy, d.imports = countChanges(js)
	d.redactedJSON = Redact(js, sensitiveKeys(withRunSecrets(in.Variables, j.job.Run.Variables)))
	if schemas, err := j.capture(ctx, "providers", "schema", "-json"); err == nil {
		d.redactedJSON = withProviderSchemas(d.redactedJSON, schemas)
	} else {
		j.log.Warn("the provider schemas could not be read for the redacted plan JSON", "error", err)
	}
	return d
}

// describeInBackground runs describe beside whatever the job does next
// and delivers its result once.
func (j *jobExec) describeInBackground(ctx context.Context, in *Inputs) <-chan planDescription {
	out := make(chan planDescription, 1)
	go func() {
		defer j.took("plan JSON (beside the apply)", time.Now())
		out <- j.describe(ctx, in)
	}()
	return out
}

// capture runs the engine in the working directory for its standard
// output only (its standard error is not part of any log). Unlike
// terraform it does not listen for cancel signals, so it may run beside
// another command: these commands only read, and end quickly; the job's
// context still stops them with their whole process group.
func (j *jobExec) capture(ctx context.Context, args ...string) ([]byte, error) {
	defer j.took("terraform "+args[0], time.Now())
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, j.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = j.wd, j.env, &stdout, &stderr
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	return stdout.Bytes(), nil
}

// planSummary watches terraform plan's human output for its summary line,
// "Plan: 1 to import, 2 to add, 0 to change, 1 to destroy." (OpenTofu may
// add "1 to forget"), so that a plan can be reported with its counts
// before show -json has run. It keeps only the start of each line.
type planSummary struct {
	cur  []byte
	line string
}

const summaryLineMax = 256

func (p *planSummary) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := summaryLineMax - len(p.cur); room > 0 {
			p.cur = append(p.cur, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		if bytes.HasPrefix(p.cur, []byte("Plan: ")) {
			p.line = string(bytes.TrimSpace(p.cur))
		}
		p.cur = p.cur[:0]
		b = b[i+1:]
	}
	return n, nil
}

var summaryCount = regexp.MustCompile(`(\d+) to (import|add|change|destroy)\b`)

// counts returns the summary line's counts; all zero when terraform
// printed none (no changes, or changes to outputs only).
func (p *planSummary) counts() (add, change, destroy, imports int) {
	for _, m := range summaryCount.FindAllStringSubmatch(p.line, -1) {
		v, _ := strconv.Atoi(m[1])
		switch m[2] {
		case "import":
			imports = v
		case "add":
			add = v
		case "change":
			change = v
		case "destroy":
			destroy = v
		}
	}
	return
}
