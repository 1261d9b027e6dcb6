package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/sitesettings"
)

// Pages renders pages of another package (the sign-in pages) in the UI's
// one layout and stylesheet. Each page file defines "content", reading
// the page's own data as .Data and the layout's fields (.Title, .User,
// .CSRF) as the UI's pages do.
type Pages struct {
	pages  *pageSet
	logger *slog.Logger
}

// NewPages finds each named page ("signin" is fsys's
// templates/signin.html); each is parsed with the layout when it is first
// rendered.
func NewPages(fsys fs.FS, logger *slog.Logger, names ...string) (*Pages, error) {
	files := map[string]string{}
	for _, n := range names {
		files[n] = "templates/" + n + ".html"
	}
	set, err := newPageSet(fsys, files)
	if err != nil {
		return nil, err
	}
	return &Pages{pages: set, logger: logger}, nil
}

// SetCustomization has every page show what a site admin added
// (customization settings).
func (p *Pages) SetCustomization(c Customizer) { p.pages.custom = c }

// ParseAll parses every page now (a test's check that each parses).
func (p *Pages) ParseAll() error { return p.pages.parseAll() }

// pageSet holds pages by name, each parsed with the layout on its first
// use: the templates are embedded, so a page parses in every run if it
// parses in a test (each package's ParseAll test), and a server nobody
// browses does not hold the parse trees of two dozen pages (about 1 MB
// of heap at idle; docs/design/memory.md).
type pageSet struct {
	pages map[string]func() (*template.Template, error)
	// custom returns the customization every page shows (nil: none).
	custom Customizer
}

// newPageSet makes the set of files (name -> file of fsys), each of which
// must exist.
func newPageSet(fsys fs.FS, files map[string]string) (*pageSet, error) {
	ps := &pageSet{pages: make(map[string]func() (*template.Template, error), len(files))}
	for name, file := range files {
		if _, err := fs.Stat(fsys, file); err != nil {
			return nil, fmt.Errorf("ui: page %s: %w", name, err)
		}
		ps.pages[name] = sync.OnceValues(func() (*template.Template, error) { return parsePage(fsys, file) })
	}
	return ps, nil
}

// get returns the page name, parsed.
func (ps *pageSet) get(name string) (*template.Template, error) {
	parse, ok := ps.pages[name]
	if !ok {
		return nil, fmt.Errorf("no page %q", name)
	}
	return parse()
}

func (ps *pageSet) parseAll() error {
	for name := range ps.pages {
		if _, err := ps.get(name); err != nil {
			return err
		}
	}
	return nil
}

// parsePage parses a page file of fsys with the layout (and the graph
// drawing the UI's own pages use).
func parsePage(fsys fs.FS, file string) (*template.Template, error) {
	t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/graph.html")
	if err == nil {
		t, err = t.ParseFS(fsys, file)
	}
	if err != nil {
		return nil, fmt.Errorf("ui: parsing %s: %w", file, err)
	}
	return t, nil
}

// Render writes the page name with status; the request's principal and
// form token (CSRF.Middleware must have run) fill the layout.
func (p *Pages) Render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	writePage(w, r, p.logger, p.pages, status, name, page{Title: title, Data: data})
}

// writePage executes the page name of set for pg (filling in the caller
// and form token) and writes it with the pages' security headers, or a
// plain 500 when it cannot be rendered.
func writePage(w http.ResponseWriter, r *http.Request, logger *slog.Logger, set *pageSet, status int, name string, pg page) {
	t, err := set.get(name)
	if err != nil {
		logger.ErrorContext(r.Context(), "rendering page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	pg.User, pg.CSRF = auth.FromContext(r.Context()), CSRFToken(r.Context())
	if set.custom != nil {
		// A page shows without it rather than fail for it.
		if c, err := set.custom(r.Context()); err != nil {
			logger.WarnContext(r.Context(), "reading the customization settings", "error", err)
		} else {
			pg.Custom = viewOf(c)
		}
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, pg); err != nil {
		logger.ErrorContext(r.Context(), "rendering page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	setPageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// setPageHeaders are the headers of every page: no framing, no inline or
// foreign scripts and styles.
func setPageHeaders(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	if h.Get("Referrer-Policy") == "" {
		h.Set("Referrer-Policy", "same-origin") // pages with a secret in their URL send none
	}
}

// safeViews remembers the view of each customization shown lately: every
// page shows it, and what Safe makes of it depends on nothing but its
// text (a change is another key).
var safeViews = core.Bounded[sitesettings.Customization, customView]{Max: 8}

// viewOf is c as pages show it, its HTML made safe once.
func viewOf(c sitesettings.Customization) customView {
	if v, ok := safeViews.Get(c); ok {
		return v
	}
	v := customView{SupportEmail: c.SupportEmail, LoginHelp: sitesettings.Safe(c.LoginHelp),
		Footer: sitesettings.Safe(c.Footer), Error: sitesettings.Safe(c.Error), NewUser: sitesettings.Safe(c.NewUser)}
	safeViews.Put(c, v)
	return v
}
