package vcshost

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Event is a webhook delivery, decoded.
type Event struct {
	// Kind is push, pull_request or ping; any other event the host sends
	// keeps its name and carries only Repo, Sender and Delivery.
	Kind string
	// Delivery is the host's ID of the delivery (the same on a redelivery).
	Delivery string
	// Repo is the repository's full name, owner/name.
	Repo string
	// Sender is the login of who caused the event.
	Sender string

	// Of a push: the ref pushed is Branch or Tag; SHA is its new commit
	// and Before its old one (all zeros for a new ref). Deleted: the ref
	// was deleted (SHA is all zeros).
	Branch, Tag string
	SHA, Before string
	Deleted     bool
	// Changed lists, sorted and once each, the files the push's listed
	// commits added, modified or removed.
	Changed []string
	// Truncated: the payload may list fewer commits than the push
	// brought, so Changed may miss files: Gitea lists at most [ui]
	// FEED_MAX_COMMIT_NUM (5 by default) and says how many there were;
	// GitHub lists at most 2048.
	Truncated bool
	// HeadCommit is the push's newest commit, when the payload has one.
	HeadCommit *Commit

	// PR is set for pull_request (and SHA is the request's head commit).
	PR *PullRequest
}

// PullRequest is a pull request event's request.
type PullRequest struct {
	// Action is GitHub's word: opened, synchronize, closed, reopened,
	// edited... (Gitea's "synchronized" is given as synchronize).
	Action string
	Number int
	Title  string
	URL    string
	// Head is the proposed branch (in HeadRepo, owner/name: another
	// repository for a fork) at HeadSHA; Base the branch it targets.
	Head, HeadSHA, HeadRepo string
	Base, BaseSHA           string
	Merged                  bool
	// MergeSHA is the merge commit of a merged request.
	MergeSHA string
}

// maxGitHubCommits is the most commits GitHub lists in a push's payload.
const maxGitHubCommits = 2048

// ZeroSHA is the SHA a push names for a ref that did not exist before it
// or does not after it.
const ZeroSHA = "0000000000000000000000000000000000000000"

// Errors of ParseWebhook; errors.Is finds them.
var (
	// ErrUnsigned: the delivery carries no signature.
	ErrUnsigned = errors.New("the webhook delivery is not signed")
	// ErrBadSignature: the signature is malformed or not the body's.
	ErrBadSignature = errors.New("the webhook delivery's signature is wrong")
)

// ParseWebhook verifies and decodes one delivery. The signature, an
// HMAC-SHA256 of the body keyed with secret, is checked first (in
// constant time), before anything of the body is read: from
// X-Hub-Signature-256 ("sha256=" and hex, GitHub's, which Gitea sends
// too), else X-Gitea-Signature, X-Forgejo-Signature or X-Gogs-Signature
// (bare hex). The event is X-GitHub-Event's, else X-Gitea-Event's,
// X-Forgejo-Event's or X-Gogs-Event's. The body must be one JSON object
// (a hook with content type json); the caller bounds its size.
func ParseWebhook(header http.Header, body []byte, secret string) (*Event, error) {
	if secret == "" {
		return nil, errors.New("vcshost: no webhook secret to verify the delivery with")
	}
	if err := verify(header, body, secret); err != nil {
		return nil, err
	}
	kind := firstHeader(header, "X-GitHub-Event", "X-Gitea-Event", "X-Forgejo-Event", "X-Gogs-Event")
	if kind == "" {
		return nil, errors.New("vcshost: the webhook delivery names no event (X-GitHub-Event, X-Gitea-Event)")
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("vcshost: the webhook delivery's body is not a JSON object (the hook's content type must be json)")
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("vcshost: the webhook delivery's body does not decode: %v", err)
	}
	e := &Event{
		Kind:     kind,
		Delivery: firstHeader(header, "X-GitHub-Delivery", "X-Gitea-Delivery", "X-Forgejo-Delivery", "X-Gogs-Delivery"),
		Repo:     p.Repository.FullName,
		Sender:   p.Sender.Login,
	}
	if e.Sender == "" {
		e.Sender = p.Sender.Username
	}
	switch kind {
	case "ping":
		return e, nil
	case "push":
		if e.Repo == "" || p.Ref == "" || !isSHA(p.After) {
			return nil, errors.New("vcshost: the push names no repository, ref or commit")
		}
		switch {
		case strings.HasPrefix(p.Ref, "refs/heads/"):
			e.Branch = strings.TrimPrefix(p.Ref, "refs/heads/")
		case strings.HasPrefix(p.Ref, "refs/tags/"):
			e.Tag = strings.TrimPrefix(p.Ref, "refs/tags/")
		default:
			return nil, fmt.Errorf("vcshost: the push's ref %q is neither a branch nor a tag", p.Ref)
		}
		e.SHA, e.Before = p.After, p.Before
		e.Deleted = p.Deleted || strings.Trim(p.After, "0") == ""
		seen := map[string]bool{}
		for _, c := range p.Commits {
			for _, list := range [][]string{c.Added, c.Modified, c.Removed} {
				for _, f := range list {
					if !seen[f] {
						seen[f] = true
						e.Changed = append(e.Changed, f)
					}
				}
			}
		}
		sort.Strings(e.Changed)
		e.Truncated = p.TotalCommits > len(p.Commits) || len(p.Commits) >= maxGitHubCommits
		if hc := p.HeadCommit; hc != nil && hc.ID != "" {
			e.HeadCommit = &Commit{SHA: hc.ID, Message: hc.Message, Author: hc.Author.Name, URL: hc.URL}
		}
	case "pull_request":
		pr := p.PullRequest
		if e.Repo == "" || pr == nil || !isSHA(pr.Head.SHA) {
			return nil, errors.New("vcshost: the pull request event names no repository or head commit")
		}
		action := p.Action
		if action == "synchronized" {
			action = "synchronize"
		}
		e.PR = &PullRequest{
			Action: action, Number: pr.Number, Title: pr.Title, URL: pr.HTMLURL,
			Head: pr.Head.Ref, HeadSHA: pr.Head.SHA, HeadRepo: pr.Head.Repo.FullName,
			Base: pr.Base.Ref, BaseSHA: pr.Base.SHA,
			Merged: pr.Merged, MergeSHA: pr.MergeCommitSHA,
		}
		if e.PR.Number == 0 {
			e.PR.Number = p.Number
		}
		e.SHA = pr.Head.SHA
	}
	return e, nil
}

// verify checks the delivery's signature.
func verify(header http.Header, body []byte, secret string) error {
	sig, prefixed := header.Get("X-Hub-Signature-256"), true
	if sig == "" {
		sig, prefixed = firstHeader(header, "X-Gitea-Signature", "X-Forgejo-Signature", "X-Gogs-Signature"), false
	}
	if sig == "" {
		return fmt.Errorf("vcshost: %w (no X-Hub-Signature-256 or X-Gitea-Signature)", ErrUnsigned)
	}
	if prefixed {
		var ok bool
		if sig, ok = strings.CutPrefix(sig, "sha256="); !ok {
			return fmt.Errorf("vcshost: %w: X-Hub-Signature-256 does not start with sha256=", ErrBadSignature)
		}
	}
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("vcshost: %w: not a hex SHA-256", ErrBadSignature)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return fmt.Errorf("vcshost: %w: it does not match the body and the secret", ErrBadSignature)
	}
	return nil
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// payload is the part of GitHub's and Gitea's push and pull_request
// payloads (the same names in both) that Event keeps.
type payload struct {
	Ref          string `json:"ref"`
	Before       string `json:"before"`
	After        string `json:"after"`
	Deleted      bool   `json:"deleted"`
	TotalCommits int    `json:"total_commits"`
	Commits      []struct {
		Added    []string `json:"added"`
		Modified []string `json:"modified"`
		Removed  []string `json:"removed"`
	} `json:"commits"`
	HeadCommit *struct {
		ID      string `json:"id"`
		Message string `json:"message"`
		URL     string `json:"url"`
		Author  struct {
			Name string `json:"name"`
		} `json:"author"`
	} `json:"head_commit"`
	Action      string `json:"action"`
	Number      int    `json:"number"`
	PullRequest *struct {
		Number         int    `json:"number"`
		Title          string `json:"title"`
		HTMLURL        string `json:"html_url"`
		Merged         bool   `json:"merged"`
		MergeCommitSHA string `json:"merge_commit_sha"`
		Head           prRef  `json:"head"`
		Base           prRef  `json:"base"`
	} `json:"pull_request"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Sender struct {
		Login    string `json:"login"`
		Username string `json:"username"`
	} `json:"sender"`
}

type prRef struct {
	Ref  string `json:"ref"`
	SHA  string `json:"sha"`
	Repo struct {
		FullName string `json:"full_name"`
	} `json:"repo"`
}
