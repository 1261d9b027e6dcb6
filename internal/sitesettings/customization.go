package sitesettings

import (
	"context"
	"encoding/json"
	"html/template"
	"net/mail"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/html"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

const groupCustomization = "customization"

// MaxCustomization bounds each customization text.
const MaxCustomization = 16 << 10

// Customization is what a site admin adds to the pages people see
// (Terraform Enterprise's customization settings): a support email
// address, and HTML fragments for the sign-in page (login help, a word to
// new users), the foot of every page and the error pages. The fragments
// are kept as given and shown through Safe.
type Customization struct {
	SupportEmail string `json:"support-email-address,omitempty"`
	LoginHelp    string `json:"login-help,omitempty"`
	Footer       string `json:"footer,omitempty"`
	Error        string `json:"error,omitempty"`
	NewUser      string `json:"new-user,omitempty"`
}

// Customization returns the customization in force; whoever asks (every
// page shows it).
func (s *Service) Customization(ctx context.Context) (Customization, error) {
	var c Customization
	_, _, err := s.row(ctx, s.o.DB, groupCustomization, &c)
	return c, err
}

// UpdateCustomization applies a site admin's PATCH (its attributes as
// sent; null or absent: unchanged) and returns the customization in force.
// A bad attribute is a 422 naming it, and nothing changes.
func (s *Service) UpdateCustomization(ctx context.Context, attrs map[string]json.RawMessage) (Customization, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return Customization{}, err
	}
	var c Customization
	err := s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if _, _, err := s.row(ctx, tx, groupCustomization, &c); err != nil {
			return err
		}
		fields := map[string]*string{"support-email-address": &c.SupportEmail, "login-help": &c.LoginHelp,
			"footer": &c.Footer, "error": &c.Error, "new-user": &c.NewUser}
		names := make([]string, 0, len(attrs))
		for name := range attrs {
			names = append(names, name)
		}
		slices.Sort(names)
		var problems []string
		for _, name := range names {
			dst, ok := fields[name]
			if !ok {
				problems = append(problems, name+" is not a customization setting")
				continue
			}
			if string(attrs[name]) == "null" {
				continue
			}
			var v string
			if err := json.Unmarshal(attrs[name], &v); err != nil {
				problems = append(problems, name+" must be a string")
				continue
			}
			if len(v) > MaxCustomization {
				problems = append(problems, name+" is longer than 16 KiB")
				continue
			}
			if name == "support-email-address" && v != "" {
				if a, err := mail.ParseAddress(v); err != nil || a.Address != v {
					problems = append(problems, "support-email-address must be an email address, such as support@example.com")
					continue
				}
			}
			*dst = v
		}
		if len(problems) > 0 {
			return core.Invalid("%s", strings.Join(problems, "; "))
		}
		return s.write(ctx, tx, groupCustomization, c, nil)
	})
	return c, err
}

// Safe returns fragment as HTML a page may show: the text, and of the
// markup only paragraphs, line breaks, lists, emphasis, code and links
// (http, https and mailto addresses, or within the site), without any
// other attribute. Everything else is dropped, with the text of script
// and style elements; what is left is well formed.
func Safe(fragment string) template.HTML {
	var b strings.Builder
	var open []string
	skip := 0 // inside script or style
	z := html.NewTokenizer(strings.NewReader(fragment))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break // the end (io.EOF) or input the tokenizer gave up on
		}
		tok := z.Token()
		switch tt {
		case html.TextToken:
			if skip == 0 {
				b.WriteString(template.HTMLEscapeString(tok.Data))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name := tok.Data
			if name == "script" || name == "style" {
				if tt == html.StartTagToken {
					skip++
				}
				continue
			}
			if skip > 0 || !safeTags[name] {
				continue
			}
			if name == "br" {
				b.WriteString("<br>")
				continue
			}
			b.WriteString("<" + name)
			if name == "a" {
				for _, a := range tok.Attr {
					if a.Key == "href" && safeHref(a.Val) {
						b.WriteString(` href="` + template.HTMLEscapeString(a.Val) + `" rel="noopener noreferrer"`)
						break
					}
				}
			}
			b.WriteString(">")
			if tt == html.SelfClosingTagToken {
				b.WriteString("</" + name + ">")
				continue
			}
			open = append(open, name)
		case html.EndTagToken:
			name := tok.Data
			if name == "script" || name == "style" {
				if skip > 0 {
					skip--
				}
				continue
			}
			if skip > 0 || !safeTags[name] || name == "br" {
				continue
			}
			// Close up to the matching open tag; a stray end tag is dropped.
			for j := len(open) - 1; j >= 0; j-- {
				if open[j] != name {
					continue
				}
				for k := len(open) - 1; k >= j; k-- {
					b.WriteString("</" + open[k] + ">")
				}
				open = open[:j]
				break
			}
		}
	}
	for k := len(open) - 1; k >= 0; k-- {
		b.WriteString("</" + open[k] + ">")
	}
	return template.HTML(b.String())
}

var safeTags = map[string]bool{"a": true, "b": true, "strong": true, "i": true, "em": true, "p": true, "div": true,
	"span": true, "br": true, "ul": true, "ol": true, "li": true, "code": true}

// safeHref allows links to http, https and mailto addresses, and paths and
// fragments of the site.
func safeHref(v string) bool {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "#") || (strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//")) {
		return !strings.ContainsAny(v, "\\")
	}
	u, err := url.Parse(v)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "mailto":
		return true
	}
	return false
}
