package core

import (
	"fmt"
	"regexp"
)

// Pattern matches a whole string of Min to Max bytes against a regular
// expression. It is how a name rule with a length limit is written: Go
// compiles a bounded repetition such as `[a-z0-9_-]{0,254}` into one copy
// of the class per count, tens or hundreds of kilobytes that a
// package-level rule holds for the life of the process (docs/design/
// memory.md), where `[a-z0-9_-]*` and a length check cost a few hundred
// bytes and say the same. The expression's classes must be ASCII, so that
// bytes are characters (internal/repocheck refuses large bounded
// repetitions in the code).
type Pattern struct {
	re       *regexp.Regexp
	Min, Max int
}

// NewPattern compiles expr (a panic if it does not compile, as
// regexp.MustCompile) for strings of min to max bytes.
func NewPattern(expr string, min, max int) Pattern {
	return Pattern{re: regexp.MustCompile(expr), Min: min, Max: max}
}

// String says the rule: the expression and the length.
func (p Pattern) String() string {
	if p.Min == p.Max {
		return fmt.Sprintf("%s, %d characters", p.re, p.Min)
	}
	return fmt.Sprintf("%s, %d to %d characters", p.re, p.Min, p.Max)
}

// MatchString reports whether s is Min to Max bytes long and matches.
func (p Pattern) MatchString(s string) bool {
	return len(s) >= p.Min && len(s) <= p.Max && p.re.MatchString(s)
}
