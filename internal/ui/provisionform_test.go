package ui_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// The provision form starts in the default project (not the first by
// name) and says what an optional variable left empty gets.
func TestProvisionFormDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	if _, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "Alpha"}); err != nil {
		t.Fatal(err)
	}
	rm, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("bucket"), Provider: tfe.String("aws")})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, e, tfe.RegistryModuleID{Organization: "acme", Name: "bucket", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}, "1.0.0")
	nc, err := e.Client.RegistryNoCodeModules.Create(ctx, "acme", tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	_, body := getPage(t, e, e.Token, "/app/acme/no-code/"+nc.ID+"/provision")
	sel := between(body, `<select name="project">`, "</select>")
	var chosen []string
	for _, m := range optionRE.FindAllStringSubmatch(sel, -1) {
		if m[2] != "" {
			chosen = append(chosen, m[3])
		}
	}
	if len(chosen) != 1 || chosen[0] != "Default Project" {
		t.Errorf("projects chosen at first: %v in %q, want the default project", chosen, sel)
	}
	if owner := between(body, `name="var.owner"`, ">"); !strings.Contains(owner, `placeholder="module default: ops"`) {
		t.Errorf("the owner field: %q, want the module's default as its placeholder", owner)
	}
	if size := between(body, `name="var.size"`, ">"); strings.Contains(size, "placeholder") {
		t.Errorf("the required size field: %q, want no default shown", size)
	}
}
