package testenv

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds Debian's chromium for the browser tests (.ci/run
// installs it with apt-get); TERRACE_TEST_CHROMIUM names another binary.
func ChromiumPath() (string, error) {
	if p := os.Getenv("TERRACE_TEST_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium is not installed: the browser tests need it (apt-get install chromium, as .ci/run does, or set TERRACE_TEST_CHROMIUM)")
}

// ChromiumOptions are the options of a headless chromium at path with a
// fresh profile in userDataDir, kept from reaching for the network (which
// hangs it on this closed machine), followed by extra.
func ChromiumOptions(path, userDataDir string, extra ...chromedp.ExecAllocatorOption) []chromedp.ExecAllocatorOption {
	return append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(userDataDir),
	}, extra...)
}
