// Package vcshost talks to a repository host for VCS-driven workspaces:
// it reads branch heads, installs and removes the webhook that announces
// pushes and pull requests, posts commit statuses, fetches a commit's
// files with the real git binary, and verifies and decodes the webhooks
// the host delivers.
//
// The kinds are HCP Terraform's service-provider strings it implements
// (github, github_enterprise) plus gitea and forgejo (one API, Gitea's).
//
// The token is a secret: it is sent only in an Authorization header (to
// the API, and to git through its environment), and neither a Host
// printed nor an error of this package ever shows it.
package vcshost

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is the kind of a repository host.
type Kind string

// The kinds implemented.
const (
	Gitea            Kind = "gitea"
	Forgejo          Kind = "forgejo" // Gitea's API and webhooks
	GitHub           Kind = "github"
	GitHubEnterprise Kind = "github_enterprise"
)

// Known reports whether k is a kind this package implements.
func Known(k string) bool {
	switch Kind(k) {
	case Gitea, Forgejo, GitHub, GitHubEnterprise:
		return true
	}
	return false
}

func (k Kind) gitea() bool { return k == Gitea || k == Forgejo }

// Limits.
const (
	// MaxAnswer bounds an API answer read.
	MaxAnswer = 4 << 20
	// MaxDescription bounds a status's description, in characters
	// (GitHub refuses longer ones).
	MaxDescription = 140
)

// Host is a repository host and the token to act on it with. Build it
// with New.
type Host struct {
	Kind Kind
	// HTTPURL is the web and git address: https://github.com,
	// https://git.example.com.
	HTTPURL string
	// APIURL is the API's root: https://api.github.com,
	// https://ghe.example.com/api/v3, https://git.example.com/api/v1.
	APIURL string
	// Token is a personal access token (or an OAuth or app token).
	Token string
	// CA holds PEM certificates trusted beyond the system's (a host with
	// a private CA); git trusts only these when set.
	CA []byte
	// Client makes the API calls.
	Client *http.Client
}

// New validates h and fills in what it leaves empty: the API URL from
// the web URL (GitHub's is api.github.com; GitHub Enterprise's
// HTTPURL/api/v3; Gitea's HTTPURL/api/v1) and, without a Client, one that
// trusts the system's CAs and CA, with a 30 s timeout.
func New(h Host) (*Host, error) {
	if !Known(string(h.Kind)) {
		return nil, fmt.Errorf("vcshost: unknown host kind %q", h.Kind)
	}
	if h.HTTPURL == "" && h.Kind == GitHub {
		h.HTTPURL = "https://github.com"
	}
	h.HTTPURL = strings.TrimRight(h.HTTPURL, "/")
	if err := checkURL("HTTP URL", h.HTTPURL); err != nil {
		return nil, err
	}
	if h.APIURL == "" {
		switch h.Kind {
		case GitHub:
			h.APIURL = "https://api.github.com"
		case GitHubEnterprise:
			h.APIURL = h.HTTPURL + "/api/v3"
		default:
			h.APIURL = h.HTTPURL + "/api/v1"
		}
	}
	h.APIURL = strings.TrimRight(h.APIURL, "/")
	if err := checkURL("API URL", h.APIURL); err != nil {
		return nil, err
	}
	if h.Client == nil {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if len(h.CA) > 0 && !pool.AppendCertsFromPEM(h.CA) {
			return nil, errors.New("vcshost: the CA holds no PEM certificate")
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		h.Client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	return &h, nil
}

func checkURL(what, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("vcshost: the %s %q is not an http(s) URL without credentials, query or fragment", what, s)
	}
	return nil
}

// String never shows the token, so that a Host printed by mistake leaks
// nothing.
func (h Host) String() string {
	return fmt.Sprintf("vcshost.Host{Kind: %s, HTTPURL: %s, APIURL: %s, Token: [redacted]}", h.Kind, h.HTTPURL, h.APIURL)
}

// GoString is String for %#v.
func (h Host) GoString() string { return h.String() }

// Commit is a commit as a host shows it.
type Commit struct {
	SHA     string
	Message string
	// Author is the git author's name.
	Author string
	// URL is the commit's web page.
	URL string
}

// Status is a commit status: the state of one check of a commit.
type Status struct {
	// State is pending, success, failure or error.
	State string
	// Context names the check (a status of the same context replaces
	// the last).
	Context string
	// Description is a short sentence, cut to MaxDescription characters.
	Description string
	// TargetURL is where the check's details are (the run's page).
	TargetURL string
}

// Errors that errors.Is finds in the errors of the calls to a host.
var (
	// ErrNotFound: the API answered 404 (missing, or hidden from the
	// token).
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the API answered 401 or 403, or git's fetch was
	// refused (the token, or a repository git cannot see).
	ErrUnauthorized = errors.New("unauthorized")
)

// HostError is an answer of the host other than success.
type HostError struct {
	// Op says what was asked ("reading branch main of acme/infra").
	Op string
	// Status is the host's HTTP status.
	Status int
	// Message is the start of the host's message, or a sentence of ours
	// for a status with a known meaning.
	Message string
}

func (e *HostError) Error() string {
	return fmt.Sprintf("%s: the host answered %d: %s", e.Op, e.Status, e.Message)
}

// Is matches ErrNotFound for 404 and ErrUnauthorized for 401 and 403.
func (e *HostError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	}
	return false
}

// splitRepo checks that repo is owner/name and returns the API path of
// the repository, escaped.
func splitRepo(repo string) (string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") || owner == "." || owner == ".." || name == "." || name == ".." {
		return "", fmt.Errorf("vcshost: %q is not a repository name of the form owner/name", repo)
	}
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name), nil
}

// CloneURL is the HTTPS address git clones repo (owner/name) from.
func (h *Host) CloneURL(repo string) string {
	return strings.TrimRight(h.HTTPURL, "/") + "/" + repo + ".git"
}

// Unreachable says why a request's host (the URL in err, a *url.Error as
// an HTTP client returns) could not be asked, as a person reads it:
// "could not reach git.example.com: connection refused", not the request
// Go's client repeats ("Get \"https://…\": dial tcp …: connect: …").
// A certificate the host's chain fails to verify keeps its reason whole:
// that is what an administrator fixes (--vcs-ca-file).
func Unreachable(err error) string {
	host := "the host"
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			host = u.Host
		}
		err = ue.Err
	}
	reason := err.Error()
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		reason = "no answer in time"
	case errors.As(err, &dns):
		reason = "no such host"
		if dns.IsTimeout || dns.IsTemporary {
			reason = "its name could not be looked up"
		}
	case errors.As(err, &op) && op.Err != nil:
		reason = op.Err.Error()
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			reason = sys.Err.Error()
		}
	}
	return "could not reach " + host + ": " + reason
}

// do makes one API call: in, when not nil, is sent as JSON; a 2xx answer
// is decoded into out when out is not nil. Anything else is a HostError.
func (h *Host) do(ctx context.Context, op, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(h.APIURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.Kind.gitea() {
		req.Header.Set("Accept", "application/json")
		if h.Token != "" {
			req.Header.Set("Authorization", "token "+h.Token)
		}
	} else {
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
		if h.Token != "" {
			req.Header.Set("Authorization", "Bearer "+h.Token)
		}
	}
	c := h.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	res, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s", op, h.redact(Unreachable(err)))
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, MaxAnswer+1))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %s", op, h.redact(err.Error()))
	}
	if len(data) > MaxAnswer {
		return fmt.Errorf("%s: the host's answer is over %d bytes", op, MaxAnswer)
	}
	if res.StatusCode/100 != 2 {
		return &HostError{Op: op, Status: res.StatusCode, Message: h.redact(hostMessage(data))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s: the host's answer is not the JSON expected: %v", op, err)
		}
	}
	return nil
}

// hostMessage is the start of an error answer: its "message" when JSON.
func hostMessage(data []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	s := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &m) == nil && m.Message != "" {
		s = m.Message
	}
	if s == "" {
		return "(no message)"
	}
	return cut(strings.Join(strings.Fields(s), " "), 200)
}

// cut is s cut to n characters, marked when cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// redact removes the token from s.
func (h *Host) redact(s string) string { return redactToken(s, h.Token) }

func redactToken(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "[redacted]")
}

// repoNotFound rewords a 404 as the repository's absence.
func repoNotFound(err error, repo string) error {
	var he *HostError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		he.Message = "repository " + repo + " not found or the token cannot read it"
	}
	return err
}

// Branch returns the head commit of branch in repo (owner/name).
func (h *Host) Branch(ctx context.Context, repo, branch string) (*Commit, error) {
	path, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	if branch == "" {
		return nil, errors.New("vcshost: no branch named")
	}
	op := "reading branch " + branch + " of " + repo
	var c *Commit
	if h.Kind.gitea() {
		c, err = giteaBranch(ctx, h, op, path, branch)
	} else {
		c, err = githubBranch(ctx, h, op, path, branch)
	}
	var he *HostError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		// A 404 is the branch's or the repository's: ask which.
		if _, rerr := h.DefaultBranch(ctx, repo); errors.Is(rerr, ErrNotFound) {
			return nil, rerr
		}
		he.Message = "branch " + branch + " not found in " + repo
	}
	if err != nil {
		return nil, err
	}
	if !isSHA(c.SHA) {
		return nil, fmt.Errorf("%s: the host named no commit", op)
	}
	return c, nil
}

// DefaultBranch returns the name of repo's default branch.
func (h *Host) DefaultBranch(ctx context.Context, repo string) (string, error) {
	path, err := splitRepo(repo)
	if err != nil {
		return "", err
	}
	var r struct {
		DefaultBranch string `json:"default_branch"`
	}
	if err := h.do(ctx, "reading repository "+repo, "GET", path, nil, &r); err != nil {
		return "", repoNotFound(err, repo)
	}
	if r.DefaultBranch == "" {
		return "", fmt.Errorf("reading repository %s: the host names no default branch", repo)
	}
	return r.DefaultBranch, nil
}

// CreateHook installs a webhook on repo that delivers push and pull
// request events as JSON to url, signed with secret, and returns its ID.
func (h *Host) CreateHook(ctx context.Context, repo, url, secret string) (string, error) {
	path, err := splitRepo(repo)
	if err != nil {
		return "", err
	}
	if secret == "" {
		return "", errors.New("vcshost: a webhook needs a secret")
	}
	if err := checkURL("webhook URL", url); err != nil {
		return "", err
	}
	body := map[string]any{
		"active": true,
		"events": []string{"push", "pull_request"},
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}
	if h.Kind.gitea() {
		body["type"] = "gitea"
	} else {
		body["name"] = "web"
		body["config"].(map[string]string)["insecure_ssl"] = "0"
	}
	var r struct {
		ID json.Number `json:"id"`
	}
	if err := h.do(ctx, "creating a webhook on "+repo, "POST", path+"/hooks", body, &r); err != nil {
		return "", repoNotFound(err, repo)
	}
	if r.ID == "" {
		return "", fmt.Errorf("creating a webhook on %s: the host returned no ID", repo)
	}
	return r.ID.String(), nil
}

// HooksTo returns the IDs of repo's webhooks that deliver to url: a
// connection's webhook URL is its own, so these are webhooks an earlier
// attempt made (one whose ID was lost).
func (h *Host) HooksTo(ctx context.Context, repo, url string) ([]string, error) {
	path, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	// GitHub pages by per_page (at most 100), Gitea by limit (at most
	// 50 by default); a repository has a few webhooks (GitHub allows 20
	// per event).
	size, param := 100, "per_page"
	if h.Kind.gitea() {
		size, param = 50, "limit"
	}
	var ids []string
	for page := 1; page <= 10; page++ {
		var hooks []struct {
			ID     json.Number `json:"id"`
			Config struct {
				URL string `json:"url"`
			} `json:"config"`
		}
		if err := h.do(ctx, "listing the webhooks of "+repo, "GET", fmt.Sprintf("%s/hooks?%s=%d&page=%d", path, param, size, page), nil, &hooks); err != nil {
			return nil, repoNotFound(err, repo)
		}
		for _, x := range hooks {
			if x.Config.URL == url && x.ID != "" {
				ids = append(ids, x.ID.String())
			}
		}
		if len(hooks) < size {
			break
		}
	}
	return ids, nil
}

// DeleteHook removes webhook id from repo; a webhook already gone is not
// an error.
func (h *Host) DeleteHook(ctx context.Context, repo, id string) error {
	path, err := splitRepo(repo)
	if err != nil {
		return err
	}
	if id == "" || strings.Trim(id, "0123456789") != "" {
		return fmt.Errorf("vcshost: %q is not a webhook ID", id)
	}
	err = h.do(ctx, "deleting webhook "+id+" of "+repo, "DELETE", path+"/hooks/"+id, nil, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// SetStatus posts a status for commit sha of repo.
func (h *Host) SetStatus(ctx context.Context, repo, sha string, s Status) error {
	path, err := splitRepo(repo)
	if err != nil {
		return err
	}
	if !isSHA(sha) {
		return fmt.Errorf("vcshost: %q is not a commit SHA", sha)
	}
	switch s.State {
	case "pending", "success", "failure", "error":
	default:
		return fmt.Errorf("vcshost: %q is not a status state (pending, success, failure, error)", s.State)
	}
	body := map[string]string{"state": s.State, "context": s.Context, "description": cut(s.Description, MaxDescription)}
	if s.TargetURL != "" {
		body["target_url"] = s.TargetURL
	}
	err = h.do(ctx, "setting status "+s.Context+" of "+sha+" in "+repo, "POST", path+"/statuses/"+sha, body, nil)
	return repoNotFound(err, repo)
}

// isSHA reports whether s is a full SHA-1 or SHA-256 commit ID.
func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// IsSHA reports whether s is a full commit ID (40 or 64 lowercase
// hexadecimal digits), as the API takes one from a user.
func IsSHA(s string) bool { return isSHA(s) }

// User returns the login of the token's own user (GET /user, on GitHub
// and Gitea alike).
func (h *Host) User(ctx context.Context) (string, error) {
	var u struct {
		Login string `json:"login"`
	}
	if err := h.do(ctx, "reading the token's user", http.MethodGet, "/user", nil, &u); err != nil {
		return "", err
	}
	if u.Login == "" {
		return "", errors.New("reading the token's user: the host named no login")
	}
	return u.Login, nil
}

// MaxRepositories bounds what Repositories lists.
const MaxRepositories = 500

// Repositories lists the owner/name of the repositories the token's user
// may read (GET /user/repos: their own, their organizations' and those
// they collaborate on), by name, at most MaxRepositories.
func (h *Host) Repositories(ctx context.Context) ([]string, error) {
	size, param, sort := 100, "per_page", "&sort=full_name"
	if h.Kind.gitea() {
		size, param, sort = 50, "limit", ""
	}
	var names []string
	for page := 1; len(names) < MaxRepositories; page++ {
		var repos []struct {
			FullName string `json:"full_name"`
		}
		if err := h.do(ctx, "listing the token's repositories", "GET", fmt.Sprintf("/user/repos?%s=%d&page=%d%s", param, size, page, sort), nil, &repos); err != nil {
			return nil, err
		}
		for _, r := range repos {
			if r.FullName != "" && len(names) < MaxRepositories {
				names = append(names, r.FullName)
			}
		}
		if len(repos) < size {
			break
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
