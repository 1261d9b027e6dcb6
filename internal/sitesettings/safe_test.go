package sitesettings_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

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

// FuzzSafe: whatever a site admin writes, what Safe returns, read back by
// an HTML tokenizer, holds only the allowed tags, no attribute but a link's
// href (to http, https, mailto or the site) and its rel, and no script.
func FuzzSafe(f *testing.F) {
	for _, s := range []string{`<div>Login Help</div>`, `<a href="javascript:alert(1)">x</a>`, `<script>x</script>`,
		`<p onclick=x>p</p>`, `<b><i>x</b>`, `<a href="https://e.example/?a=1&b=2" title=t>t</a>`, `<svg/onload=alert(1)>`,
		`<a href="&#x6A;avascript:alert(1)">e</a>`, "<a href=\"java\tscript:x\">t</a>", `<<script>script>`, `<textarea><b>x</b></textarea>`} {
		f.Add(s)
	}
	allowed := map[string]bool{"a": true, "b": true, "strong": true, "i": true, "em": true, "p": true, "div": true,
		"span": true, "br": true, "ul": true, "ol": true, "li": true, "code": true}
	f.Fuzz(func(t *testing.T, in string) {
		out := string(sitesettings.Safe(in))
		if strings.Contains(strings.ToLower(out), "<script") {
			t.Fatalf("Safe(%q) = %q holds a script", in, out)
		}
		z := html.NewTokenizer(strings.NewReader(out))
		for {
			tt := z.Next()
			if tt == html.ErrorToken {
				return
			}
			tok := z.Token()
			if tt != html.StartTagToken && tt != html.EndTagToken && tt != html.SelfClosingTagToken {
				continue
			}
			if !allowed[tok.Data] {
				t.Fatalf("Safe(%q) = %q holds a <%s>", in, out, tok.Data)
			}
			for _, a := range tok.Attr {
				switch {
				case tok.Data == "a" && a.Key == "rel" && a.Val == "noopener noreferrer":
				case tok.Data == "a" && a.Key == "href":
					v := strings.ToLower(strings.TrimSpace(a.Val))
					if !strings.HasPrefix(v, "http:") && !strings.HasPrefix(v, "https:") && !strings.HasPrefix(v, "mailto:") &&
						!strings.HasPrefix(v, "#") && !(strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//")) {
						t.Fatalf("Safe(%q) = %q links to %q", in, out, a.Val)
					}
				default:
					t.Fatalf("Safe(%q) = %q keeps the attribute %s=%q on <%s>", in, out, a.Key, a.Val, tok.Data)
				}
			}
		}
	})
}
