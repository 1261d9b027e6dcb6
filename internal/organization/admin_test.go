package organization_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// The shapes go-tfe's test helpers send (subscription_updater_test.go).
type featureSet struct {
	ID string `jsonapi:"primary,feature-sets"`
}

type featureSetList struct {
	Items []*featureSet
	*tfe.Pagination
}

type subscriptionUpdate struct {
	Type            string      `jsonapi:"primary,subscription"`
	RunsCeiling     *int        `jsonapi:"attr,runs-ceiling,omitempty"`
	ContractStartAt *time.Time  `jsonapi:"attr,contract-start-at,iso8601,omitempty"`
	FeatureSet      *featureSet `jsonapi:"relation,feature-set"`
}

// plainUser returns a go-tfe client for a new user who is no site admin
// and belongs to no organization.
func plainUser(t *testing.T, e *testenv.Env) *tfe.Client {
	t.Helper()
	ctx := context.Background()
	u, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, "plain", "plain@example.test", false)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	return e.NewClient(t, secret)
}

func TestPlanUpgradeChangesNothing(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		org, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")})
		if err != nil {
			t.Fatal(err)
		}
		before, err := e.Client.Organizations.ReadEntitlements(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}

		// What go-tfe's newSubscriptionUpdater does.
		req, err := e.Client.NewRequest("GET", "admin/feature-sets", &struct {
			Q string `url:"q"`
		}{"Business"})
		if err != nil {
			t.Fatal(err)
		}
		fsl := &featureSetList{}
		if err := req.Do(ctx, fsl); err != nil {
			t.Fatalf("listing feature sets: %v", err)
		}
		if len(fsl.Items) != 1 || fsl.Items[0].ID != organization.FeatureSetID || fsl.TotalCount != 1 {
			t.Fatalf("feature sets = %+v (pagination %+v)", fsl.Items, fsl.Pagination)
		}
		ceiling, now := 10, time.Now()
		req, err = e.Client.NewRequest("POST", "admin/organizations/acme/subscription",
			&subscriptionUpdate{RunsCeiling: &ceiling, ContractStartAt: &now, FeatureSet: fsl.Items[0]})
		if err != nil {
			t.Fatal(err)
		}
		if err := req.Do(ctx, nil); err != nil {
			t.Fatalf("upgrading: %v", err)
		}

		after, err := e.Client.Organizations.ReadEntitlements(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if *after != *before {
			t.Errorf("entitlements changed:\nbefore %+v\nafter  %+v", before, after)
		}
		read, err := e.Client.Organizations.Read(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if read.ExternalID != org.ExternalID {
			t.Errorf("organization changed: %+v", read)
		}

		// An unknown feature set, or organization, is refused.
		req, _ = e.Client.NewRequest("POST", "admin/organizations/acme/subscription", &subscriptionUpdate{FeatureSet: &featureSet{ID: "fs-business"}})
		if err := req.Do(ctx, nil); err == nil || !strings.Contains(err.Error(), "fs-terrace") {
			t.Errorf("unknown feature set: err = %v", err)
		}
		req, _ = e.Client.NewRequest("POST", "admin/organizations/nope/subscription", &subscriptionUpdate{FeatureSet: fsl.Items[0]})
		if err := req.Do(ctx, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("unknown organization: err = %v", err)
		}
	})
}

func TestAdminRoutesAreHiddenFromOthers(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	c := plainUser(t, e)
	for _, call := range []struct{ method, path string }{
		{"GET", "admin/feature-sets"},
		{"POST", "admin/organizations/acme/subscription"},
	} {
		var body any
		if call.method != "GET" {
			body = &subscriptionUpdate{FeatureSet: &featureSet{ID: organization.FeatureSetID}}
		}
		req, err := c.NewRequest(call.method, call.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if err := req.Do(ctx, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("%s %s as a plain user: err = %v, want not found", call.method, call.path, err)
		}
	}
}

func TestStacksListIsEmpty(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	l, err := e.Client.Stacks.List(ctx, "acme", &tfe.StackListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 || l.Pagination == nil || l.CurrentPage != 1 {
		t.Errorf("stacks = %+v, pagination %+v", l.Items, l.Pagination)
	}
	if _, err := e.Client.Stacks.List(ctx, "nope", nil); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Errorf("unknown organization: err = %v", err)
	}
	if _, err := plainUser(t, e).Stacks.List(ctx, "acme", nil); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Errorf("non-member: err = %v", err)
	}
}
