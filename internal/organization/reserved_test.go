package organization_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestReservedNamesCoverTheSitesPages: every first segment of a path
// under /app/ that the server's code names (its routes, its static files,
// its redirects) is reserved, so that no organization's pages at
// /app/NAME/ can be shadowed by the site's own; read from the source, as
// the routes are written.
func TestReservedNamesCoverTheSitesPages(t *testing.T) {
	seg := regexp.MustCompile(`"(?:[A-Z]+ )?/app/([a-z][a-z0-9-]*)[/"?]`)
	found := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range seg.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"static", "signin", "organizations", "settings"} {
		if found[must] == "" {
			t.Fatalf("the source names no /app/%s/ path: the scan is broken (found %v)", must, found)
		}
	}
	for s, path := range found {
		if !slices.Contains(organization.ReservedNames, s) {
			t.Errorf("%s names the site's page /app/%s, which organization.ReservedNames does not reserve", path, s)
		}
	}
}

// TestReservedNamesRefused: creating or renaming an organization to a
// reserved name, in any case, is refused with the reason.
func TestReservedNamesRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	for _, name := range []string{"static", "Organizations", "SETTINGS"} {
		_, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(name), Email: tfe.String("ops@acme.test")})
		if err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("creating organization %q: %v, want refused as reserved", name, err)
		}
	}
	org := testenv.NewOrg(t, e.Client, "acme")
	if _, err := e.Client.Organizations.Update(ctx, org.Name, tfe.OrganizationUpdateOptions{Name: tfe.String("signin")}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("renaming to signin: %v, want refused as reserved", err)
	}
	if _, err := e.Client.Organizations.Read(ctx, "acme"); err != nil {
		t.Errorf("acme after the refused rename: %v", err)
	}
}
