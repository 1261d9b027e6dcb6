package registry_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestSharedModules: an organization's private modules reach another
// organization's members and tokens (a run's too) through the module
// registry protocol only once a site admin names that organization a
// module consumer, or shares the modules globally; an organization not
// named, a disabled sharing organization, and the registry API itself stay
// closed to them.
func TestSharedModules(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		for _, o := range []string{"acme", "beta", "gamma"} {
			testenv.NewOrg(t, c, o)
		}
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("net"), Provider: tfe.String("aws")}); err != nil {
			t.Fatal(err)
		}
		id := tfe.RegistryModuleID{Organization: "acme", Name: "net", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
		rmv, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.0.0")})
		if err != nil {
			t.Fatal(err)
		}
		upload, _ := rmv.Links["upload"].(string)
		if err := c.RegistryModules.UploadTarGzip(ctx, upload, bytes.NewReader(tarGz(t, [2]string{"main.tf", moduleV1}))); err != nil {
			t.Fatal(err)
		}

		token := func(kind auth.Kind, subject string) string { return mint(t, e, kind, subject) }
		betaClient, betaMember := e.UserClient(t, "beta", "dev@beta.test")
		_, gammaMember := e.UserClient(t, "gamma", "dev@gamma.test")
		betaOrgToken, err := c.OrganizationTokens.Create(ctx, "beta")
		if err != nil {
			t.Fatal(err)
		}
		ws, err := c.Workspaces.Create(ctx, "beta", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, ws.ID, `output "o" { value = 1 }`)
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		callers := []struct{ who, token string }{
			{"beta's member", token(auth.KindUser, betaMember.User.ID)},
			{"beta's organization token", betaOrgToken.Token},
			{"a run token of beta", token(auth.KindRun, r.ID)},
		}
		gamma := token(auth.KindUser, gammaMember.User.ID)

		proto := e.URL + "/api/registry/v1/modules/acme/net/aws"
		fetches := func(who, tok string, want bool) {
			t.Helper()
			list, download, read := http.StatusNotFound, http.StatusNotFound, http.StatusNotFound
			if want {
				list, download, read = http.StatusOK, http.StatusNoContent, http.StatusOK
			}
			if resp, body := do(t, e.HTTP, "GET", proto+"/versions", tok, nil); resp.StatusCode != list {
				t.Errorf("%s listing acme's module: %d %s, want %d", who, resp.StatusCode, body, list)
			}
			resp, body := do(t, e.HTTP, "GET", proto+"/1.0.0/download", tok, nil)
			if resp.StatusCode != download || (resp.Header.Get("X-Terraform-Get") != "") != want {
				t.Errorf("%s downloading acme's module: %d %s (X-Terraform-Get %q), want %d", who, resp.StatusCode, body, resp.Header.Get("X-Terraform-Get"), download)
			}
			if resp, body := do(t, e.HTTP, "GET", proto+"/1.0.0", tok, nil); resp.StatusCode != read {
				t.Errorf("%s reading acme's module: %d %s, want %d", who, resp.StatusCode, body, read)
			}
		}

		// Not shared: nothing of acme's.
		for _, k := range callers {
			fetches(k.who+" (not shared)", k.token, false)
		}

		// beta is a consumer: beta's callers fetch; gamma's member does not.
		if err := c.Admin.Organizations.UpdateModuleConsumers(ctx, "acme", []string{"beta"}); err != nil {
			t.Fatal(err)
		}
		for _, k := range callers {
			fetches(k.who+" (beta a consumer)", k.token, true)
		}
		fetches("gamma's member (beta a consumer)", gamma, false)
		// The registry's API is not shared: only the protocol is.
		if _, err := betaClient.RegistryModules.Read(ctx, id); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("beta's member reading acme's module through the API: %v, want not found", err)
		}

		// Shared globally: gamma too. Disabled, acme shares nothing.
		tr, f := true, false
		if _, err := c.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{GlobalModuleSharing: &tr}); err != nil {
			t.Fatal(err)
		}
		fetches("gamma's member (global sharing)", gamma, true)
		if _, err := c.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &tr}); err != nil {
			t.Fatal(err)
		}
		fetches("gamma's member (acme disabled)", gamma, false)
		if _, err := c.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &f}); err != nil {
			t.Fatal(err)
		}

		// No consumers (which turns global sharing off): closed again, at
		// once.
		if err := c.Admin.Organizations.UpdateModuleConsumers(ctx, "acme", nil); err != nil {
			t.Fatal(err)
		}
		for _, k := range callers {
			fetches(k.who+" (sharing ended)", k.token, false)
		}
		fetches("gamma's member (sharing ended)", gamma, false)
	})
}
