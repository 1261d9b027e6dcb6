package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// A run's log is text, or, when its workspace has structured run output,
// terraform's JSON log lines (plan -json, apply -json) among lines of
// text (the runner's header, init, errors). The run page shows a JSON
// line as terraform would print it: its message, a diagnostic as
// terraform's "Error: …" block, outputs as name = value.

// jsonLogLine is what the page reads of one of terraform's JSON log
// lines (terraform's internal/command/views/json).
type jsonLogLine struct {
	Level      string          `json:"@level"`
	Message    *string         `json:"@message"`
	Type       string          `json:"type"`
	Diagnostic *jsonDiagnostic `json:"diagnostic"`
	Outputs    map[string]struct {
		Sensitive bool            `json:"sensitive"`
		Value     json.RawMessage `json:"value"`
		Action    string          `json:"action"`
	} `json:"outputs"`
}

type jsonDiagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail"`
	Range    *struct {
		Filename string `json:"filename"`
		Start    struct {
			Line int `json:"line"`
		} `json:"start"`
	} `json:"range"`
	Snippet *struct {
		Context   *string `json:"context"`
		Code      string  `json:"code"`
		StartLine int     `json:"start_line"`
	} `json:"snippet"`
}

// legibleLog returns a log's text with each of terraform's JSON log
// lines in it written as text; other lines are left as they are.
func legibleLog(text string) string {
	if !strings.Contains(text, `"@message"`) {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	for _, line := range lines {
		body := strings.TrimRight(line, "\r\n")
		if l, ok := parseJSONLogLine(body); ok {
			b.WriteString(l.text())
			b.WriteString(line[len(body):]) // the line's end, if it had one
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

func parseJSONLogLine(s string) (*jsonLogLine, bool) {
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return nil, false
	}
	var l jsonLogLine
	if json.Unmarshal([]byte(s), &l) != nil || l.Message == nil {
		return nil, false
	}
	return &l, true
}

// text is the line as terraform's human output would have it (without a
// trailing newline).
func (l *jsonLogLine) text() string {
	switch {
	case l.Type == "diagnostic" && l.Diagnostic != nil:
		return l.Diagnostic.text()
	case l.Type == "outputs" && len(l.Outputs) > 0:
		names := make([]string, 0, len(l.Outputs))
		for n := range l.Outputs {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		b.WriteString("\nOutputs:\n")
		for _, n := range names {
			o := l.Outputs[n]
			switch {
			case o.Sensitive:
				fmt.Fprintf(&b, "\n%s = (sensitive value)", n)
			case len(o.Value) > 0:
				var v bytes.Buffer
				if json.Indent(&v, o.Value, "", "  ") != nil {
					v.Reset()
					v.Write(o.Value)
				}
				fmt.Fprintf(&b, "\n%s = %s", n, v.String())
			case o.Action != "":
				fmt.Fprintf(&b, "\n%s: %s", n, o.Action)
			default:
				fmt.Fprintf(&b, "\n%s", n)
			}
		}
		return b.String()
	case l.Type == "change_summary":
		return "\n" + *l.Message
	case l.Level == "error":
		return "Error: " + *l.Message
	case l.Level == "warn":
		return "Warning: " + *l.Message
	}
	return *l.Message
}

// text writes a diagnostic as terraform does: its severity and summary,
// where in the configuration, and its detail.
func (d *jsonDiagnostic) text() string {
	var b strings.Builder
	sev := "Error"
	if d.Severity == "warning" {
		sev = "Warning"
	}
	fmt.Fprintf(&b, "\n%s: %s\n", sev, d.Summary)
	if d.Range != nil && d.Range.Filename != "" {
		fmt.Fprintf(&b, "\n  on %s line %d", d.Range.Filename, d.Range.Start.Line)
		if d.Snippet != nil && d.Snippet.Context != nil && *d.Snippet.Context != "" {
			fmt.Fprintf(&b, ", in %s", *d.Snippet.Context)
		}
		b.WriteString(":\n")
		if d.Snippet != nil {
			for i, code := range strings.Split(d.Snippet.Code, "\n") {
				fmt.Fprintf(&b, "  %d: %s\n", d.Snippet.StartLine+i, code)
			}
		}
	}
	if d.Detail != "" {
		fmt.Fprintf(&b, "\n%s\n", d.Detail)
	}
	return b.String()
}

// completeLines returns how much of a log read from some offset the page
// shows now: all of it when the log has ended (ETX), else up to its last
// newline, so that a JSON line cut where the read ended is read whole
// next time.
func completeLines(b []byte) int {
	if bytes.HasSuffix(b, []byte{3}) {
		return len(b)
	}
	return bytes.LastIndexByte(b, '\n') + 1
}
