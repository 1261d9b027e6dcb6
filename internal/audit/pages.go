package audit

import (
	"context"
	"net/http"

	"github.com/terracehq/terrace/internal/auth"
)

// SourceUI is the "source" meta of events done through the web pages
// (/app) rather than the API.
const SourceUI = "ui"

// Sign-in events: resource type "user", the user's ID (or "" for an
// unknown name), and one of these actions.
const (
	SignIn             = "sign-in"
	SignInFailed       = "sign-in-failed"
	SignInRefused      = "sign-in-refused" // the rate limit refused the attempt, or the account is suspended
	SignOut            = "sign-out"
	SignOutEverywhere  = "sign-out-everywhere"
	ChangePassword     = "change-password"
	ChangePasswordFail = "change-password-failed"
)

// RecordPage records an action done through a web page exactly as the
// API request that does the same would be: apiPattern is that request's
// route ("POST /api/v2/workspaces/{id}/actions/lock"), status the code
// that request answers with, values its path parameters, createdID the
// resource a create made. The event is marked
// with source "ui" and the page's route. org names the organization when
// the route does not (POST /api/v2/runs). Call it after the action
// succeeded; it logs what fails, never the caller.
func (s *Service) RecordPage(r *http.Request, org, apiPattern string, status int, values map[string]string, createdID string) {
	p := auth.FromContext(r.Context())
	if p == nil {
		return
	}
	ctx := context.WithoutCancel(r.Context())
	rt := parseRoute(apiPattern)
	if !rt.site && org == "" {
		org, _ = s.organizationBefore(ctx, rt, values)
	}
	e := s.event(r, p, rt, values, status, func() *responseDoc {
		d := &responseDoc{}
		d.Data.ID = createdID
		return d
	})
	s.markPage(r, e)
	s.save(ctx, e, org, rt.site)
}

// RecordSignin records a sign-in event (a site event): action is one of
// SignIn…ChangePasswordFail, userID the user's ID ("" when the name given
// matches nobody), username the name given or the user's. The actor is
// the signed-in caller when there is one, else the user named. meta adds
// details such as the method ("password", "oidc", "invitation"); never a
// secret.
func (s *Service) RecordSignin(r *http.Request, action, userID, username string, meta map[string]string) {
	ctx := context.WithoutCancel(r.Context())
	a := Actor{Kind: auth.KindUser, ID: userID, Name: username}
	if p := auth.FromContext(ctx); p.IsUser() {
		a = actorOf(p)
	}
	e := &Event{
		Actor:    a,
		Resource: Resource{Type: "user", ID: userID, Action: action, Meta: map[string]string{}},
		Request:  Request{ID: RequestID(ctx), ClientIP: clientIP(r), UserAgent: r.UserAgent()},
	}
	for k, v := range meta {
		e.Resource.Meta[k] = v
	}
	s.markPage(r, e)
	s.save(ctx, e, "", true)
}

// markPage marks an event as done through a page and gives it a request
// ID (pages do not pass the API's Recorder).
func (s *Service) markPage(r *http.Request, e *Event) {
	e.Resource.Meta["source"] = SourceUI
	if r.Pattern != "" {
		e.Resource.Meta["page"] = r.Pattern
	}
	if e.Request.ID == "" {
		e.Request.ID = newUUID()
	}
}
