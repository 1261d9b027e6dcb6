package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// logWriter collects terraform's output, masks sensitive values line by
// line (so a secret split across writes is still caught) and ships it to
// the server in chunks: every 250ms, or at 64 KiB. What is left when the
// phase ends goes with the call that reports it (Rest).
type logWriter struct {
	ctx    context.Context
	api    LogAppender
	jobID  string
	logID  string
	masker *strings.Replacer // nil: nothing to mask

	mu      sync.Mutex
	shipMu  sync.Mutex // one chunk in flight at a time, so chunks keep their order
	partial []byte     // bytes after the last newline
	ready   bytes.Buffer
	done    chan struct{}
	onError func(error)
	stopped sync.Once
	wg      sync.WaitGroup
}

// LogAppender is where a log writer ships its chunks (API's AppendLog).
type LogAppender interface {
	AppendLog(ctx context.Context, jobID, logID string, data []byte) error
}

// LogWriter is the runner's log writer for another executor (module test
// runs, internal/moduletest): output masked line by line, shipped in
// chunks; Rest ends it and returns what was not shipped, Close ships that.
type LogWriter = logWriter

// NewLogWriter returns a LogWriter shipping to a, masking secrets;
// onError hears of a refused chunk.
func NewLogWriter(ctx context.Context, a LogAppender, jobID, logID string, secrets []string, onError func(error)) *LogWriter {
	w := newLogWriter(ctx, a, jobID, logID, secrets)
	w.onError = onError
	return w
}

// newLogWriter masks secrets (longest first: maskList).
func newLogWriter(ctx context.Context, api LogAppender, jobID, logID string, secrets []string) *logWriter {
	w := &logWriter{ctx: ctx, api: api, jobID: jobID, logID: logID, masker: maskReplacer(secrets), done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.ship(false)
			}
		}
	}()
	return w
}

// setSecrets masks secrets (longest first) in what is written from now on.
func (w *logWriter) setSecrets(secrets []string) {
	m := maskReplacer(secrets)
	w.mu.Lock()
	w.masker = m
	w.mu.Unlock()
}

func (w *logWriter) mask(line []byte) []byte {
	if w.masker == nil {
		return line
	}
	return []byte(w.masker.Replace(string(line)))
}

// maskReplacer replaces each secret by ***: each line of a multi-line
// secret on its own (a log is masked line by line), lines shorter than 3
// left alone, the longest first where several match at one place (so that
// a secret containing another is masked whole). One pass over the text
// whatever the number of secrets (a state can hold thousands). nil when
// there is nothing to mask.
func maskReplacer(secrets []string) *strings.Replacer {
	seen := map[string]bool{}
	var parts []string
	for _, sec := range secrets {
		for _, part := range strings.Split(sec, "\n") {
			if len(part) < 3 {
				continue
			}
			// As the line has it, and as a JSON string has it: a log of
			// structured run output is terraform's JSON log lines, which
			// escape quotes, backslashes, control characters and (as
			// encoding/json does by default) <, > and &.
			for _, form := range append([]string{part}, jsonForms(part)...) {
				if !seen[form] {
					seen[form] = true
					parts = append(parts, form)
				}
			}
		}
	}
	if len(parts) == 0 {
		return nil
	}
	sort.SliceStable(parts, func(a, b int) bool { return len(parts[a]) > len(parts[b]) })
	pairs := make([]string, 0, 2*len(parts))
	for _, p := range parts {
		pairs = append(pairs, p, "***")
	}
	return strings.NewReplacer(pairs...)
}

// jsonForms returns how s is written inside a JSON string, with and
// without HTML escaping, where that differs from s.
func jsonForms(s string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(s) != nil {
			continue
		}
		f := strings.TrimSuffix(b.String(), "\n")
		f = f[1 : len(f)-1] // the quotes
		if f != s {
			out = append(out, f)
		}
	}
	return out
}

// Write implements io.Writer.
func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.partial = append(w.partial, p...)
	if i := bytes.LastIndexByte(w.partial, '\n'); i >= 0 {
		w.ready.Write(w.mask(w.partial[:i+1]))
		w.partial = append(w.partial[:0], w.partial[i+1:]...)
	}
	big := w.ready.Len() >= 64<<10
	w.mu.Unlock()
	if big {
		w.ship(false)
	}
	return len(p), nil
}

// ship sends what is ready; with all, also a trailing partial line.
func (w *logWriter) ship(all bool) {
	w.shipMu.Lock()
	defer w.shipMu.Unlock()
	data := w.take(all)
	if len(data) > 0 {
		// A chunk the server refuses is lost from the live log; terraform
		// goes on either way, so it is logged, not fatal.
		if err := w.api.AppendLog(context.WithoutCancel(w.ctx), w.jobID, w.logID, data); err != nil && w.onError != nil {
			w.onError(err)
		}
	}
}

// take removes and returns what is ready (masked); with all, also a
// trailing partial line.
func (w *logWriter) take(all bool) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if all && len(w.partial) > 0 {
		w.ready.Write(w.mask(w.partial))
		w.partial = w.partial[:0]
	}
	data := bytes.Clone(w.ready.Bytes())
	w.ready.Reset()
	return data
}

// stop stops the background shipper (idempotent).
func (w *logWriter) stop() {
	w.stopped.Do(func() {
		close(w.done)
		w.wg.Wait()
	})
}

// Rest stops the background shipper and returns everything written and
// not yet sent, masked, a trailing partial line included: the end of the
// log, for the call that reports the phase to carry (run.PlanResult.Log,
// run.ApplyResult.Log), which saves a round trip per phase. A chunk under
// way is sent first, so the log keeps its order. What is written after
// Rest is sent by Close.
func (w *logWriter) Rest() []byte {
	w.stop()
	w.shipMu.Lock() // a chunk under way (a 64 KiB write) is sent first
	defer w.shipMu.Unlock()
	return w.take(true)
}

// Close stops the background shipper and sends what is left (idempotent).
func (w *logWriter) Close() {
	w.stop()
	w.ship(true)
}

// ProcAttr puts a command in its own process group, as the runner starts
// terraform (procAttr), for another executor: a cancel reaches the
// command's children too, and on Linux the command dies with the server.
func ProcAttr() *syscall.SysProcAttr { return procAttr() }

// ExitCode is what a command's Wait error says: its exit code (0 for
// none), or the error when it did not run to an exit.
func ExitCode(err error) (int, error) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}
