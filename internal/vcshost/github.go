package vcshost

import "context"

// githubBranch reads a branch through GitHub's REST API (v3), the same on
// github.com and GitHub Enterprise Server.
func githubBranch(ctx context.Context, h *Host, op, repoPath, branch string) (*Commit, error) {
	var b struct {
		Commit struct {
			SHA     string `json:"sha"`
			HTMLURL string `json:"html_url"`
			Commit  struct {
				Message string `json:"message"`
				Author  struct {
					Name string `json:"name"`
				} `json:"author"`
			} `json:"commit"`
		} `json:"commit"`
	}
	if err := h.do(ctx, op, "GET", repoPath+"/branches/"+escapeRef(branch), nil, &b); err != nil {
		return nil, err
	}
	return &Commit{SHA: b.Commit.SHA, Message: b.Commit.Commit.Message, Author: b.Commit.Commit.Author.Name, URL: b.Commit.HTMLURL}, nil
}
