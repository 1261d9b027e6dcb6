package vcshost

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/terracehq/terrace/internal/slug"
)

// Archive returns the files of commit sha of repo as a tar.gz, fetched
// with git with the host's token and CA (see the function Archive).
func (h *Host) Archive(ctx context.Context, repo, sha string, maxBytes int64) ([]byte, error) {
	return h.ArchiveDir(ctx, repo, sha, "", maxBytes)
}

// ArchiveDir is Archive of one folder of the commit (a relative,
// slash-separated path; "" is the whole tree): the folder's files are the
// archive's root, as a registry module of a monorepo is published.
func (h *Host) ArchiveDir(ctx context.Context, repo, sha, dir string, maxBytes int64) ([]byte, error) {
	if _, err := splitRepo(repo); err != nil {
		return nil, err
	}
	return archive(ctx, h.CloneURL(repo), h.Token, sha, dir, false, h.CA, maxBytes)
}

// ArchiveWithSubmodules is Archive with the commit's submodules (a
// workspace's ingress-submodules): each is fetched at the commit the tree
// records, recursively, and its files are in the archive at its path.
// Submodule URLs come from the repository's .gitmodules, relative ones
// resolved against the repository's: the token goes only to the host's
// own address (a submodule elsewhere is fetched without it), and only
// the host's protocol is allowed (no file:// or ssh).
func (h *Host) ArchiveWithSubmodules(ctx context.Context, repo, sha string, maxBytes int64) ([]byte, error) {
	if _, err := splitRepo(repo); err != nil {
		return nil, err
	}
	return archive(ctx, h.CloneURL(repo), h.Token, sha, "", true, h.CA, maxBytes)
}

// CleanDir checks a folder of a repository named by a user (a module's
// source directory) and returns it cleaned: relative, slash-separated,
// without "." or ".." parts; "" for the repository's root.
func CleanDir(dir string) (string, error) {
	d := strings.Trim(strings.TrimSpace(dir), "/")
	if d == "" || d == "." {
		return "", nil
	}
	if len(d) > 255 || strings.ContainsAny(d, "\\:\x00") {
		return "", fmt.Errorf("%q is not a folder of the repository", dir)
	}
	for _, part := range strings.Split(d, "/") {
		if part == "" || part == "." || part == ".." || strings.HasPrefix(part, "-") {
			return "", fmt.Errorf("%q is not a folder of the repository (use a relative path without . or .. parts)", dir)
		}
		for _, r := range part {
			if r < 0x20 || r == 0x7f {
				return "", fmt.Errorf("%q is not a folder of the repository", dir)
			}
		}
	}
	return d, nil
}

// Archive returns the tree of commit sha (a full SHA) of the repository
// at cloneURL as a tar.gz of its files, made by the real git binary: a
// fetch of that one commit (--depth 1) into an empty repository of a
// temporary folder, then git archive. The token (none when "") goes to
// git only as an Authorization header in its environment (GIT_CONFIG_*),
// never on a command line; git runs with a home of its own, no system
// configuration, no prompt, no redirects and only the URL's protocol.
// caPEM, when set, is the only CA git trusts. An archive over maxBytes
// is refused. Canceling ctx kills git. No error shows the token.
func Archive(ctx context.Context, cloneURL, token, sha string, caPEM []byte, maxBytes int64) ([]byte, error) {
	return archive(ctx, cloneURL, token, sha, "", false, caPEM, maxBytes)
}

func archive(ctx context.Context, cloneURL, token, sha, sub string, submodules bool, caPEM []byte, maxBytes int64) ([]byte, error) {
	clean, err := CleanDir(sub)
	if err != nil {
		return nil, fmt.Errorf("vcshost: %w", err)
	}
	if !isSHA(sha) {
		return nil, fmt.Errorf("vcshost: %q is not a full commit SHA", sha)
	}
	u, err := url.Parse(cloneURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("vcshost: %q is not an http(s) clone URL without credentials", redactToken(cloneURL, token))
	}
	if maxBytes <= 0 {
		return nil, errors.New("vcshost: no archive size limit")
	}
	dir, err := os.MkdirTemp("", "terrace-vcs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	home, repo := filepath.Join(dir, "home"), filepath.Join(dir, "repo")
	for _, d := range []string{home, repo} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	env := append(gitBaseEnv(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_ALLOW_PROTOCOL="+u.Scheme, "GIT_ASKPASS=", "SSH_ASKPASS=")
	config := [][2]string{{"http.followRedirects", "false"}}
	basic := ""
	if token != "" {
		// Only for the host's own address: a submodule on another host
		// never gets the token.
		basic = base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		config = append(config, [2]string{"http." + u.Scheme + "://" + u.Host + "/.extraHeader", "Authorization: Basic " + basic})
	}
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(config)))
	for i, kv := range config {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	if len(caPEM) > 0 {
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
			return nil, err
		}
		env = append(env, "GIT_SSL_CAINFO="+ca)
	}
	redact := func(s string) string {
		s = redactToken(s, token)
		if basic != "" {
			s = strings.ReplaceAll(s, basic, "[redacted]")
		}
		return s
	}
	git := func(stdout io.Writer, args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = repo, env
		// Its own process group, so that a cancel also ends the helpers
		// git starts (git-remote-https).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = stdout, &limitedBuffer{b: &stderr, n: 4 << 10, quiet: true}
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("git %s: %w", args[0], ctx.Err())
			}
			msg := strings.Join(strings.Fields(stderr.String()), " ")
			if refused(msg) {
				return fmt.Errorf("git %s: %w: the host refused the token, or the repository does not exist (%s)", args[0], ErrUnauthorized, redact(cut(msg, 300)))
			}
			return fmt.Errorf("git %s: %s: %s", args[0], err, redact(cut(msg, 500)))
		}
		return nil
	}
	if err := git(nil, "init", "-q"); err != nil {
		return nil, err
	}
	// The remote is named so that relative submodule URLs resolve
	// against it.
	if err := git(nil, "remote", "add", "origin", cloneURL); err != nil {
		return nil, err
	}
	if err := git(nil, "fetch", "-q", "--depth=1", "--no-tags", "origin", sha); err != nil {
		return nil, fmt.Errorf("fetching %s from %s: %w", sha, redact(cloneURL), err)
	}
	if submodules {
		if err := git(nil, "checkout", "-q", "--detach", sha); err != nil {
			return nil, fmt.Errorf("checking out %s: %w", sha, err)
		}
		if err := git(nil, "submodule", "update", "-q", "--init", "--recursive", "--depth=1"); err != nil {
			return nil, fmt.Errorf("fetching the submodules of %s: %w", sha, err)
		}
		data, err := slug.PackLimit(repo, maxBytes)
		if errors.Is(err, slug.ErrTooLarge) {
			return nil, fmt.Errorf("the archive of %s is over %d bytes", sha, maxBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("packing %s with its submodules: %w", sha, err)
		}
		return data, nil
	}
	out := &limitedBuffer{b: new(bytes.Buffer), n: maxBytes}
	tree := sha
	if clean != "" {
		// A tree-ish of the folder: its files are the archive's root.
		tree = sha + ":" + clean
	}
	if err := git(out, "archive", "--format=tar.gz", tree); err != nil {
		if out.over {
			return nil, fmt.Errorf("the archive of %s is over %d bytes", sha, maxBytes)
		}
		return nil, fmt.Errorf("archiving %s: %w", sha, err)
	}
	if out.over {
		return nil, fmt.Errorf("the archive of %s is over %d bytes", sha, maxBytes)
	}
	return out.b.Bytes(), nil
}

// refused reports whether git's message is an HTTP authentication
// failure (git asks for a user name when the host answers 401).
func refused(msg string) bool {
	for _, m := range []string{"could not read Username", "could not read Password", "Authentication failed", "The requested URL returned error: 401", "The requested URL returned error: 403"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// gitBaseEnv is this process's environment without what would change
// git's behaviour or credentials: HOME, XDG_CONFIG_HOME, GIT_* and the
// askpass helpers.
func gitBaseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "XDG_CONFIG_HOME" || k == "SSH_ASKPASS" || strings.HasPrefix(k, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// limitedBuffer keeps up to n bytes. Past them it fails the write, so
// that git archive stops (on a broken pipe) once the archive is over the
// limit, or, quiet, drops the rest.
type limitedBuffer struct {
	b     *bytes.Buffer
	n     int64
	quiet bool
	over  bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - int64(l.b.Len()); int64(len(p)) > room {
		l.over = true
		if !l.quiet {
			return 0, errors.New("over the limit")
		}
		l.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.b.Write(p)
}
