package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/terracehq/terrace/internal/run"
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
// working directory. show -json and the provider schemas are independent
// reads, so they run side by side; the schemas come from the runner's
// cache when this engine build has already described the same providers.
// A failure leaves the description empty (the run does not depend on it)
// and is logged.
func (j *jobExec) describe(ctx context.Context, in *Inputs) planDescription {
	var d planDescription
	var schemas []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		schemas = j.providerSchemas(ctx)
	}()
	js, err := j.capture(ctx, "show", "-json", "-no-color", "tfplan")
	wg.Wait()
	if err != nil {
		j.log.Warn("the plan's JSON could not be made", "error", err)
		return d
	}
	d.planJSON = js
	d.add, d.change, d.destroy, d.imports = countChanges(js)
	d.redactedJSON = Redact(js, sensitiveKeys(withRunSecrets(in.Variables, j.job.Run.Variables)), j.secrets)
	if schemas != nil {
		d.redactedJSON = withProviderSchemas(d.redactedJSON, schemas)
	}
	return d
}

// providerSchemas returns terraform providers schema -json for the
// working directory (nil when it fails). The answer depends only on the
// engine build and the providers installed, which the dependency lock
// file pins by version and checksum, so it is cached under those.
func (j *jobExec) providerSchemas(ctx context.Context) []byte {
	key, ok := j.schemaKey()
	if ok {
		if b, hit := j.r.schemas.get(key); hit {
			return b
		}
	}
	b, err := j.capture(ctx, append([]string{"providers", "schema", "-json"}, j.schemaVarFiles(ctx)...)...)
	if err != nil {
		j.log.Warn("the provider schemas could not be read for the redacted plan JSON", "error", err)
		return nil
	}
	if ok {
		j.r.schemas.put(key, b)
	}
	return b
}

// schemaKey names the engine build (path, size, modification time) and
// the lock file's contents; ok is false when either cannot be read.
func (j *jobExec) schemaKey() (string, bool) {
	st, err := os.Stat(j.bin)
	if err != nil {
		return "", false
	}
	lock, err := os.ReadFile(filepath.Join(j.wd, ".terraform.lock.hcl"))
	if err != nil && !os.IsNotExist(err) {
		return "", false // no lock file: built-in providers only
	}
	return fmt.Sprintf("%s|%d|%d|%x", j.bin, st.Size(), st.ModTime().UnixNano(), sha256.Sum256(lock)), true
}

// schemaCache keeps the provider schemas of the last few provider sets.
type schemaCache struct {
	mu      sync.Mutex
	entries map[string][]byte
	order   []string // oldest first
}

const schemaCacheEntries = 16

func (c *schemaCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.entries[key]
	return b, ok
}

func (c *schemaCache) put(key string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string][]byte{}
	}
	if _, ok := c.entries[key]; !ok {
		c.order = append(c.order, key)
	}
	c.entries[key] = b
	for len(c.order) > schemaCacheEntries {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
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
	wait, err := j.start(cmd)
	if err != nil {
		return nil, err
	}
	if err := wait(); err != nil {
		return nil, err
	}
	return stdout.Bytes(), nil
}

// planSummary watches terraform plan's human output for its summary line,
// "Plan: 1 to import, 2 to add, 0 to change, 1 to destroy." (OpenTofu and
// newer terraform may add "1 to forget"), so that a plan can be reported
// with its counts before show -json has run. It keeps only the start of
// each line.
//
// With structured run output the summary is a JSON log line of type
// change_summary whose @message is that line.
type planSummary struct {
	structured bool
	cur        []byte
	line       string
}

// summaryLineMax is how much of a line is kept: the summary line, or
// (structured) the change_summary JSON line, whose fields come first
// from terraform's logger but for its counts.
const summaryLineMax = 256

const structuredLineMax = 4096

func (p *planSummary) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		limit := summaryLineMax
		if p.structured {
			limit = structuredLineMax
		}
		if room := limit - len(p.cur); room > 0 {
			p.cur = append(p.cur, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		if bytes.HasPrefix(p.cur, []byte("Plan: ")) {
			p.line = string(bytes.TrimSpace(p.cur))
		} else if p.structured && bytes.HasPrefix(p.cur, []byte("{")) && bytes.Contains(p.cur, []byte(`"change_summary"`)) {
			var l struct {
				Message string `json:"@message"`
				Type    string `json:"type"`
			}
			if json.Unmarshal(p.cur, &l) == nil && l.Type == "change_summary" && strings.HasPrefix(l.Message, "Plan: ") {
				p.line = l.Message
			}
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

// describeBeside makes the plan's description while the apply runs and
// uploads it as soon as it is made; the returned function waits for
// that and returns the description (planJSON nil when it failed).
func (j *jobExec) describeBeside(ctx context.Context, in *Inputs) func() planDescription {
	done := make(chan planDescription, 1)
	go func() {
		defer j.took("plan JSON (beside the apply)", time.Now())
		d := j.describe(ctx, in)
		j.uploadDescription(ctx, d)
		done <- d
	}()
	return func() planDescription { return <-done }
}

// uploadDescription sends the JSON of a plan reported without it, or,
// when it could not be made, says so: a read waiting for it then ends.
func (j *jobExec) uploadDescription(ctx context.Context, d planDescription) {
	defer j.took("upload plan JSON", time.Now())
	pd := run.PlanDescription{Error: "terraform show -json of the plan failed (see the runner's log)"}
	if d.planJSON != nil && d.redactedJSON != nil {
		pd = run.PlanDescription{PlanJSON: d.planJSON, RedactedJSON: d.redactedJSON,
			Additions: d.add, Changes: d.change, Destructions: d.destroy, Imports: d.imports}
	}
	if err := j.r.api.SavePlanJSON(ctx, j.job.ID, j.r.cfg.ID, pd); err != nil {
		j.log.Warn("the plan's JSON was refused", "error", err)
	}
}
