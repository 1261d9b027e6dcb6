package vcshost

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
)

// Tag is a tag of a repository and the commit it points at.
type Tag struct {
	Name string
	SHA  string
}

// MaxTags bounds the tags Tags reads (a registry module publishes at most
// this many versions from a repository's tags at once).
const MaxTags = 1000

// Tags returns repo's tags (at most MaxTags), as the host lists them.
// GitHub's and Gitea's APIs answer the same shape; they page differently.
func (h *Host) Tags(ctx context.Context, repo string) ([]Tag, error) {
	path, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	const size = 50
	var out []Tag
	for page := 1; len(out) < MaxTags; page++ {
		q := url.Values{"page": {strconv.Itoa(page)}}
		if h.Kind.gitea() {
			q.Set("limit", strconv.Itoa(size))
		} else {
			q.Set("per_page", strconv.Itoa(size))
		}
		var got []struct {
			Name   string `json:"name"`
			Commit struct {
				SHA string `json:"sha"`
			} `json:"commit"`
		}
		if err := h.do(ctx, "listing the tags of "+repo, "GET", path+"/tags?"+q.Encode(), nil, &got); err != nil {
			return nil, repoNotFound(err, repo)
		}
		for _, t := range got {
			if t.Name == "" || !isSHA(t.Commit.SHA) {
				return nil, fmt.Errorf("listing the tags of %s: the host named a tag without its commit", repo)
			}
			out = append(out, Tag{Name: t.Name, SHA: t.Commit.SHA})
		}
		if len(got) < size {
			break
		}
	}
	if len(out) > MaxTags {
		out = out[:MaxTags]
	}
	return out, nil
}

// LogEntry is a commit of a branch's history as the host lists it.
type LogEntry struct {
	SHA     string
	Message string
	// Date is the author date (RFC 3339, as the host gives it).
	Date string
	// URL is the commit's web page.
	URL string
	// Author is the host account's login (the git author's name when the
	// commit is of no account); AuthorAvatarURL and AuthorHTMLURL its
	// picture and page.
	Author, AuthorAvatarURL, AuthorHTMLURL string
}

// Commits returns the latest n commits (at most 100) of branch in repo,
// newest first.
func (h *Host) Commits(ctx context.Context, repo, branch string, n int) ([]LogEntry, error) {
	path, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > 100 {
		n = 100
	}
	q := url.Values{}
	if branch != "" {
		q.Set("sha", branch)
	}
	if h.Kind.gitea() {
		// Gitea computes stats, signatures and file lists unless told not to.
		q.Set("limit", strconv.Itoa(n))
		q.Set("stat", "false")
		q.Set("verification", "false")
		q.Set("files", "false")
	} else {
		q.Set("per_page", strconv.Itoa(n))
	}
	var got []struct {
		SHA     string `json:"sha"`
		HTMLURL string `json:"html_url"`
		Commit  struct {
			Message string `json:"message"`
			Author  struct {
				Name string `json:"name"`
				Date string `json:"date"`
			} `json:"author"`
		} `json:"commit"`
		Author *struct {
			Login     string `json:"login"`
			AvatarURL string `json:"avatar_url"`
			HTMLURL   string `json:"html_url"`
		} `json:"author"`
	}
	if err := h.do(ctx, "listing the commits of "+branch+" in "+repo, "GET", path+"/commits?"+q.Encode(), nil, &got); err != nil {
		return nil, repoNotFound(err, repo)
	}
	out := make([]LogEntry, 0, len(got))
	for _, c := range got {
		if !isSHA(c.SHA) {
			return nil, fmt.Errorf("listing the commits of %s: the host named a commit without its SHA", repo)
		}
		e := LogEntry{SHA: c.SHA, Message: c.Commit.Message, Date: c.Commit.Author.Date, URL: c.HTMLURL, Author: c.Commit.Author.Name}
		if c.Author != nil && c.Author.Login != "" {
			e.Author, e.AuthorAvatarURL, e.AuthorHTMLURL = c.Author.Login, c.Author.AvatarURL, c.Author.HTMLURL
		}
		out = append(out, e)
		if len(out) == n {
			break
		}
	}
	return out, nil
}
