package ui_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestStatesPageShowsRetention: a workspace's States page says which data
// retention policy it is under and whose (the organization's, then the
// workspace's own once it has one), and which versions' content is kept,
// set aside or deleted. A real browser.
func TestStatesPageShowsRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	var svs []*tfe.StateVersion
	for serial := int64(1); serial <= 3; serial++ {
		state := fmt.Sprintf(`{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":"l","outputs":{},"resources":[]}`, serial)
		if _, err := c.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		sv, err := c.StateVersions.Create(ctx, ws.ID, tfe.StateVersionCreateOptions{Serial: tfe.Int64(serial), Lineage: tfe.String("l"),
			MD5: tfe.String(fmt.Sprintf("%x", md5.Sum([]byte(state)))), State: tfe.String(base64.StdEncoding.EncodeToString([]byte(state)))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.Unlock(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
		svs = append(svs, sv)
	}
	if err := c.StateVersions.SoftDeleteBackingData(ctx, svs[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := c.StateVersions.SoftDeleteBackingData(ctx, svs[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := c.StateVersions.PermanentlyDeleteBackingData(ctx, svs[1].ID); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	const page = "/app/acme/workspaces/app/states"
	tb.open(page)
	if tb.exists("#retention") {
		t.Fatalf("a workspace under no policy: %q", tb.text("#retention"))
	}
	for i, want := range []string{"set aside", "deleted", "kept"} {
		if got := tb.text(`tr[data-version="` + svs[i].ID + `"] td:last-child`); got != want {
			t.Errorf("state version %d's content: %q, want %q", i+1, got, want)
		}
	}

	if _, err := c.Organizations.SetDataRetentionPolicyDeleteOlder(ctx, "acme", tfe.DataRetentionPolicyDeleteOlderSetOptions{DeleteOlderThanNDays: 30}); err != nil {
		t.Fatal(err)
	}
	tb.open(page)
	if got := tb.text("#retention"); !strings.Contains(got, "older than 30 days") || !strings.Contains(got, "the organization's policy") {
		t.Errorf("under the organization's policy: %q", got)
	}
	if _, err := c.Workspaces.SetDataRetentionPolicyDontDelete(ctx, ws.ID, tfe.DataRetentionPolicyDontDeleteSetOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.open(page)
	if got := tb.text("#retention"); !strings.Contains(got, "kept however old") || !strings.Contains(got, "this workspace's policy") {
		t.Errorf("under the workspace's own policy: %q", got)
	}
	tb.screenshot("retention")
}
