package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A cloud block that maps workspaces by key/value tags (terraform 1.10+)
// lists them with filter[tagged] and, "just in case", their keys as
// search[tags]. When search[tags] matched single-value tags only, the
// workspaces `terraform workspace new` had just made (bound, not tagged)
// were never found again: `workspace list` printed nothing and a fresh
// `init` said there were none.
func TestCloudBlockKeyValueTags(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	var tried bool
	for _, eng := range engines(t) {
		if !supportsKeyValueTags(eng) {
			continue
		}
		tried = true
		for _, st := range testenv.Stores {
			t.Run(eng.Label()+"/"+st, func(t *testing.T) {
				t.Parallel() // see parallel in TestMain
				e := testenv.New(t, testenv.Options{Store: st})
				testKeyValueTags(t, e, newEngineCLI(t, e, eng))
			})
		}
	}
	if !tried {
		t.Fatal("no terraform 1.10 or newer among the engines: the terraform on PATH should be one")
	}
}

// supportsKeyValueTags: terraform 1.10 added the map form of a cloud
// block's workspace tags.
func supportsKeyValueTags(eng testenv.Engine) bool {
	if eng.Name != "terraform" {
		return false
	}
	parts := strings.SplitN(eng.Version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > 1 || major == 1 && minor >= 10)
}

func testKeyValueTags(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	// A workspace with the same keys but another value, and one with a
	// single-value tag named like a key: neither is the block's.
	other, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("kv-other"),
		TagBindings: []*tfe.TagBinding{{Key: "env", Value: "dev"}, {Key: "team", Value: "core"}}})
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("kv-legacy"), Tags: []*tfe.Tag{{Name: "env"}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf(`terraform {
  cloud {
    hostname     = %q
    organization = "acme"
    workspaces {
      tags = { env = "prod", team = "core" }
    }
  }
}
`, c.host)})
	// With none to choose from, init asks for a name and makes that
	// workspace; `workspace new` makes the next.
	if out, err := c.tryInput(dir, "kv-one\n", "init"); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	c.run(dir, "workspace", "new", "kv-two")
	list := c.run(dir, "workspace", "list")
	for _, name := range []string{"kv-one", "kv-two"} {
		if !strings.Contains(list, name) {
			t.Errorf("workspace list does not show %s:\n%s", name, list)
		}
	}
	for _, name := range []string{other.Name, legacy.Name} {
		if strings.Contains(list, name) {
			t.Errorf("workspace list shows %s, which does not carry env=prod, team=core:\n%s", name, list)
		}
	}
	// The workspaces the CLI made are bound to the block's tags.
	w, err := e.Client.Workspaces.Read(ctx, "acme", "kv-one")
	if err != nil {
		t.Fatal(err)
	}
	bs, err := e.Client.Workspaces.ListTagBindings(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, b := range bs {
		got[b.Key] = b.Value
	}
	if len(got) != 2 || got["env"] != "prod" || got["team"] != "core" {
		t.Errorf("kv-one's tag bindings: %v, want env=prod, team=core", got)
	}
	// A fresh checkout finds them too (init lists the workspaces).
	fresh := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf(`terraform {
  cloud {
    hostname     = %q
    organization = "acme"
    workspaces {
      tags = { env = "prod", team = "core" }
    }
  }
}
`, c.host)})
	c.env = append(c.env, "TF_WORKSPACE=kv-two")
	c.run(fresh, "init", "-input=false")
	if show := strings.TrimSpace(c.run(fresh, "workspace", "show")); show != "kv-two" {
		t.Errorf("workspace show after a fresh init: %q, want kv-two", show)
	}
}
