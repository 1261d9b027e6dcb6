package signin

import (
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
)

//go:embed templates/*.html
var templateFiles embed.FS

type templates struct{ pages map[string]*template.Template }

func parseTemplates() (*templates, error) {
	t := &templates{pages: map[string]*template.Template{}}
	for _, name := range []string{"signin", "message", "tokens", "authorize", "invitation"} {
		p, err := template.ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		t.pages[name] = p
	}
	return t, nil
}

// page is what every template reads; each page adds its own fields.
type page struct {
	Title string
	Error string
	User  *auth.Principal
}

// render writes a page. Pages never go into caches and send no referrer
// (invitation links carry their secret in the path).
func (s *Service) render(w http.ResponseWriter, status int, name string, data any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	if err := s.templates.pages[name].ExecuteTemplate(w, name+".html", data); err != nil {
		s.opts.Logger.Error("rendering a sign-in page", "page", name, "err", err)
	}
}

type messagePage struct {
	page
	Message, Link string
}

func (s *Service) message(w http.ResponseWriter, r *http.Request, status int, title, msg, link string) {
	s.render(w, status, "message", messagePage{page: page{Title: title, User: auth.FromContext(r.Context())}, Message: msg, Link: link})
}

// localPath returns next when it is a path on this server, else /app/: a
// sign-in never sends the browser elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n") {
		return "/app/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/app/"
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
