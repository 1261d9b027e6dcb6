package signin

import (
	"embed"
	"net/http"
	"net/url"
	"strings"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pageNames are the templates under templates/, each rendered in the web
// UI's layout (ui.Pages).
var pageNames = []string{"signin", "message", "tokens", "authorize", "invitation", "settings"}

// page is what every sign-in page's data holds; each page adds its own
// fields. The layout reads the title, the signed-in user and the form
// token.
type page struct {
	Error string
}

// render writes a page. Pages never go into caches and send no referrer
// (invitation links carry their secret in the path).
func (s *Service) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	s.pages.Render(w, r, status, name, title, data)
}

type messagePage struct {
	page
	Message, Link string
}

func (s *Service) message(w http.ResponseWriter, r *http.Request, status int, title, msg, link string) {
	s.render(w, r, status, "message", title, messagePage{Message: msg, Link: link})
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
