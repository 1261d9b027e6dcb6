package sitesettings_test

import (
	"testing"

	"github.com/terracehq/terrace/internal/sitesettings"
)

// TestSafe: of a customization fragment only text and the allowed markup
// reach a page; scripts, styles, event handlers, other attributes and
// links anywhere but http(s), mailto and the site are dropped, text is
// escaped, and what is left is well formed.
func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		`<div>Login Help</div>`:                                 `<div>Login Help</div>`,
		`<p>Custom Footer Content</p>`:                          `<p>Custom Footer Content</p>`,
		`<em>Custom Error Instructions</em>`:                    `<em>Custom Error Instructions</em>`,
		`New user? <a href="#">Click Here</a>`:                  `New user? <a href="#" rel="noopener noreferrer">Click Here</a>`,
		`<a href="https://help.example.com/x?a=1&b=2">help</a>`: `<a href="https://help.example.com/x?a=1&amp;b=2" rel="noopener noreferrer">help</a>`,
		`<a href="mailto:ops@example.com">mail</a>`:             `<a href="mailto:ops@example.com" rel="noopener noreferrer">mail</a>`,
		`<a href="/app/">home</a>`:                              `<a href="/app/" rel="noopener noreferrer">home</a>`,
		`<a href="javascript:alert(1)">x</a>`:                   `<a>x</a>`,
		`<a href=" JaVaScRiPt:alert(1)">x</a>`:                  `<a>x</a>`,
		`<a href="//evil.example/">x</a>`:                       `<a>x</a>`,
		`<a href="data:text/html,hi">x</a>`:                     `<a>x</a>`,
		`<script>alert(1)</script>ok`:                           `ok`,
		`<style>body{display:none}</style>ok`:                   `ok`,
		`<img src=x onerror=alert(1)>pic`:                       `pic`,
		`<p onclick="alert(1)" class="x">p</p>`:                 `<p>p</p>`,
		`<iframe src="https://evil.example"></iframe>f`:         `f`,
		`<b>open <i>both`:                                       `<b>open <i>both</i></b>`,
		`close</b> stray`:                                       `close stray`,
		`<b><i>crossed</b></i>`:                                 `<b><i>crossed</i></b>`,
		`1 < 2 & "3" > 0`:                                       `1 &lt; 2 &amp; &#34;3&#34; &gt; 0`,
		`line<br>two<br/>three`:                                 `line<br>two<br>three`,
		`<ul><li>one</li><li>two</li></ul>`:                     `<ul><li>one</li><li>two</li></ul>`,
		`<svg><script>alert(1)</script></svg>x`:                 `x`,
		`<!-- comment -->text`:                                  `text`,
		``:                                                      ``,
	} {
		if got := string(sitesettings.Safe(in)); got != want {
			t.Errorf("Safe(%q) = %q, want %q", in, got, want)
		}
	}
}
