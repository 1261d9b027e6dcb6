package ui_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestPolicySetCountPlural: one policy set is "1 policy set".
func TestPolicySetCountPlural(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	if _, err := e.Client.PolicySets.Create(context.Background(), "acme", tfe.PolicySetCreateOptions{Name: tfe.String("only"), Kind: tfe.OPA}); err != nil {
		t.Fatal(err)
	}
	if _, body := getPage(t, e, e.Token, "/app/acme/policy-sets"); !strings.Contains(body, `<p id="policy-set-total">1 policy set</p>`) {
		t.Errorf("the list's total:\n%s", between(body, "<main>", "</main>"))
	}
}
