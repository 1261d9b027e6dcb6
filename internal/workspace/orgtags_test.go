package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

func tagNames(t *testing.T, c *tfe.Client, wsID string) []string {
	t.Helper()
	l, err := c.Workspaces.ListTags(ctx, wsID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tg := range l.Items {
		out = append(out, tg.Name)
	}
	sort.Strings(out)
	return out
}

func orgTagIDs(t *testing.T, c *tfe.Client, org string) map[string]*tfe.OrganizationTag {
	t.Helper()
	l, err := c.OrganizationTags.List(ctx, org, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tfe.OrganizationTag{}
	for _, tg := range l.Items {
		if tg.Organization == nil || tg.Organization.Name != org {
			t.Fatalf("tag %s without its organization: %+v", tg.Name, tg.Organization)
		}
		out[tg.Name] = tg
	}
	return out
}

// TestOrganizationTags: an organization's tags are listed with their
// organization and use count, put on more workspaces by ID, and deleted
// from every workspace at once; a request naming anything of another
// organization changes nothing.
func TestOrganizationTags(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		newOrg(t, c, "other")
		w1, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("one"), Tags: []*tfe.Tag{{Name: "a"}, {Name: "b"}, {Name: "c"}}})
		if err != nil {
			t.Fatal(err)
		}
		w2, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("two")})
		if err != nil {
			t.Fatal(err)
		}
		foreignWS, err := c.Workspaces.Create(ctx, "other", tfe.WorkspaceCreateOptions{Name: tfe.String("x"), Tags: []*tfe.Tag{{Name: "a"}}})
		if err != nil {
			t.Fatal(err)
		}
		tags := orgTagIDs(t, c, "acme")
		foreignTag := orgTagIDs(t, c, "other")["a"]

		if err := c.OrganizationTags.AddWorkspaces(ctx, tags["a"].ID, tfe.AddWorkspacesToTagOptions{WorkspaceIDs: []string{w2.ID}}); err != nil {
			t.Fatal(err)
		}
		if got := tagNames(t, c, w2.ID); strings.Join(got, ",") != "a" {
			t.Fatalf("w2 tags after adding a: %v", got)
		}
		if n := orgTagIDs(t, c, "acme")["a"].InstanceCount; n != 2 {
			t.Fatalf("instance count of a: %d, want 2", n)
		}
		// A workspace of another organization: 404, and w2 is not tagged b.
		err = c.OrganizationTags.AddWorkspaces(ctx, tags["b"].ID, tfe.AddWorkspacesToTagOptions{WorkspaceIDs: []string{w2.ID, foreignWS.ID}})
		if !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("tagging a foreign workspace: %v", err)
		}
		if got := tagNames(t, c, w2.ID); strings.Join(got, ",") != "a" {
			t.Fatalf("w2 tags after a refused request: %v", got)
		}

		// A foreign tag among those to delete: 404 and nothing deleted.
		err = c.OrganizationTags.Delete(ctx, "acme", tfe.OrganizationTagsDeleteOptions{IDs: []string{tags["a"].ID, foreignTag.ID}})
		if !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleting a foreign tag: %v", err)
		}
		if got := tagNames(t, c, w1.ID); strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("w1 tags after a refused delete: %v", got)
		}

		if err := c.OrganizationTags.Delete(ctx, "acme", tfe.OrganizationTagsDeleteOptions{IDs: []string{tags["a"].ID, tags["b"].ID}}); err != nil {
			t.Fatal(err)
		}
		if got := tagNames(t, c, w1.ID); strings.Join(got, ",") != "c" {
			t.Fatalf("w1 tags after deleting a and b: %v", got)
		}
		if got := tagNames(t, c, w2.ID); len(got) != 0 {
			t.Fatalf("w2 tags after deleting a and b: %v", got)
		}
		left := orgTagIDs(t, c, "acme")
		if len(left) != 1 || left["c"] == nil {
			t.Fatalf("organization tags after the delete: %v", left)
		}
		if got := tagNames(t, c, foreignWS.ID); strings.Join(got, ",") != "a" {
			t.Fatalf("the other organization's tags changed: %v", got)
		}
		// A tag named twice is deleted once.
		if err := c.OrganizationTags.Delete(ctx, "acme", tfe.OrganizationTagsDeleteOptions{IDs: []string{left["c"].ID, left["c"].ID}}); err != nil {
			t.Fatalf("deleting a tag named twice: %v", err)
		}
		if left := orgTagIDs(t, c, "acme"); len(left) != 0 {
			t.Fatalf("organization tags after deleting c: %v", left)
		}
	})
}

// TestOrganizationTagsPermissions: deleting tags takes manage workspaces;
// putting a tag on workspaces takes the right to change each of them, and
// one the caller may only read fails the whole request (403), one it
// cannot see is not found (404).
func TestOrganizationTagsPermissions(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		mine, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("mine"), Tags: []*tfe.Tag{{Name: "t"}}})
		if err != nil {
			t.Fatal(err)
		}
		readOnly, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("read-only")})
		if err != nil {
			t.Fatal(err)
		}
		hidden, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("hidden")})
		if err != nil {
			t.Fatal(err)
		}
		tm, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
		if err != nil {
			t.Fatal(err)
		}
		for ws, access := range map[*tfe.Workspace]tfe.AccessType{mine: tfe.AccessAdmin, readOnly: tfe.AccessRead} {
			if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(access), Team: tm, Workspace: ws}); err != nil {
				t.Fatal(err)
			}
		}
		dev, _ := e.UserClient(t, "acme", "dev@acme.test", tm)
		managers, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("managers"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		manager, _ := e.UserClient(t, "acme", "boss@acme.test", managers)
		tagID := orgTagIDs(t, c, "acme")["t"].ID

		err = dev.OrganizationTags.AddWorkspaces(ctx, tagID, tfe.AddWorkspacesToTagOptions{WorkspaceIDs: []string{mine.ID, readOnly.ID}})
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("tagging a workspace the caller only reads: %v", err)
		}
		if got := tagNames(t, c, readOnly.ID); len(got) != 0 {
			t.Fatalf("read-only workspace tagged: %v", got)
		}
		err = dev.OrganizationTags.AddWorkspaces(ctx, tagID, tfe.AddWorkspacesToTagOptions{WorkspaceIDs: []string{hidden.ID}})
		if !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("tagging a workspace the caller cannot see: %v", err)
		}
		if err := dev.OrganizationTags.Delete(ctx, "acme", tfe.OrganizationTagsDeleteOptions{IDs: []string{tagID}}); err == nil {
			t.Fatal("a workspace admin deleted an organization tag")
		}
		if err := manager.OrganizationTags.AddWorkspaces(ctx, tagID, tfe.AddWorkspacesToTagOptions{WorkspaceIDs: []string{readOnly.ID, hidden.ID}}); err != nil {
			t.Fatalf("a workspace manager tagging workspaces: %v", err)
		}
		if err := manager.OrganizationTags.Delete(ctx, "acme", tfe.OrganizationTagsDeleteOptions{IDs: []string{tagID}}); err != nil {
			t.Fatalf("a workspace manager deleting a tag: %v", err)
		}
		for _, ws := range []*tfe.Workspace{mine, readOnly, hidden} {
			if got := tagNames(t, c, ws.ID); len(got) != 0 {
				t.Fatalf("%s still tagged: %v", ws.Name, got)
			}
		}
		// A malformed body is a 400, not a 500.
		code, body := raw(t, e, http.MethodDelete, "/api/v2/organizations/acme/tags", `{"data":{"id":"x"}}`)
		if code != http.StatusBadRequest {
			t.Fatalf("malformed delete: %d %s", code, body)
		}
	})
}

// TestDeletingTagsDecidesOnce: deleting an organization's tags decides the
// organization once (OrgManageTags), not again for every tag named, and
// reads and deletes the tags named in statements of their own: four tags
// cost what one costs, with no decision (which reads the caller's team)
// for each. Called as a team's token with manage-workspaces, without a
// request memo that would hide repeated reads, on both stores.
func TestDeletingTagsDecidesOnce(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		// makeTags gives the organization five tags carried by no
		// workspace (a carrier is a decision of its own).
		makeTags := func(round int) map[string]*tfe.OrganizationTag {
			t.Helper()
			var refs []*tfe.Tag
			for n := 1; n <= 5; n++ {
				refs = append(refs, &tfe.Tag{Name: fmt.Sprintf("r%d-t%d", round, n)})
			}
			if err := c.Workspaces.AddTags(ctx, w.ID, tfe.WorkspaceAddTagsOptions{Tags: refs}); err != nil {
				t.Fatal(err)
			}
			if err := c.Workspaces.RemoveTags(ctx, w.ID, tfe.WorkspaceRemoveTagsOptions{Tags: refs}); err != nil {
				t.Fatal(err)
			}
			tags := orgTagIDs(t, c, "acme")
			if len(tags) != 5 {
				t.Fatalf("the organization has %d tags, want 5", len(tags))
			}
			return tags
		}
		tm, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("taggers"), Visibility: tfe.String("organization"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := c.TeamTokens.Create(ctx, tm.ID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.Server.Auth.Authenticate(ctx, tok.Token)
		if err != nil {
			t.Fatal(err)
		}
		as := authz.WithModel(auth.WithPrincipal(context.Background(), p), e.Server.Authz)
		cost := func(tags map[string]*tfe.OrganizationTag, names ...string) int64 {
			t.Helper()
			var ids []string
			for _, n := range names {
				ids = append(ids, tags[n].ID)
			}
			counted, count := core.WithStatementCount(as)
			if err := e.Server.Workspaces.DeleteOrganizationTags(counted, "acme", ids); err != nil {
				t.Fatalf("deleting %v: %v", names, err)
			}
			return count()
		}
		for round := range 3 {
			tags := makeTags(round)
			tag := func(n int) string { return fmt.Sprintf("r%d-t%d", round, n) }
			one := cost(tags, tag(1))
			four := cost(tags, tag(2), tag(3), tag(4), tag(5))
			if left := orgTagIDs(t, c, "acme"); len(left) != 0 {
				t.Fatalf("tags left: %v", left)
			}
			if four != one {
				t.Errorf("round %d: deleting 4 tags cost %d statements, 1 tag %d: want the same (the tags, their carriers and each deletion in a statement of their own)", round, four, one)
			}
		}
	})
}
