package organization_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// Session lengths are minutes, at least one: zero or a negative number is
// refused with the setting named, and the stored values stay; a positive
// one is kept (go-tfe's own test sets 3600).
func TestSessionLengthsArePositiveMinutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	org := testenv.NewOrg(t, e.Client, "acme")
	for _, bad := range []tfe.OrganizationUpdateOptions{
		{SessionTimeout: tfe.Int(0)},
		{SessionRemember: tfe.Int(-5)},
		{SessionTimeout: tfe.Int(60), SessionRemember: tfe.Int(0)},
	} {
		_, err := e.Client.Organizations.Update(ctx, org.Name, bad)
		if err == nil || !strings.Contains(err.Error(), "session-") || !strings.Contains(err.Error(), "at least 1") {
			t.Errorf("updating with %+v: %v, want refused naming the setting", bad, err)
		}
	}
	o, err := e.Client.Organizations.Read(ctx, org.Name)
	if err != nil {
		t.Fatal(err)
	}
	if o.SessionTimeout != 20160 || o.SessionRemember != 20160 {
		t.Errorf("after the refusals: timeout %d, remember %d; want the defaults, 20160", o.SessionTimeout, o.SessionRemember)
	}
	if o, err = e.Client.Organizations.Update(ctx, org.Name, tfe.OrganizationUpdateOptions{SessionTimeout: tfe.Int(3600), SessionRemember: tfe.Int(1)}); err != nil {
		t.Fatal(err)
	}
	if o.SessionTimeout != 3600 || o.SessionRemember != 1 {
		t.Errorf("after setting 3600 and 1: timeout %d, remember %d", o.SessionTimeout, o.SessionRemember)
	}
}
