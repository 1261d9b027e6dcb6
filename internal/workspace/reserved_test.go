package workspace_test

import (
	"errors"
	"net/http"
	"sort"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestReservedTagKeys: keys are reserved, renamed, and released per
// organization; a key is unique in its organization and follows the tag
// binding key rule; members read them, only owners change them.
func TestReservedTagKeys(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		newOrg(t, c, "other")
		env, err := c.ReservedTagKeys.Create(ctx, "acme", tfe.ReservedTagKeyCreateOptions{Key: "env", DisableOverrides: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(env.ID, "rtk-") || env.Key != "env" || !env.DisableOverrides || env.CreatedAt.IsZero() {
			t.Fatalf("created: %+v", env)
		}
		if _, err := c.ReservedTagKeys.Create(ctx, "other", tfe.ReservedTagKeyCreateOptions{Key: "env"}); err != nil {
			t.Fatalf("the same key in another organization: %v", err)
		}
		_, err = c.ReservedTagKeys.Create(ctx, "acme", tfe.ReservedTagKeyCreateOptions{Key: "env"})
		if err == nil || !strings.Contains(err.Error(), "invalid attribute\n\nKey has already been taken") {
			t.Fatalf("a duplicate key: %v", err)
		}
		_, err = c.ReservedTagKeys.Create(ctx, "acme", tfe.ReservedTagKeyCreateOptions{Key: "! / nope"})
		if err == nil || !strings.Contains(err.Error(), "invalid attribute\n\nKey is invalid") {
			t.Fatalf("an invalid key: %v", err)
		}
		if _, err := c.ReservedTagKeys.Create(ctx, "missing", tfe.ReservedTagKeyCreateOptions{Key: "env"}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("an unknown organization: %v", err)
		}
		cost, err := c.ReservedTagKeys.Create(ctx, "acme", tfe.ReservedTagKeyCreateOptions{Key: "cost-center"})
		if err != nil {
			t.Fatal(err)
		}
		if cost.DisableOverrides {
			t.Fatal("disable-overrides defaults to true")
		}
		_, err = c.ReservedTagKeys.Update(ctx, cost.ID, tfe.ReservedTagKeyUpdateOptions{Key: tfe.String("env")})
		if err == nil || !strings.Contains(err.Error(), "Key has already been taken") {
			t.Fatalf("renaming onto a taken key: %v", err)
		}
		cost, err = c.ReservedTagKeys.Update(ctx, cost.ID, tfe.ReservedTagKeyUpdateOptions{Key: tfe.String("cost"), DisableOverrides: tfe.Bool(true)})
		if err != nil || cost.Key != "cost" || !cost.DisableOverrides {
			t.Fatalf("update: %+v %v", cost, err)
		}
		// HCP Terraform's documented path.
		code, body := raw(t, e, http.MethodPatch, "/api/v2/reserved-tags/"+cost.ID,
			`{"data":{"type":"reserved-tag-keys","attributes":{"disable-overrides":false}}}`)
		if code != http.StatusOK || !strings.Contains(body, `"disable-overrides":false`) {
			t.Fatalf("PATCH reserved-tags: %d %s", code, body)
		}

		member, _ := e.UserClient(t, "acme", "member@acme.test")
		l, err := member.ReservedTagKeys.List(ctx, "acme", nil)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, k := range l.Items {
			keys = append(keys, k.Key)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "cost,env" || l.TotalCount != 2 {
			t.Fatalf("listed: %v (total %d)", keys, l.TotalCount)
		}
		if _, err := member.ReservedTagKeys.Create(ctx, "acme", tfe.ReservedTagKeyCreateOptions{Key: "team"}); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("a member reserving a key: %v", err)
		}
		if err := member.ReservedTagKeys.Delete(ctx, env.ID); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("a member deleting a key: %v", err)
		}
		stranger, _ := e.UserClient(t, "other", "x@other.test")
		if err := stranger.ReservedTagKeys.Delete(ctx, env.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("another organization's member deleting a key: %v", err)
		}
		if err := c.ReservedTagKeys.Delete(ctx, env.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.ReservedTagKeys.Delete(ctx, env.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleting twice: %v", err)
		}
	})
}

func effective(t *testing.T, c *tfe.Client, wsID string) map[string]string {
	t.Helper()
	bs, err := c.Workspaces.ListEffectiveTagBindings(ctx, wsID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, b := range bs {
		out[b.Key] = b.Value
	}
	return out
}

func taggedNames(t *testing.T, c *tfe.Client, key, value string) string {
	t.Helper()
	l, err := c.Workspaces.List(ctx, "acme", &tfe.WorkspaceListOptions{TagBindings: []*tfe.TagBinding{{Key: key, Value: value}}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range l.Items {
		names = append(names, w.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// TestReservedKeyDisablesOverrides: with a key reserved with overrides
// disabled, a workspace cannot set that key to another value than its
// project's binding (422 naming the key), through the tag binding route
// or on create; the project's value is the effective one, even over a
// binding the workspace had before, in effective-tag-bindings and in the
// workspace list's tag filter; turning overrides back on restores them.
func TestReservedKeyDisablesOverrides(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "infra"})
		if err != nil {
			t.Fatal(err)
		}
		early, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("early"), Project: prj,
			TagBindings: []*tfe.TagBinding{{Key: "env", Value: "dev"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Projects.AddTagBindings(ctx, prj.ID, tfe.ProjectAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "prod"}}}); err != nil {
			t.Fatal(err)
		}
		if got := effective(t, c, early.ID)["env"]; got != "dev" {
			t.Fatalf("before the key is reserved, the workspace overrides: env=%q", got)
		}
		rtk, err := c.ReservedTagKeys.Create(ctx, "acme", tfe.ReservedTagKeyCreateOptions{Key: "env", DisableOverrides: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if got := effective(t, c, early.ID)["env"]; got != "prod" {
			t.Fatalf("with overrides disabled the project's value holds: env=%q", got)
		}
		if got := taggedNames(t, c, "env", "prod"); got != "early" {
			t.Fatalf("workspaces tagged env=prod: %q", got)
		}
		if got := taggedNames(t, c, "env", "dev"); got != "" {
			t.Fatalf("workspaces tagged env=dev: %q", got)
		}

		_, err = c.Workspaces.AddTagBindings(ctx, early.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "staging"}}})
		if err == nil || !strings.Contains(err.Error(), "invalid attribute") || !strings.Contains(err.Error(), `"env"`) {
			t.Fatalf("overriding a locked key: %v", err)
		}
		if _, err := c.Workspaces.AddTagBindings(ctx, early.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "prod"}, {Key: "team", Value: "web"}}}); err != nil {
			t.Fatalf("the project's own value and another key: %v", err)
		}
		_, err = c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("late"), Project: prj,
			TagBindings: []*tfe.TagBinding{{Key: "env", Value: "dev"}}})
		if err == nil || !strings.Contains(err.Error(), `"env"`) {
			t.Fatalf("creating a workspace that overrides a locked key: %v", err)
		}
		if _, err := c.Workspaces.Read(ctx, "acme", "late"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("the refused workspace exists: %v", err)
		}
		// Outside the project (no binding of env to override) the key is free.
		free, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("free"),
			TagBindings: []*tfe.TagBinding{{Key: "env", Value: "dev"}}})
		if err != nil {
			t.Fatalf("a workspace whose project does not bind env: %v", err)
		}
		// Moving it into the project with its binding is an override too.
		_, err = c.Workspaces.UpdateByID(ctx, free.ID, tfe.WorkspaceUpdateOptions{Project: prj,
			TagBindings: []*tfe.TagBinding{{Key: "env", Value: "dev"}}})
		if err == nil || !strings.Contains(err.Error(), `"env"`) {
			t.Fatalf("moving a workspace with an override into the project: %v", err)
		}

		if _, err := c.ReservedTagKeys.Update(ctx, rtk.ID, tfe.ReservedTagKeyUpdateOptions{DisableOverrides: tfe.Bool(false)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.AddTagBindings(ctx, early.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "staging"}}}); err != nil {
			t.Fatalf("overriding once overrides are allowed again: %v", err)
		}
		if got := effective(t, c, early.ID)["env"]; got != "staging" {
			t.Fatalf("with overrides allowed the workspace's value holds: env=%q", got)
		}
		if got := taggedNames(t, c, "env", "staging"); got != "early" {
			t.Fatalf("workspaces tagged env=staging: %q", got)
		}
	})
}

// TestTagBindingKeyRule: projects and workspaces refuse the keys that
// reserved tag keys refuse.
func TestTagBindingKeyRule(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := newOrg(t, c, "acme")
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		bad := []*tfe.TagBinding{{Key: "! / nope", Value: "x"}}
		if _, err := c.Workspaces.AddTagBindings(ctx, ws.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: bad}); err == nil || !strings.Contains(err.Error(), "invalid attribute") {
			t.Fatalf("workspace binding with a bad key: %v", err)
		}
		if _, err := c.Projects.AddTagBindings(ctx, org.DefaultProject.ID, tfe.ProjectAddTagBindingsOptions{TagBindings: bad}); err == nil || !strings.Contains(err.Error(), "invalid attribute") {
			t.Fatalf("project binding with a bad key: %v", err)
		}
		good := []*tfe.TagBinding{{Key: "cost center:eu/1@x=y+z_.-", Value: "v"}}
		if _, err := c.Workspaces.AddTagBindings(ctx, ws.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: good}); err != nil {
			t.Fatalf("workspace binding with a good key: %v", err)
		}
	})
}
