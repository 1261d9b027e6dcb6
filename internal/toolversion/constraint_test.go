package toolversion_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestReleaseForAConstraint: a runner asking for a workspace's version
// constraint is given the newest registered, enabled version it allows
// (a disabled one is passed over, a prerelease only when named), and
// nothing when none is, on both stores. For "latest" it is the newest
// registered, enabled release that is not marked beta. Without access to
// beta tools a constraint passes beta versions over, and a beta version
// named is refused.
func TestReleaseForAConstraint(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			e := testenv.New(t, testenv.Options{Store: st})
			ctx := context.Background()
			for _, v := range []struct {
				version       string
				enabled, beta bool
			}{{"1.9.1", true, false}, {"1.9.3", true, false}, {"1.9.4", false, false}, {"1.9.5-rc1", true, false}, {"1.10.0", true, false},
				{"1.11.0", true, true}, {"1.12.0", false, false}, {"1.13.0-alpha1", true, false}} {
				if _, err := e.Client.Admin.TerraformVersions.Create(ctx, tfe.AdminTerraformVersionCreateOptions{Version: tfe.String(v.version),
					URL: tfe.String(zipURL), Sha: tfe.String(sha1), Enabled: tfe.Bool(v.enabled), Beta: tfe.Bool(v.beta), Official: tfe.Bool(true)}); err != nil {
					t.Fatal(err)
				}
			}
			// want is for an organization with access to beta tools;
			// noBeta, when it differs, for one without ("!" an error).
			for constraint, wants := range map[string]struct{ beta, noBeta string }{
				"~> 1.9.0":       {"1.9.3", "1.9.3"},
				">= 1.9, < 1.11": {"1.10.0", "1.10.0"},
				">= 1.9, < 2":    {"1.11.0", "1.10.0"},
				"< 1.9.3":        {"1.9.1", "1.9.1"},
				"= 1.9.4":        {"", ""},
				"~> 1.9.5-rc1":   {"1.9.5-rc1", "1.9.5-rc1"},
				"~> 2.0":         {"", ""},
				"tofu:~> 1.9.0":  {"", ""},
				"1.9.3":          {"1.9.3", "1.9.3"},
				"1.11.0":         {"1.11.0", "!"},
				"1.12.0":         {"", ""},
				"latest":         {"1.10.0", "1.10.0"},
				"":               {"1.10.0", "1.10.0"},
				"tofu":           {"", ""},
				"tofu:latest":    {"", ""},
			} {
				for _, beta := range []bool{true, false} {
					want := wants.beta
					if !beta {
						want = wants.noBeta
					}
					rel, err := e.Server.ToolVersions.Release(ctx, constraint, beta)
					got := ""
					if rel != nil {
						got = rel.Version
						if len(rel.Builds) != 1 || rel.Builds[0].URL != zipURL {
							t.Errorf("Release(%q): builds %+v", constraint, rel.Builds)
						}
					}
					if want == "!" {
						if err == nil || !strings.Contains(err.Error(), "no access to beta tools") {
							t.Errorf("Release(%q) without beta tools: %q %v, want an error", constraint, got, err)
						}
						continue
					}
					if err != nil || got != want {
						t.Errorf("Release(%q, beta %v): %q %v, want %q", constraint, beta, got, err, want)
					}
				}
			}
		})
	}
}
