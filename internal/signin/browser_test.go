package signin_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/terracehq/terrace/internal/testenv"
)

// browser is a headless chromium with a fresh profile that trusts exactly
// the test server's certificate (by its public key).
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T, e *testenv.Env) *browser {
	t.Helper()
	chromium, err := testenv.ChromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	spki := serverSPKI(t, filepath.Join(filepath.Dir(e.CAFile), "server.pem"))
	opts := testenv.ChromiumOptions(chromium, t.TempDir(),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// serverSPKI is the base64 SHA-256 of the certificate's public key, as
// chromium's --ignore-certificate-errors-spki-list wants it.
func serverSPKI(t *testing.T, certFile string) string {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatalf("reading the server certificate: %v", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// run runs chromedp actions, failing the test on error.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

// get runs one action that returns a value.
func get[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	body, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("body")))
	b.t.Fatalf("%s: %v (at %s: %.500s)", what, err, loc, body)
}

// text returns the text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(get(b, "reading "+sel, chromedp.Text(chromedp.CSS(sel))))
}

// waitHome waits until the browser has left the sign-in pages for the
// web UI under base+"/app/", at the end of a chain of redirects (the UI
// may go on to an organization's page; asking while the page navigates
// may fail: it asks again).
func (b *browser) waitHome(base string) {
	b.t.Helper()
	b.waitFor("waiting for the web UI", func(loc string) bool {
		rest, ok := strings.CutPrefix(loc, base+"/app/")
		return ok && !strings.HasPrefix(rest, "signin") && !strings.HasPrefix(rest, "invitations/") && !strings.HasPrefix(rest, "sso/")
	})
}

func (b *browser) waitFor(what string, ok func(loc string) bool) {
	b.t.Helper()
	for {
		loc, err := chromedp.Run(b.ctx, chromedp.Location())
		if err == nil && ok(loc) {
			return
		}
		if b.ctx.Err() != nil {
			b.fail(what, fmt.Errorf("still at %s (%v)", loc, err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitText waits until the first element matching sel shows want (a
// page from before a click may still be there at first).
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	b.waitFor("waiting for "+sel+" to show "+want, func(string) bool {
		got, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
		return err == nil && strings.Contains(got, want)
	})
}

// location returns the page's URL.
func (b *browser) location() string {
	b.t.Helper()
	return get(b, "reading the location", chromedp.Location())
}

// signIn fills the sign-in form (the page must show it) and submits it;
// the caller waits for what the next page shows.
func (b *browser) signIn(username, password string) {
	b.t.Helper()
	b.run("signing in as "+username,
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SetValue(chromedp.ID("username"), username),
		chromedp.SetValue(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("signin")),
	)
}

// screenshot keeps the page as a test artifact under
// $TERRACE_TEST_ARTIFACTS (when set).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("TERRACE_TEST_ARTIFACTS")
	if dir == "" {
		return
	}
	png := get(b, "screenshot", chromedp.FullScreenshot(80))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "signin-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// cookies returns the browser's cookies for url.
func (b *browser) cookies(url string) []*network.Cookie {
	b.t.Helper()
	res := get(b, "reading cookies", func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	})
	return res.Cookies
}
