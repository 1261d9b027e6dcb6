package ui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/terracehq/terrace/internal/testenv"
)

// One chromium serves the whole package, started by the first test that
// needs it: each test opens its own tab.
var browser struct {
	once sync.Once
	ctx  context.Context
	stop func()
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.stop != nil {
		browser.stop()
	}
	os.Exit(code)
}

func startBrowser() (func(), error) {
	path, err := testenv.ChromiumPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "terrace-ui-chromium-")
	if err != nil {
		return nil, err
	}
	opts := testenv.ChromiumOptions(path, dir,
		// Each test server has its own generated CA.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.WindowSize(1100, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	// The first call starts the browser, which lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting chromium %s: %w", path, err)
	}
	browser.ctx = ctx
	return func() { cancel(); cancelAlloc(); os.RemoveAll(dir) }, nil
}

// tab is a browser tab signed in with an API token (sent on every
// request, as a session cookie would be).
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot int
}

func newTab(t *testing.T, e *testenv.Env, token string) *tab {
	t.Helper()
	browser.once.Do(func() { browser.stop, browser.err = startBrowser() })
	if browser.err != nil {
		t.Fatalf("no browser: %v", browser.err)
	}
	// Each tab has its own cookies: servers on other ports of localhost
	// share a host, and one test's CSRF cookie must not replace another's
	// between a page and its form post.
	ctx, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTime(); cancel() })
	tb := &tab{t: t, ctx: ctx, base: e.URL}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}}); err != nil {
		t.Fatalf("browser: %v", err)
	}
	return tb
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.screenshot("failed")
		tb.t.Fatalf("browser: %v", err)
	}
}

func must[T any](tb *tab, a chromedp.Action[T]) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, a)
	if err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
	return v
}

// open loads a page and returns its HTTP status. Opening the page the tab
// is on (a form on it redirected back there) may end without a response
// event: chromedp then answers no response and no error. The tab leaves
// for about:blank and opens it again, once.
func (tb *tab) open(path string) int {
	tb.t.Helper()
	for attempt := 0; ; attempt++ {
		resp, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(tb.base+path))
		if err != nil && attempt == 0 && strings.Contains(err.Error(), "net::ERR_ABORTED") {
			// A form just posted may still be navigating (its redirect),
			// and this navigation aborted it or was aborted: once that
			// one has landed, open again.
			time.Sleep(250 * time.Millisecond)
			continue
		}
		if err != nil {
			tb.t.Fatalf("opening %s: %v", path, err)
		}
		if resp != nil {
			return int(resp.Status)
		}
		if attempt == 1 {
			tb.t.Fatalf("opening %s: the browser reported no response, twice", path)
		}
		if _, err := chromedp.Run(tb.ctx, chromedp.Navigate("about:blank")); err != nil {
			tb.t.Fatalf("leaving for about:blank before opening %s again: %v", path, err)
		}
	}
}

// text returns the text of the first element matching sel, waiting for it
// to appear. The page may be navigating (a form was just posted): an
// evaluation that fails meanwhile is tried again. (chromedp.TextContent
// addresses the element by node ID and failed there with "No node with
// given id found".)
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	// Not while the document is still parsed: an element found then may
	// not have its text yet (seen under load: an error paragraph read "").
	js := fmt.Sprintf(`(function(){if(document.readyState==="loading")return "-";var e=document.querySelector(%q);return e?"+"+e.textContent:"-"})()`, sel)
	got := poll(tb, js, time.Minute, func(s string) bool { return strings.HasPrefix(s, "+") }, "text-timeout",
		func(string) string { return "no " + sel + " on the page" })
	return got[1:]
}

// poll evaluates js in the page until done accepts its value, for at most
// within, and returns that value. The page may navigate meanwhile: an
// evaluation that fails is tried again. When time is up it keeps a
// screenshot named shot and fails the test with failure's words for the
// last value.
func poll[T any](tb *tab, js string, within time.Duration, done func(T) bool, shot string, failure func(last T) string) T {
	tb.t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		got, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](js))
		if err == nil && done(got) {
			return got
		}
		if time.Now().After(deadline) {
			tb.screenshot(shot)
			tb.t.Fatalf("%s (at %s): %v", failure(got), tb.location(), err)
		}
	}
}

// press clicks the visible element matching sel (a form's button, a link
// that navigates) once the page is loaded and no reload is pending after a
// live log ended (app.js reloads the page then). The
// click runs in the page: chromedp.Click addresses the element by a
// DevTools node ID, and a page that reloaded or re-read its document between
// the query and the click failed with "No node with given id found".
func (tb *tab) press(sel string) {
	tb.t.Helper()
	js := fmt.Sprintf(`(function(){
		if (document.readyState !== "complete" || document.querySelector("pre[data-ended]")) return false;
		var e = document.querySelector(%q);
		if (!e || e.getClientRects().length === 0) return false;
		e.click();
		return true;
	})()`, sel)
	// The script runs to its end or not at all, and a form's navigation
	// starts after it returns: an evaluation that failed (the page was
	// reloading) clicked nothing, so poll may try it again.
	poll(tb, js, time.Minute, func(clicked bool) bool { return clicked }, "press-timeout",
		func(bool) string { return sel + " never became clickable on a loaded page" })
}

// waitJS waits until the expression cond is true in the page (which may
// navigate meanwhile: an evaluation that fails is tried again).
func (tb *tab) waitJS(cond, what string) {
	tb.t.Helper()
	poll(tb, "!!("+cond+")", time.Minute, func(ok bool) bool { return ok }, "wait-timeout",
		func(bool) string { return "never " + what })
}

// html returns the whole page's markup.
func (tb *tab) html() string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
}

func (tb *tab) location() string {
	tb.t.Helper()
	return must(tb, chromedp.Location())
}

// exists reports whether sel matches an element now.
func (tb *tab) exists(sel string) bool {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))) > 0
}

// waitText waits until the element's text contains want (the page may
// reload meanwhile).
func (tb *tab) waitText(sel, want string, within time.Duration) string {
	tb.t.Helper()
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?e.textContent:""})()`, sel)
	return poll(tb, js, within, func(got string) bool { return strings.Contains(got, want) }, "timeout",
		func(last string) string {
			return fmt.Sprintf("%s never showed %q in %s; last: %q", sel, want, within, last)
		})
}

// screenshot keeps the page as a test artifact under .cache/artifacts/ui/.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		tb.t.Fatal(err)
	}
	dir := filepath.Join(root, ".cache", "artifacts", "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	buf, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	tb.shot++
	file := filepath.Join(dir, fmt.Sprintf("%s-%02d-%s.png", strings.ReplaceAll(tb.t.Name(), "/", "_"), tb.shot, name))
	if err := os.WriteFile(file, buf, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// chromedpNodes returns the data-node attribute of every element matching sel.
func chromedpNodes(sel string) chromedp.Action[[]string] {
	return chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(function(n){return n.getAttribute('data-node')})`, sel))
}

func chromedpCount(sel string) chromedp.Action[int] {
	return chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// chromedpX is the x attribute of the first element matching sel.
func chromedpX(sel string) chromedp.Action[float64] {
	return chromedp.Evaluate[float64](fmt.Sprintf(`parseFloat(document.querySelector(%q).getAttribute('x'))`, sel))
}

// waitLocation waits until the tab's URL contains want and its page has
// loaded (after a click that navigates: the old page may match the next
// selector, and the new one, still loading, may have none of its rows yet:
// TestProviderRegistryPages once read an empty table there).
func (tb *tab) waitLocation(want string) {
	tb.t.Helper()
	loaded := fmt.Sprintf(`location.href.includes(%q) && document.readyState === "complete"`, want)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](loaded)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("the page never went to %s; at %s", want, tb.location())
		}
	}
}
