package core

import (
	"regexp"
	"strings"
	"testing"
)

// TestPatternSaysWhatTheBoundedExpressionSays: each pattern accepts
// exactly what the bounded expression it replaces accepts, at and around
// its limits.
func TestPatternSaysWhatTheBoundedExpressionSays(t *testing.T) {
	cases := []struct {
		bounded string
		p       Pattern
		alpha   string
	}{
		{`^[0-9A-Za-z][0-9A-Za-z_-]{0,63}$`, NewPattern(`^[0-9A-Za-z][0-9A-Za-z_-]*$`, 1, 64), "aZ9_-"},
		{`^[A-Za-z0-9][A-Za-z0-9-]{0,61}[A-Za-z0-9]$`, NewPattern(`^[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]$`, 2, 63), "a-9"},
		{`^[!-~]{1,128}$`, NewPattern(`^[!-~]+$`, 1, 128), "!~a "},
		{`^[0-9a-f]{32}$`, NewPattern(`^[0-9a-f]+$`, 32, 32), "0fz"},
	}
	for _, c := range cases {
		re := regexp.MustCompile(c.bounded)
		for n := 0; n <= c.p.Max+2; n++ {
			for i := range c.alpha {
				for _, s := range []string{strings.Repeat(c.alpha[i:i+1], n), strings.Repeat(c.alpha, n)[:min(n, len(c.alpha)*n)]} {
					if got, want := c.p.MatchString(s), re.MatchString(s); got != want {
						t.Errorf("%s: %q (%d bytes): pattern says %v, the bounded expression %v", c.bounded, s, len(s), got, want)
					}
				}
			}
		}
	}
}
