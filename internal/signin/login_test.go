package signin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestTerraformLogin runs the real `terraform login` (and `tofu login`)
// against a running Terrace: the CLI prints the authorization URL, a real
// browser signs in with a password and allows the request, the CLI
// redeems the code on its localhost listener and stores the token, and
// that token then works for `plan` with a cloud block.
func TestTerraformLogin(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	teams, err := e.Client.Teams.List(ctx, "acme", nil)
	if err != nil || len(teams.Items) != 1 {
		t.Fatalf("listing teams: %v %v", teams, err)
	}
	m, err := e.Client.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("alice@example.test"), Teams: teams.Items})
	if err != nil {
		t.Fatal(err)
	}
	e.Accept(t, m.ID)
	if err := e.Server.Signin.SetPassword(ctx, m.User.ID, goodPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("network"), ExecutionMode: tfe.String("local")}); err != nil {
		t.Fatal(err)
	}
	var bins []testenv.Engine
	for _, eng := range testenv.Engines(t) {
		// The terraform on PATH and tofu: terraform 1.5.7 runs the
		// same login code as the newer one.
		if len(bins) == 0 || eng.Name == "tofu" {
			bins = append(bins, eng)
		}
	}
	b := newBrowser(t, e)
	for i, eng := range bins {
		t.Run(eng.Label(), func(t *testing.T) {
			home := t.TempDir()
			token := cliLogin(t, e, b, eng, home, m.User.Username, i == 0)
			toks, err := e.Server.Auth.ListTokens(ctx, auth.KindUser, m.User.ID)
			if err != nil || len(toks) != i+1 || toks[i].Description != "terraform login" {
				t.Fatalf("alice's tokens after %s login: %v %v", eng.Name, toks, err)
			}
			if got := apiStatus(t, e, token); got != 200 {
				t.Fatalf("the stored token on the API: %d", got)
			}
			wantEvents(t, signinEvents(t, e), "create authentication-token "+m.User.Username)
			dir := t.TempDir()
			cfg := fmt.Sprintf(`terraform {
  cloud {
    hostname     = %q
    organization = "acme"
    workspaces { name = "network" }
  }
}
resource "terraform_data" "net" { input = "net" }
`, e.Host)
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			runCLI(t, e, eng, home, dir, "init", "-input=false")
			out := runCLI(t, e, eng, home, dir, "plan", "-input=false", "-no-color")
			if !strings.Contains(out, "1 to add") {
				t.Fatalf("%s plan with the login token:\n%s", eng.Name, out)
			}
		})
	}
}

// cliEnv is the environment of a CLI with its own home (so its own CLI
// configuration), trusting the test server's CA, and a PATH with no
// browser launcher (so that the CLI prints the URL for the test's browser
// instead).
func cliEnv(t *testing.T, e *testenv.Env, home string) []string {
	// terraform login writes its credentials file there but does not
	// create the folder. No TF_CLI_CONFIG_FILE: with it set, terraform
	// does not read the credentials file that login writes.
	if err := os.MkdirAll(filepath.Join(home, ".terraform.d"), 0o700); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "PATH=" + t.TempDir(), "SSL_CERT_FILE=" + e.CAFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"}
}

func runCLI(t *testing.T, e *testenv.Env, eng testenv.Engine, home, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(eng.Path, args...)
	cmd.Dir, cmd.Env = dir, cliEnv(t, e, home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", eng.Name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cliLogin runs `<engine> login <host>`, completes the browser step
// (signing in first when signIn) and returns the token the CLI stored.
func cliLogin(t *testing.T, e *testenv.Env, b *browser, eng testenv.Engine, home, username string, signIn bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, eng.Path, "login", e.Host)
	cmd.Env = cliEnv(t, e, home)
	cmd.Stdin = strings.NewReader("yes\n")
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out testenv.SyncBuffer
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stdout, &out))
		for sc.Scan() {
			if u := strings.TrimSpace(sc.Text()); strings.HasPrefix(u, e.URL+"/app/oauth/authorization?") {
				urls <- u
			}
		}
		close(urls)
	}()
	authURL, ok := <-urls
	if !ok {
		_ = cmd.Wait()
		t.Fatalf("%s login printed no authorization URL:\n%s\n%s", eng.Name, out.String(), stderr.String())
	}
	b.run("opening the authorization URL", chromedp.Navigate(authURL))
	if signIn {
		b.run("waiting for the sign-in page", chromedp.WaitVisible(chromedp.ID("username")))
		b.signIn(username, goodPassword)
	}
	b.run("allowing the CLI", chromedp.WaitVisible(chromedp.ID("authorize")))
	b.screenshot("authorize-" + eng.Name)
	b.run("allowing the CLI", chromedp.Click(chromedp.ID("authorize")))
	for range urls {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s login: %v\n%s\n%s", eng.Name, err, out.String(), stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(home, ".terraform.d", "credentials.tfrc.json"))
	if err != nil {
		t.Fatalf("%s login stored no credentials: %v\n%s", eng.Name, err, out.String())
	}
	var creds struct {
		Credentials map[string]struct {
			Token string `json:"token"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal(raw, &creds); err != nil {
		t.Fatal(err)
	}
	token := creds.Credentials[e.Host].Token
	if token == "" {
		t.Fatalf("%s login stored no token for %s: %s", eng.Name, e.Host, raw)
	}
	return token
}
