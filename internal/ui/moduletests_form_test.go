package ui_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A module's tests page: a refused test variable (a taken key) is shown
// with the reason and what was typed, less a value marked sensitive; the
// command that runs the tests names this server's host.
func TestModuleTestVariableFormKeepsWhatWasTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	id := testenv.EnableModuleTests(ctx, t, e.Client, "acme", "vpc", "aws")
	if _, err := e.Client.TestVariables.Create(ctx, id, tfe.VariableCreateOptions{Key: tfe.String("TF_VAR_region"), Value: tfe.String("eu"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
		t.Fatal(err)
	}
	const page, form = "/app/acme/registry/modules/private/acme/vpc/aws/tests", "#add-test-var"
	tb := newTab(t, e, e.Token)
	tb.open(page)
	// The host as terraform takes a module source's (a dot in it):
	// localhost by its address, as TestTerraformModuleTests runs it.
	if got, want := tb.text("#cloud-run"), "terraform test -cloud-run="+strings.Replace(e.Host, "localhost", "127.0.0.1", 1)+"/acme/vpc/aws"; got != want {
		t.Fatalf("the command that runs the tests: %q, want %q", got, want)
	}

	fillForm(tb, form, map[string]string{"key": "TF_VAR_region", "value": "us-east-1"})
	tb.press(form + " button")
	if got := tb.text("[role=alert]"); !strings.Contains(got, `key "TF_VAR_region" has already been taken`) {
		t.Fatalf("the refusal of a taken key: %q", got)
	}
	if key, value, sensitive := fieldValue(tb, form, "key"), fieldValue(tb, form, "value"), checked(tb, form, "sensitive"); key != "TF_VAR_region" || value != "us-east-1" || sensitive {
		t.Fatalf("the refused form holds %q = %q (sensitive %v), want what was typed", key, value, sensitive)
	}

	const secret = "typed-s3cr3t-0815"
	tb.open(page)
	fillForm(tb, form, map[string]string{"key": "TF_VAR_region", "value": secret})
	check(tb, form, "sensitive")
	tb.press(form + " button")
	if got := tb.text("[role=alert]"); !strings.Contains(got, "has already been taken") {
		t.Fatalf("the refusal of a taken key: %q", got)
	}
	if key, value, sensitive := fieldValue(tb, form, "key"), fieldValue(tb, form, "value"), checked(tb, form, "sensitive"); key != "TF_VAR_region" || value != "" || !sensitive {
		t.Fatalf("the refused sensitive form holds %q = %q (sensitive %v), want the key, no value, sensitive", key, value, sensitive)
	}
	if strings.Contains(tb.html(), secret) {
		t.Fatal("the refused form sent the sensitive value back to the browser")
	}
}
