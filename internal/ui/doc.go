// Package ui serves Terrace's web pages under /app/: server-rendered
// html/template pages (templates, one CSS and one small JS file embedded;
// no build step) that call the domain services directly, never the API
// over HTTP. Each page decides what to show and allow by asking
// internal/authz the same questions the API guard asks, so a member
// without access gets a not-found page and no button. Unsafe requests pass
// the CSRF protection of csrf.go (http.CrossOriginProtection and a
// per-form token bound to a cookie). Live run logs are server-sent events
// from an /app endpoint that follows the run's log as the API's log
// endpoint does. See docs/design/ui.md.
package ui
