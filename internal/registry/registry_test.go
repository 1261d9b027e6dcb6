package registry_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// tarGz packs files (name -> content) in order.
func tarGz(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const moduleV1 = `
terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}
variable "region" {
  type        = string
  description = "Where to deploy"
  default     = "us-east-1"
}
variable "instance_count" {
  type = number
}
variable "password" {
  type      = string
  sensitive = true
}
variable "tags" {
  default = { team = "ops" }
}
resource "terraform_data" "x" { input = var.region }
output "id" {
  description = "The ID"
  value       = terraform_data.x.id
}
`

// status PUTs or GETs and returns the status code and body.
func do(t *testing.T, c *http.Client, method, url, token string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func admin() context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
}

func TestPublishFlow(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		for _, o := range []string{"acme", "other"} {
			if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(o), Email: tfe.String("ops@" + o + ".test")}); err != nil {
				t.Fatal(err)
			}
		}
		rm, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("net"), Provider: tfe.String("aws")})
		if err != nil {
			t.Fatal(err)
		}
		if rm.Namespace != "acme" || rm.RegistryName != tfe.PrivateRegistry || rm.Status != tfe.RegistryModuleStatusPending || rm.Organization.Name != "acme" {
			t.Fatalf("created module: %+v", rm)
		}
		id := tfe.RegistryModuleID{Organization: "acme", Name: "net", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
		rmv, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.4.2")})
		if err != nil {
			t.Fatal(err)
		}
		if rmv.Status != tfe.RegistryModuleVersionStatusPending || rmv.RegistryModule.ID != rm.ID {
			t.Fatalf("created version: %+v", rmv)
		}
		upload, _ := rmv.Links["upload"].(string)
		if !strings.Contains(upload, "/object/") {
			t.Fatalf("upload link %q", upload)
		}
		archive := tarGz(t, [2]string{"main.tf", moduleV1})
		if err := c.RegistryModules.UploadTarGzip(ctx, upload, bytes.NewReader(archive)); err != nil {
			t.Fatal(err)
		}
		got, err := c.RegistryModules.ReadVersion(ctx, id, "1.4.2")
		if err != nil || got.Status != tfe.RegistryModuleVersionStatusOk {
			t.Fatalf("after upload: %+v, %v", got, err)
		}
		rm, err = c.RegistryModules.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rm.Status != tfe.RegistryModuleStatusSetupComplete || len(rm.VersionStatuses) != 1 || rm.VersionStatuses[0].Status != tfe.RegistryModuleVersionStatusOk {
			t.Fatalf("module after upload: %+v", rm)
		}

		// The version's root, as the registry shows it.
		resp, body := do(t, e.HTTP, "GET", e.URL+"/api/v2/organizations/acme/registry-modules/private/acme/net/aws/version?module_version=1.4.2", e.Token, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("read version: %d %s", resp.StatusCode, body)
		}
		var doc struct {
			Data struct {
				Attributes struct {
					Root struct {
						Inputs               []map[string]any `json:"inputs"`
						Outputs              []map[string]any `json:"outputs"`
						ProviderDependencies []map[string]any `json:"provider_dependencies"`
					} `json:"root"`
				} `json:"attributes"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		root := doc.Data.Attributes.Root
		if len(root.Inputs) != 4 || root.Inputs[0]["name"] != "region" || root.Inputs[0]["default"] != `"us-east-1"` || root.Inputs[1]["required"] != true {
			t.Fatalf("root inputs: %v", root.Inputs)
		}
		if len(root.Outputs) != 1 || root.Outputs[0]["name"] != "id" || root.Outputs[0]["description"] != "The ID" {
			t.Fatalf("root outputs: %v", root.Outputs)
		}
		if len(root.ProviderDependencies) != 1 || root.ProviderDependencies[0]["source"] != "hashicorp/aws" || root.ProviderDependencies[0]["version"] != "~> 5.0" {
			t.Fatalf("root providers: %v", root.ProviderDependencies)
		}

		// The Go method the no-code part uses.
		vars, err := e.Server.Registry.VersionVariables(admin(), "acme", "net", "aws", "1.4.2")
		if err != nil {
			t.Fatal(err)
		}
		want := []registry.Variable{
			{Name: "region", Type: "string", Description: "Where to deploy", Default: json.RawMessage(`"us-east-1"`)},
			{Name: "instance_count", Type: "number", Required: true},
			{Name: "password", Type: "string", Required: true, Sensitive: true},
			{Name: "tags", Type: "any", Default: json.RawMessage(`{"team":"ops"}`)},
		}
		if len(vars) != len(want) {
			t.Fatalf("variables: %+v", vars)
		}
		for i := range want {
			g, w := vars[i], want[i]
			if g.Name != w.Name || g.Type != w.Type || g.Description != w.Description || string(g.Default) != string(w.Default) || g.Required != w.Required || g.Sensitive != w.Sensitive {
				t.Errorf("variable %d = %+v (default %s), want %+v (default %s)", i, g, g.Default, w, w.Default)
			}
		}
		if _, err := e.Server.Registry.VersionVariables(auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindOrganization, Organization: "other"}), "acme", "net", "aws", "1.4.2"); err == nil {
			t.Fatal("VersionVariables answered another organization's caller")
		}
		b, _, err := e.Server.Registry.VersionArchive(admin(), "acme", "net", "aws", "")
		if err != nil || !bytes.Equal(b, archive) {
			t.Fatalf("VersionArchive (latest): %d bytes, %v", len(b), err)
		}

		// Bad inputs: each a 4xx, nothing stored.
		for _, v := range []string{"1.4", "v1.0.0", "01.0.0", "1.0.0 beta"} {
			_, body := do(t, e.HTTP, "POST", e.URL+"/api/v2/registry-modules/acme/net/aws/versions", e.Token,
				[]byte(`{"data":{"type":"registry-module-versions","attributes":{"version":"`+v+`"}}}`))
			if !strings.Contains(string(body), `"status":"422"`) || !strings.Contains(string(body), "semantic version") {
				t.Errorf("version %q: %s", v, body)
			}
		}
		if _, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.4.2")}); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("duplicate version: %v", err)
		}
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("net"), Provider: tfe.String("aws")}); err == nil {
			t.Error("duplicate module accepted")
		}
		bad, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("2.0.0")})
		if err != nil {
			t.Fatal(err)
		}
		badUpload := bad.Links["upload"].(string)
		for _, tc := range []struct {
			name    string
			archive []byte
			want    string
		}{
			{"traversal", tarGz(t, [2]string{"main.tf", "output \"a\" { value = 1 }\n"}, [2]string{"../../evil.tf", "x"}), "escapes the archive"},
			{"absolute", tarGz(t, [2]string{"/etc/evil.tf", "x"}), "absolute path"},
			{"not gzip", []byte("plain text"), "not gzip"},
			{"bad hcl", tarGz(t, [2]string{"main.tf", "variable \"x\" {\n"}), "configuration is invalid"},
		} {
			resp, body := do(t, e.HTTP, "PUT", badUpload, "", tc.archive)
			if resp.StatusCode != 422 || !strings.Contains(string(body), tc.want) {
				t.Errorf("%s upload: %d %s", tc.name, resp.StatusCode, body)
			}
			v, err := c.RegistryModules.ReadVersion(ctx, id, "2.0.0")
			if err != nil || v.Status != tfe.RegistryModuleVersionStatusRegIngressFailed {
				t.Errorf("%s: version status %+v %v", tc.name, v, err)
			}
		}
		rm, _ = c.RegistryModules.Read(ctx, id)
		if len(rm.VersionStatuses) != 2 || rm.VersionStatuses[0].Version != "2.0.0" || rm.VersionStatuses[0].Error == "" {
			t.Fatalf("version statuses after refused uploads: %+v", rm.VersionStatuses)
		}
		if _, err := e.Server.Registry.VersionVariables(admin(), "acme", "net", "aws", "2.0.0"); err == nil {
			t.Error("a failed version has variables")
		}

		// A refused re-upload leaves an ok version as it was; a good one
		// replaces archive and inspection.
		if resp, _ := do(t, e.HTTP, "PUT", upload, "", tarGz(t, [2]string{"../x.tf", "x"})); resp.StatusCode != 422 {
			t.Fatalf("bad re-upload: %d", resp.StatusCode)
		}
		if v, _ := c.RegistryModules.ReadVersion(ctx, id, "1.4.2"); v.Status != tfe.RegistryModuleVersionStatusOk {
			t.Fatalf("ok version after a refused re-upload: %s", v.Status)
		}
		if err := c.RegistryModules.UploadTarGzip(ctx, upload, bytes.NewReader(tarGz(t, [2]string{"main.tf", "variable \"only\" {}\n"}))); err != nil {
			t.Fatal(err)
		}
		vars, err = e.Server.Registry.VersionVariables(admin(), "acme", "net", "aws", "1.4.2")
		if err != nil || len(vars) != 1 || vars[0].Name != "only" || !vars[0].Required {
			t.Fatalf("variables after re-upload: %+v %v", vars, err)
		}
		if err := c.RegistryModules.UploadTarGzip(ctx, upload, bytes.NewReader(archive)); err != nil {
			t.Fatal(err)
		}

		// The module registry protocol.
		proto := e.URL + "/api/registry/v1/modules/acme/net/aws"
		if resp, _ := do(t, e.HTTP, "GET", proto+"/versions", "", nil); resp.StatusCode != 401 {
			t.Fatalf("versions without a token: %d", resp.StatusCode)
		}
		resp, body = do(t, e.HTTP, "GET", proto+"/versions", e.Token, nil)
		var versions struct {
			Modules []struct {
				Versions []struct {
					Version string `json:"version"`
				} `json:"versions"`
			} `json:"modules"`
		}
		if err := json.Unmarshal(body, &versions); err != nil || resp.StatusCode != 200 || len(versions.Modules) != 1 ||
			len(versions.Modules[0].Versions) != 1 || versions.Modules[0].Versions[0].Version != "1.4.2" {
			t.Fatalf("versions: %d %s", resp.StatusCode, body)
		}
		if resp, _ := do(t, e.HTTP, "GET", proto+"/2.0.0/download", e.Token, nil); resp.StatusCode != 404 {
			t.Fatalf("download of a failed version: %d", resp.StatusCode)
		}
		resp, _ = do(t, e.HTTP, "GET", proto+"/1.4.2/download", e.Token, nil)
		loc := resp.Header.Get("X-Terraform-Get")
		if resp.StatusCode != 204 || !strings.HasSuffix(loc, ".tar.gz") || !strings.HasPrefix(loc, e.URL+"/_cap/") {
			t.Fatalf("download: %d X-Terraform-Get=%q", resp.StatusCode, loc)
		}
		resp, body = do(t, e.HTTP, "GET", loc, "", nil)
		if resp.StatusCode != 200 || !bytes.Equal(body, archive) {
			t.Fatalf("archive download: %d, %d bytes", resp.StatusCode, len(body))
		}
		if resp, _ := do(t, e.HTTP, "GET", strings.Replace(loc, "/object/", "/object/x", 1), "", nil); resp.StatusCode != 404 {
			t.Fatalf("altered capability URL: %d", resp.StatusCode)
		}
		tfm, err := c.RegistryModules.ReadTerraformRegistryModule(ctx, id, "1.4.2")
		if err != nil || tfm.ID != "acme/net/aws/1.4.2" || len(tfm.Root.Inputs) != 4 || len(tfm.Root.Outputs) != 1 || len(tfm.Versions) != 1 {
			t.Fatalf("registry module details: %+v %v", tfm, err)
		}

		// Cross-organization: everything is a 404.
		tok, err := c.OrganizationTokens.Create(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		oc := e.NewClient(t, tok.Token)
		if _, err := oc.RegistryModules.Read(ctx, id); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("other org read: %v", err)
		}
		if _, err := oc.RegistryModules.Read(ctx, tfe.RegistryModuleID{ID: rm.ID}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("other org read by ID: %v", err)
		}
		if _, err := oc.RegistryModules.List(ctx, "acme", nil); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("other org list: %v", err)
		}
		if _, err := oc.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("3.0.0")}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("other org create version: %v", err)
		}
		if err := oc.RegistryModules.Delete(ctx, "acme", "net"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("other org delete: %v", err)
		}
		for _, p := range []string{"/versions", "/1.4.2/download", "/1.4.2"} {
			if resp, _ := do(t, e.HTTP, "GET", proto+p, tok.Token, nil); resp.StatusCode != 404 {
				t.Errorf("other org %s: %d", p, resp.StatusCode)
			}
		}
		if _, err := c.RegistryModules.Read(ctx, tfe.RegistryModuleID{ID: "mod-nonexistent!"}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("malformed id: %v", err)
		}

		// List filters.
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("net"), Provider: tfe.String("google")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("vpc"), Provider: tfe.String("aws"), RegistryName: tfe.PublicRegistry, Namespace: "terraform-aws-modules"}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			opts tfe.RegistryModuleListOptions
			n    int
		}{
			{tfe.RegistryModuleListOptions{}, 3},
			{tfe.RegistryModuleListOptions{Search: "NE"}, 2},
			{tfe.RegistryModuleListOptions{Provider: "aws"}, 2},
			{tfe.RegistryModuleListOptions{RegistryName: tfe.PublicRegistry}, 1},
			{tfe.RegistryModuleListOptions{OrganizationName: "acme"}, 2},
			{tfe.RegistryModuleListOptions{Search: "net", Provider: "google"}, 1},
			{tfe.RegistryModuleListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}}, 1},
		} {
			l, err := c.RegistryModules.List(ctx, "acme", &tc.opts)
			if err != nil || len(l.Items) != tc.n {
				t.Errorf("list %+v: %d items, %v", tc.opts, len(l.Items), err)
			}
		}
		// The page and its total come from the store; LIKE's wildcards in
		// a search are themselves; listed modules carry their versions.
		l, err := c.RegistryModules.List(ctx, "acme", &tfe.RegistryModuleListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}})
		if err != nil || l.TotalCount != 3 || l.CurrentPage != 2 || len(l.Items) != 1 || l.Items[0].Name != "vpc" {
			t.Errorf("page 2 of 2: %+v %v, want vpc of 3", l, err)
		}
		if l, err := c.RegistryModules.List(ctx, "acme", &tfe.RegistryModuleListOptions{Search: "_"}); err != nil || len(l.Items) != 0 {
			t.Errorf("search _ lists %d modules (%v), want none", len(l.Items), err)
		}
		read, err := c.RegistryModules.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		all, err := c.RegistryModules.List(ctx, "acme", nil)
		if err != nil {
			t.Fatal(err)
		}
		listed := -1
		for _, m := range all.Items {
			if m.ID == read.ID {
				listed = len(m.VersionStatuses)
			}
		}
		if len(read.VersionStatuses) == 0 || listed != len(read.VersionStatuses) {
			t.Errorf("%s is listed with %d versions (-1: not listed), read with %d", read.Name, listed, len(read.VersionStatuses))
		}

		// Settings: the no-code flag and tag bindings.
		upd, err := c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{NoCode: tfe.Bool(true), TagBindings: []*tfe.TagBinding{{Key: "env", Value: "prod"}}})
		if err != nil || !upd.NoCode {
			t.Fatalf("update: %+v %v", upd, err)
		}
		tbs, err := c.RegistryModules.ListTagBindings(ctx, upd.ID)
		if err != nil || len(tbs) != 1 || tbs[0].Key != "env" || tbs[0].Value != "prod" {
			t.Fatalf("tag bindings: %+v %v", tbs, err)
		}
		if rm, _ := c.RegistryModules.Read(ctx, id); !rm.NoCode {
			t.Fatal("no-code flag not stored")
		}

		// Only owners and manage-modules teams publish: another team may
		// read but not write.
		member := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindTeam, TeamID: "team-x", Organization: "acme"})
		if _, err := e.Server.Registry.GetPrivate(member, "acme", "net", "aws"); err != nil {
			t.Fatalf("member read: %v", err)
		}
		if _, err := e.Server.Registry.CreateVersion(member, "acme", "net", "aws", "9.0.0", ""); err == nil || !strings.Contains(err.Error(), "may not manage registry modules") {
			t.Fatalf("member create version: %v", err)
		}
		if err := e.Server.Registry.Delete(member, "acme", registry.Selector{Name: "net"}); err == nil {
			t.Fatal("member deleted a module")
		}

		// Deletes: a version, a provider, then the legacy whole-name delete.
		if err := c.RegistryModules.DeleteVersion(ctx, id, "2.0.0"); err != nil {
			t.Fatal(err)
		}
		if err := c.RegistryModules.DeleteVersion(ctx, id, "2.0.0"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("second version delete: %v", err)
		}
		if _, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("3.0.0")}); err != nil {
			t.Fatal(err)
		}
		if resp, body := do(t, e.HTTP, "POST", e.URL+"/api/v2/registry-modules/actions/delete/acme/net/aws/3.0.0", e.Token, nil); resp.StatusCode != 204 {
			t.Fatalf("legacy version delete: %d %s", resp.StatusCode, body)
		}
		if _, err := c.RegistryModules.ReadVersion(ctx, id, "3.0.0"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("version deleted by the legacy path still readable: %v", err)
		}
		if resp, _ := do(t, e.HTTP, "POST", e.URL+"/api/v2/registry-modules/actions/delete/acme/net/nope", e.Token, nil); resp.StatusCode != 404 {
			t.Errorf("legacy delete of a missing provider: %d", resp.StatusCode)
		}
		gid := id
		gid.Provider = "google"
		if err := c.RegistryModules.DeleteProvider(ctx, gid); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RegistryModules.Read(ctx, gid); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("deleted provider still readable: %v", err)
		}
		if _, err := c.RegistryModules.Read(ctx, id); err != nil {
			t.Errorf("deleting a provider removed another: %v", err)
		}
		if err := c.RegistryModules.Delete(ctx, "acme", "net"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RegistryModules.Read(ctx, id); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("deleted module still readable: %v", err)
		}
		if resp, _ := do(t, e.HTTP, "GET", loc, "", nil); resp.StatusCode != 404 {
			t.Errorf("archive of a deleted module still served: %d", resp.StatusCode)
		}
		if err := c.RegistryModules.Delete(ctx, "acme", "net"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("second delete: %v", err)
		}

		// Deleted archives are gone at once, so nothing is left to sweep;
		// an upload abandoned by a crash is swept once its grace has passed.
		var left int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM registry_module_garbage`).Scan(&left); err != nil || left != 0 {
			t.Fatalf("garbage rows after deletes: %d %v", left, err)
		}
		if err := e.Server.Blobs.Put(ctx, "registry-module-versions/abandoned.tar.gz", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.DB.Exec(ctx, `INSERT INTO registry_module_garbage (blob_key, not_before) VALUES (?, ?)`, "registry-module-versions/abandoned.tar.gz", 1); err != nil {
			t.Fatal(err)
		}
		if n, err := e.Server.Registry.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep: %d %v", n, err)
		}
		if ok, _ := e.Server.Blobs.Exists(ctx, "registry-module-versions/abandoned.tar.gz"); ok {
			t.Fatal("sweep left the abandoned archive")
		}
	})
}

// TestRenamedOrganizationModules: a private module's namespace is its
// organization's name, and follows a rename: terraform finds the module
// as HOST/NEW/NAME/PROVIDER (and no longer under the old name, which
// another organization may take), and the API under the new namespace.
func TestRenamedOrganizationModules(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("net"), Provider: tfe.String("aws")}); err != nil {
			t.Fatal(err)
		}
		old := tfe.RegistryModuleID{Organization: "acme", Name: "net", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
		rmv, err := c.RegistryModules.CreateVersion(ctx, old, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.0.0")})
		if err != nil {
			t.Fatal(err)
		}
		upload, _ := rmv.Links["upload"].(string)
		if err := c.RegistryModules.UploadTarGzip(ctx, upload, bytes.NewReader(tarGz(t, [2]string{"main.tf", moduleV1}))); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Organizations.Update(ctx, "acme", tfe.OrganizationUpdateOptions{Name: tfe.String("acme-corp")}); err != nil {
			t.Fatal(err)
		}
		renamed := tfe.RegistryModuleID{Organization: "acme-corp", Name: "net", Provider: "aws", Namespace: "acme-corp", RegistryName: tfe.PrivateRegistry}
		if m, err := c.RegistryModules.Read(ctx, renamed); err != nil || m.Namespace != "acme-corp" {
			t.Fatalf("the module under the new namespace: %+v %v", m, err)
		}
		resp, body := do(t, e.HTTP, "GET", e.URL+"/api/registry/v1/modules/acme-corp/net/aws/versions", e.Token, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"1.0.0"`) {
			t.Fatalf("terraform's versions of acme-corp/net/aws: %d %s", resp.StatusCode, body)
		}
		if resp, body := do(t, e.HTTP, "GET", e.URL+"/api/registry/v1/modules/acme/net/aws/versions", e.Token, nil); resp.StatusCode != 404 {
			t.Fatalf("the old name still serves the module: %d %s", resp.StatusCode, body)
		}
	})
}

// TestModuleTestConfig: test-config's tests-enabled and execution mode
// are kept on create and update and shown back; an agent pool must be the
// organization's and is then kept from deletion; tests of public modules
// and inconsistent modes are refused saying why.
func TestModuleTestConfig(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		on := &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)}
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("tested"), Provider: tfe.String("aws")}); err != nil {
			t.Fatal(err)
		}
		id := tfe.RegistryModuleID{Organization: "acme", Name: "tested", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
		if rm, err := c.RegistryModules.Read(ctx, id); err != nil || rm.TestConfig == nil || rm.TestConfig.TestsEnabled {
			t.Fatalf("new module: %+v, %v (tests off)", rm, err)
		}
		if _, err := c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: on}); err != nil {
			t.Fatal(err)
		}
		if rm, err := c.RegistryModules.Read(ctx, id); err != nil || rm.TestConfig == nil || !rm.TestConfig.TestsEnabled {
			t.Fatalf("module created with tests: %+v, %v", rm, err)
		}
		rm, err := c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(false)}})
		if err != nil || rm.TestConfig == nil || rm.TestConfig.TestsEnabled {
			t.Fatalf("tests disabled: %+v, %v", rm, err)
		}
		if rm, err := c.RegistryModules.Read(ctx, id); err != nil || rm.TestConfig == nil || rm.TestConfig.TestsEnabled {
			t.Fatalf("module read after disabling tests: %+v, %v", rm, err)
		}
		if rm.TestConfig.AgentExecutionMode == nil || *rm.TestConfig.AgentExecutionMode != "remote" || rm.TestConfig.AgentPoolID != nil {
			t.Fatalf("a module's tests run on the server by default: %+v", rm.TestConfig)
		}

		// Agent execution: the pool must be the organization's, and is
		// shown back; a pool running a module's tests is not deleted.
		agent := tfe.AgentExecutionModeAgent
		agentOn := func(pool string) (*tfe.RegistryModule, error) {
			return c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true), AgentExecutionMode: &agent, AgentPoolID: tfe.String(pool)}})
		}
		_, err = agentOn("apool-1")
		testenv.WantStatus(t, "tests on an unknown pool", err, `agent pool "apool-1" not found in organization "acme"`)
		testenv.NewOrg(t, c, "other")
		foreign, err := c.AgentPools.Create(ctx, "other", tfe.AgentPoolCreateOptions{Name: tfe.String("theirs")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = agentOn(foreign.ID)
		testenv.WantStatus(t, "tests on another organization's pool", err, "not found in organization")
		if rm, err := c.RegistryModules.Read(ctx, id); err != nil || rm.TestConfig.TestsEnabled || *rm.TestConfig.AgentExecutionMode != "remote" {
			t.Fatalf("a refused test-config changed the module: %+v, %v", rm.TestConfig, err)
		}
		pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("private-net")})
		if err != nil {
			t.Fatal(err)
		}
		if rm, err = agentOn(pool.ID); err != nil {
			t.Fatal(err)
		}
		read, err := c.RegistryModules.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*tfe.RegistryModule{rm, read} {
			tc := got.TestConfig
			if !tc.TestsEnabled || tc.AgentExecutionMode == nil || *tc.AgentExecutionMode != "agent" || tc.AgentPoolID == nil || *tc.AgentPoolID != pool.ID {
				t.Fatalf("tests on agents: %+v, want enabled on pool %s", tc, pool.ID)
			}
		}
		err = c.AgentPools.Delete(ctx, pool.ID)
		testenv.WantStatus(t, "deleting the pool the tests run on", err, "1 registry module(s)")
		// What go-tfe checks before sending, the server checks too.
		for body, want := range map[string]string{
			`{"tests-enabled":true,"agent-execution-mode":"agent"}`:                                    "needs the agent-pool-id",
			`{"tests-enabled":true,"agent-execution-mode":"remote","agent-pool-id":"` + pool.ID + `"}`: "takes no agent-pool-id",
			`{"agent-pool-id":"` + pool.ID + `"}`:                                                      "agent-pool-id needs agent-execution-mode",
			`{"agent-execution-mode":"local"}`:                                                         "agent-execution-mode must be",
		} {
			doc := `{"data":{"type":"registry-modules","attributes":{"test-config":` + body + `}}}`
			resp, b := do(t, e.HTTP, "PATCH", e.URL+"/api/v2/organizations/acme/registry-modules/private/acme/tested/aws", e.Token, []byte(doc))
			if resp.StatusCode != 422 || !strings.Contains(string(b), want) {
				t.Fatalf("test-config %s: %d %s, want 422 saying %q", body, resp.StatusCode, b, want)
			}
		}
		remote := tfe.AgentExecutionModeRemote
		rm, err = c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{AgentExecutionMode: &remote}})
		if err != nil || !rm.TestConfig.TestsEnabled || *rm.TestConfig.AgentExecutionMode != "remote" || rm.TestConfig.AgentPoolID != nil {
			t.Fatalf("back to the server: %+v, %v", rm.TestConfig, err)
		}
		if err := c.AgentPools.Delete(ctx, pool.ID); err != nil {
			t.Fatalf("the pool no module uses any more: %v", err)
		}
		if _, err := c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(false)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("vpc"), Provider: tfe.String("aws"),
			RegistryName: tfe.PublicRegistry, Namespace: "terraform-aws-modules"}); err != nil {
			t.Fatal(err)
		}
		pub := tfe.RegistryModuleID{Organization: "acme", Name: "vpc", Provider: "aws", Namespace: "terraform-aws-modules", RegistryName: tfe.PublicRegistry}
		_, err = c.RegistryModules.Update(ctx, pub, tfe.RegistryModuleUpdateOptions{TestConfig: on})
		testenv.WantStatus(t, "tests of a public module", err, "only private modules run tests")
	})
}
