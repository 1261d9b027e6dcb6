package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/terracehq/terrace/internal/auth"
)

// Pages renders pages of another package (the sign-in pages) in the UI's
// one layout and stylesheet. Each page file defines "content", reading
// the page's own data as .Data and the layout's fields (.Title, .User,
// .CSRF) as the UI's pages do.
type Pages struct {
	pages  map[string]*template.Template
	logger *slog.Logger
}

// NewPages parses each named page ("signin" is fsys's
// templates/signin.html) with the layout.
func NewPages(fsys fs.FS, logger *slog.Logger, names ...string) (*Pages, error) {
	p := &Pages{pages: map[string]*template.Template{}, logger: logger}
	for _, n := range names {
		t, err := parsePage(fsys, "templates/"+n+".html")
		if err != nil {
			return nil, err
		}
		p.pages[n] = t
	}
	return p, nil
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
	writePage(w, r, p.logger, p.pages[name], status, name, page{Title: title, Data: data})
}

// writePage executes t for pg (filling in the caller and form token) and
// writes it with the pages' security headers, or a plain 500 when it
// cannot be rendered.
func writePage(w http.ResponseWriter, r *http.Request, logger *slog.Logger, t *template.Template, status int, name string, pg page) {
	if t == nil {
		logger.ErrorContext(r.Context(), "rendering page", "page", name, "error", "no such template")
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	pg.User, pg.CSRF = auth.FromContext(r.Context()), CSRFToken(r.Context())
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
