package vcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/terracehq/terrace/internal/vcshost"
)

// MaxWebhookBody bounds a delivery (GitHub's own limit on a payload).
const MaxWebhookBody = 25 << 20

// Webhook answers the deliveries of the hosts at
// POST /webhooks/vcs/{id}: no token, the connection's secret signs them.
// A push to the connection's branch (or of a tag its tags-regex
// matches) queues the commit's fetch and run and answers 202; a ping 200;
// anything else 200 with what was ignored. A delivery that is not signed
// with the secret is refused (401) and changes nothing.
func (s *Service) Webhook(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": msg})
	}
	ctx := r.Context()
	c, err := s.connByWebhook(ctx, s.db, r.PathValue("id"))
	if err != nil {
		s.logger.Error("reading a VCS connection for a webhook", "error", err)
		reply(http.StatusInternalServerError, "internal error")
		return
	}
	if c == nil {
		reply(http.StatusNotFound, "nothing is connected through this webhook")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		reply(http.StatusRequestEntityTooLarge, "the delivery is larger than 25 MB")
		return
	}
	ev, err := vcshost.ParseWebhook(r.Header, body, c.secret)
	if errors.Is(err, vcshost.ErrUnsigned) || errors.Is(err, vcshost.ErrBadSignature) {
		reply(http.StatusUnauthorized, err.Error())
		return
	}
	if err != nil {
		reply(http.StatusBadRequest, err.Error())
		return
	}
	switch ev.Kind {
	case "ping":
		reply(http.StatusOK, "pong")
		return
	case "pull_request":
		if c.of.module && !s.testsModule(ctx, c) {
			reply(http.StatusOK, "ignored: registry modules publish versions from tags or through the API, not from pull requests (a module publishing from a branch, with tests enabled, tests them)")
			return
		}
		if c.of.policySet {
			reply(http.StatusOK, "ignored: a policy set takes the pushes to its branch, not pull requests")
			return
		}
		s.pullRequest(w, r, c, ev, reply)
		return
	case "push":
	default:
		reply(http.StatusOK, "ignored: Terrace acts on pushes and pull requests ("+ev.Kind+" is neither)")
		return
	}
	if ev.Deleted || ev.SHA == "" || ev.SHA == vcshost.ZeroSHA {
		reply(http.StatusOK, "ignored: a deleted ref")
		return
	}
	test := false
	if c.of.module && c.branch != "" {
		if !s.testsModule(ctx, c) {
			reply(http.StatusOK, "ignored: a module publishing from a branch makes versions through the API (POST its versions with a commit-sha); with tests enabled, its pushes are tested")
			return
		}
		test = true
	}
	if c.tagsRegex != "" {
		re, err := regexp.Compile(c.tagsRegex)
		if err != nil || ev.Tag == "" || !re.MatchString(ev.Tag) {
			reply(http.StatusOK, "ignored: the workspace runs on tags matching "+c.tagsRegex)
			return
		}
	} else if ev.Branch != c.branch {
		reply(http.StatusOK, "ignored: the workspace runs on pushes to "+c.branch)
		return
	}
	in := ingress{Workspace: c.owner, Stack: c.of.stack, Module: c.of.module, PolicySet: c.of.policySet, Webhook: c.webhook, SHA: ev.SHA, Branch: ev.Branch, Tag: ev.Tag, Before: ev.Before,
		Sender: ev.Sender, Changed: ev.Changed, Truncated: ev.Truncated, Test: test}
	if ev.HeadCommit != nil {
		in.Message = ev.HeadCommit.Message
	}
	if err := s.enqueue(ctx, s.db, ingressMessage(in)); err != nil {
		s.logger.Error("queueing a pushed commit", "owner", c.owner, "error", err)
		reply(http.StatusInternalServerError, "internal error")
		return
	}
	reply(http.StatusAccepted, "queued")
}

// pullRequest queues a speculative plan of a pull request's head when it
// targets the connection's branch and was opened, reopened or pushed to.
func (s *Service) pullRequest(w http.ResponseWriter, r *http.Request, c *connection, ev *vcshost.Event, reply func(int, string)) {
	pr := ev.PR
	switch {
	case pr == nil || ev.SHA == "":
		reply(http.StatusBadRequest, "a pull request event without its request")
		return
	case pr.Action != "opened" && pr.Action != "synchronize" && pr.Action != "reopened":
		reply(http.StatusOK, "ignored: pull request "+pr.Action)
		return
	case pr.Base != c.branch:
		reply(http.StatusOK, "ignored: the pull request targets "+pr.Base+", the connection follows "+c.branch)
		return
	case pr.HeadRepo != "" && !strings.EqualFold(pr.HeadRepo, ev.Repo):
		// A fork's code would run with the workspace's variables and
		// credentials: never planned (the site setting
		// allow-speculative-plans-on-pull-requests-from-forks stays false).
		reply(http.StatusOK, "ignored: pull requests from forks are not planned")
		return
	}
	in := ingress{Workspace: c.owner, Stack: c.of.stack, Module: c.of.module, Test: c.of.module, Webhook: c.webhook, SHA: ev.SHA, Branch: pr.Head, PR: pr.Number, PRTitle: pr.Title, PRURL: pr.URL,
		Sender: ev.Sender, Message: fmt.Sprintf("Pull request #%d: %s", pr.Number, pr.Title)}
	if err := s.enqueue(r.Context(), s.db, ingressMessage(in)); err != nil {
		s.logger.Error("queueing a pull request's plan", "owner", c.owner, "error", err)
		reply(http.StatusInternalServerError, "internal error")
		return
	}
	reply(http.StatusAccepted, "queued")
}

// testsModule reports whether a module's connection tests its commits:
// it publishes from a branch and its tests are enabled.
func (s *Service) testsModule(ctx context.Context, c *connection) bool {
	if c.branch == "" {
		return false
	}
	m, err := s.ingress.Modules.VCSModule(ctx, c.owner)
	return err == nil && m.TestsEnabled
}
