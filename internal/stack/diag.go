package stack

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Severities of a diagnostic, as the stack-diagnostics API spells them.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Pos is a position in a file: 1-based line and column, 0-based byte.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// Range is the span of source a diagnostic is about.
type Range struct {
	Filename string `json:"filename"`
	Start    Pos    `json:"start"`
	End      Pos    `json:"end"`
}

// Snippet is the source around a diagnostic: Code holds the whole lines
// the range covers, starting at StartLine; the highlight offsets are bytes
// into Code. Context names the enclosing block when known.
type Snippet struct {
	Context              *string `json:"context"`
	Code                 string  `json:"code"`
	StartLine            int     `json:"start_line"`
	HighlightStartOffset int     `json:"highlight_start_offset"`
	HighlightEndOffset   int     `json:"highlight_end_offset"`
}

// Diagnostic is one problem found in a stack's files or while running it.
type Diagnostic struct {
	Severity string   `json:"severity"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail"`
	Range    *Range   `json:"range,omitempty"`
	Snippet  *Snippet `json:"snippet,omitempty"`
}

// String renders the diagnostic the way a terminal user reads it:
// "file:line,col: summary; detail".
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Range != nil {
		fmt.Fprintf(&b, "%s:%d,%d: ", d.Range.Filename, d.Range.Start.Line, d.Range.Start.Column)
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString("; ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// Diagnostics is a list of diagnostics.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Err returns the diagnostics as an error when there are errors, nil otherwise.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	var parts []string
	for _, d := range ds {
		if d.Severity == SeverityError {
			parts = append(parts, d.String())
		}
	}
	return fmt.Errorf("%s", strings.Join(parts, "\n"))
}

// fromHCL turns hcl diagnostics into Diagnostics with snippets taken from
// sources (file name → content). Sorted by file and position so the output
// is stable.
func fromHCL(in hcl.Diagnostics, sources map[string][]byte) Diagnostics {
	out := make(Diagnostics, 0, len(in))
	for _, d := range in {
		if d == nil {
			continue
		}
		sev := SeverityError
		if d.Severity == hcl.DiagWarning {
			sev = SeverityWarning
		}
		out = append(out, diagnostic(sev, d.Summary, d.Detail, d.Subject, d.Context, sources))
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Range, out[j].Range
		if a == nil || b == nil {
			return a != nil && b == nil
		}
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
	return out
}

func diagnostic(sev, summary, detail string, subject, context *hcl.Range, sources map[string][]byte) Diagnostic {
	d := Diagnostic{Severity: sev, Summary: summary, Detail: detail}
	if subject == nil {
		return d
	}
	d.Range = &Range{
		Filename: subject.Filename,
		Start:    Pos{Line: subject.Start.Line, Column: subject.Start.Column, Byte: subject.Start.Byte},
		End:      Pos{Line: subject.End.Line, Column: subject.End.Column, Byte: subject.End.Byte},
	}
	src, ok := sources[subject.Filename]
	if !ok {
		return d
	}
	d.Snippet = snippet(src, *subject, context)
	return d
}

// snippet cuts the whole lines that r covers out of src. Ranges from hcl
// can point past the end of a truncated file, so every offset is clamped.
func snippet(src []byte, r hcl.Range, context *hcl.Range) *Snippet {
	start := clamp(r.Start.Byte, 0, len(src))
	end := clamp(r.End.Byte, start, len(src))
	lineStart := start
	for lineStart > 0 && src[lineStart-1] != '\n' {
		lineStart--
	}
	lineEnd := end
	for lineEnd < len(src) && src[lineEnd] != '\n' {
		lineEnd++
	}
	s := &Snippet{
		Code:                 strings.TrimRight(string(src[lineStart:lineEnd]), "\r"),
		StartLine:            max(r.Start.Line, 1),
		HighlightStartOffset: start - lineStart,
		HighlightEndOffset:   end - lineStart,
	}
	s.HighlightEndOffset = min(s.HighlightEndOffset, len(s.Code))
	s.HighlightStartOffset = min(s.HighlightStartOffset, s.HighlightEndOffset)
	if context != nil && context.Filename == r.Filename {
		cs := clamp(context.Start.Byte, 0, len(src))
		ce := cs
		for ce < len(src) && src[ce] != '\n' && src[ce] != '{' {
			ce++
		}
		if c := strings.TrimSpace(string(src[cs:ce])); c != "" {
			s.Context = &c
		}
	}
	return s
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }
