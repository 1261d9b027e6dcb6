package ui_test

import (
	"html"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestGettingStartedNamesTheServersCA: a server that made its own CA (as
// every test server does) names that CA's file on the getting-started
// page, where terraform's SSL_CERT_FILE must point.
func TestGettingStartedNamesTheServersCA(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	if e.Server.CAFile == "" {
		t.Fatal("the test server has no CA file of its own")
	}
	if _, body := getPage(t, e, e.Token, "/app/acme/getting-started"); !strings.Contains(html.UnescapeString(body), e.Server.CAFile) {
		t.Errorf("the getting-started page does not name the server's CA file %s:\n%s", e.Server.CAFile, between(body, "<main>", "</main>"))
	}
}
