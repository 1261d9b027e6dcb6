package vcshost

import (
	"context"
	"net/url"
	"strings"
)

// giteaBranch reads a branch through Gitea's API (Forgejo's is the same).
func giteaBranch(ctx context.Context, h *Host, op, repoPath, branch string) (*Commit, error) {
	var b struct {
		Commit struct {
			ID      string `json:"id"`
			Message string `json:"message"`
			URL     string `json:"url"`
			Author  struct {
				Name string `json:"name"`
			} `json:"author"`
		} `json:"commit"`
	}
	if err := h.do(ctx, op, "GET", repoPath+"/branches/"+escapeRef(branch), nil, &b); err != nil {
		return nil, err
	}
	return &Commit{SHA: b.Commit.ID, Message: b.Commit.Message, Author: b.Commit.Author.Name, URL: b.Commit.URL}, nil
}

// escapeRef escapes each /-separated part of a branch name.
func escapeRef(ref string) string {
	parts := strings.Split(ref, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
