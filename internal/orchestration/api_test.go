package orchestration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type apiClient struct {
	t      *testing.T
	e      *testenv.Env
	token  string
	header map[string]string // extra request headers
}

// call sends a JSON request and returns the status and decoded answer.
func (c apiClient) call(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.e.URL+"/api/terrace/v1"+path, rd)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := c.e.HTTP.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	} else if len(raw) > 0 && raw[0] == '[' {
		var list []any
		_ = json.Unmarshal(raw, &list)
		out["list"] = list
	}
	return resp.StatusCode, out
}

func (c apiClient) must(want int, method, path string, body any) map[string]any {
	c.t.Helper()
	got, out := c.call(method, path, body)
	if got != want {
		c.t.Fatalf("%s %s: status %d, want %d: %v", method, path, got, want, out)
	}
	return out
}

// fields returns the field names of an error answer.
func fields(out map[string]any) string {
	var fs []string
	errs, _ := out["errors"].([]any)
	for _, e := range errs {
		m, _ := e.(map[string]any)
		if f, ok := m["field"].(string); ok {
			fs = append(fs, f)
		}
		if c, ok := m["code"].(string); ok {
			fs = append(fs, c)
		}
	}
	return strings.Join(fs, ",")
}

func TestObjectsAPI(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		for _, org := range []string{"acme", "other"} {
			if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@" + org + ".test")}); err != nil {
				t.Fatal(err)
			}
		}
		c := apiClient{t: t, e: e, token: e.Token}
		const o = "/orgs/acme"

		// No token: 401.
		if st, _ := (apiClient{t: t, e: e}).call("GET", o+"/projects", nil); st != http.StatusUnauthorized {
			t.Fatalf("no token: %d", st)
		}
		// An organization that does not exist is a 404, even to a site admin.
		c.must(404, "POST", "/orgs/nope/projects", map[string]any{"id": "shop"})
		c.must(404, "GET", "/orgs/nope/projects", nil)
		// Validation errors name the field, several at once.
		out := c.must(422, "POST", o+"/projects", map[string]any{"id": "Bad_ID", "display_name": "x"})
		if f := fields(out); f != "id,display_name" {
			t.Fatalf("project errors name %q", f)
		}
		out = c.must(422, "POST", o+"/projects", map[string]any{"id": "p", "colour": "red"})
		if f := fields(out); f != "colour" {
			t.Fatalf("an unknown field: %q", f)
		}
		c.must(201, "POST", o+"/projects", map[string]any{"id": "shop", "display_name": "Shop"})
		c.must(409, "POST", o+"/projects", map[string]any{"id": "shop"})
		c.must(201, "POST", o+"/env-types", map[string]any{"id": "development"})
		c.must(201, "POST", o+"/env-types", map[string]any{"id": "production"})
		out = c.must(422, "POST", o+"/projects/shop/envs", map[string]any{"id": "dev", "env_type_id": "staging"})
		if f := fields(out); f != "env_type_id" {
			t.Fatalf("an unknown env type: %q", f)
		}
		c.must(201, "POST", o+"/projects/shop/envs", map[string]any{"id": "dev", "env_type_id": "development"})
		out = c.must(422, "PUT", o+"/projects/shop/envs/dev", map[string]any{"env_type_id": "production"})
		if f := fields(out); f != "env_type_id" {
			t.Fatalf("changing the env type: %q", f)
		}
		c.must(201, "POST", o+"/resource-types", map[string]any{"id": "postgres", "output_schema": map[string]any{"type": "object"}})
		c.must(201, "POST", o+"/module-providers/random", map[string]any{"id": "default", "source": "hashicorp/random", "version_constraint": "~> 3.0"})

		// Modules: references are checked; each update is a new version.
		out = c.must(422, "POST", o+"/modules", map[string]any{"id": "pg", "resource_type": "mysql", "module_source_code": "x",
			"provider_mapping": map[string]any{"random": "random.missing"}})
		if f := fields(out); f != "resource_type,provider_mapping.random" {
			t.Fatalf("module references: %q", f)
		}
		out = c.must(422, "POST", o+"/modules", map[string]any{"id": "pg", "resource_type": "postgres", "module_source_code": strings.Repeat("#", 2001)})
		if f := fields(out); f != "module_source_code" {
			t.Fatalf("inline source limit: %q", f)
		}
		mod := map[string]any{"id": "pg", "resource_type": "postgres", "module_source_code": `output "host" { value = "db" }`,
			"provider_mapping": map[string]any{"random": "random.default"}}
		v1 := c.must(201, "POST", o+"/modules", mod)["version_id"]
		mod["description"] = "second"
		v2 := c.must(200, "PUT", o+"/modules/pg", mod)["version_id"]
		if v1 == nil || v1 == v2 {
			t.Fatalf("module versions %v then %v", v1, v2)
		}
		if vs := c.must(200, "GET", o+"/modules/pg/versions", nil)["list"].([]any); len(vs) != 2 {
			t.Fatalf("module versions: %v", vs)
		}

		// Module rules: the same tuple twice is a conflict; rules are immutable.
		rule := c.must(201, "POST", o+"/module-rules", map[string]any{"module_id": "pg", "project_id": "shop"})
		c.must(409, "POST", o+"/module-rules", map[string]any{"module_id": "pg", "project_id": "shop", "resource_class": "default"})
		c.must(201, "POST", o+"/module-rules", map[string]any{"module_id": "pg", "project_id": "shop", "env_id": "dev"})
		out = c.must(422, "POST", o+"/module-rules", map[string]any{"module_id": "nope", "env_type_id": "development", "env_id": "dev"})
		if f := fields(out); !strings.Contains(f, "env_id") {
			t.Fatalf("rule errors: %q", f)
		}
		c.must(409, "PUT", o+"/module-rules/"+rule["id"].(string), map[string]any{"module_id": "pg"})

		// Referenced objects cannot be deleted.
		c.must(409, "DELETE", o+"/modules/pg", nil)
		c.must(409, "DELETE", o+"/resource-types/postgres", nil)
		c.must(409, "DELETE", o+"/module-providers/random/default", nil)
		c.must(409, "DELETE", o+"/projects/shop", nil)
		c.must(409, "DELETE", o+"/env-types/development", nil)

		// Dry run: the graph and a diff; a compile error lists the nodes.
		manifest := map[string]any{"shared": map[string]any{"db": map[string]any{"type": "postgres"}}}
		out = c.must(200, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest, "is_dry_run": true})
		if nodes := out["graph"].(map[string]any)["nodes"].([]any); len(nodes) != 1 || !strings.Contains(out["terraform"].(map[string]any)["main.tf"].(string), `provider "random"`) {
			t.Fatalf("dry run: %v", out)
		}
		if d := out["diff"].([]any); len(d) != 1 {
			t.Fatalf("dry run diff: %v", d)
		}
		if ds := c.must(200, "GET", o+"/projects/shop/envs/dev/deployments", nil)["list"].([]any); len(ds) != 0 {
			t.Fatalf("a dry run was stored: %v", ds)
		}
		bad := map[string]any{"shared": map[string]any{"db": map[string]any{"type": "postgres"}, "q": map[string]any{"type": "queue"}}}
		out = c.must(422, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": bad, "is_dry_run": true})
		if f := fields(out); f != "unknown_type" {
			t.Fatalf("compile errors: %q (%v)", f, out)
		}
		out = c.must(422, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "mode": "undo"})
		if f := fields(out); f != "mode" {
			t.Fatalf("deployment errors: %q", f)
		}
		out = c.must(422, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "mode": "rollback"})
		if f := fields(out); f != "rollback_to_deployment_id" {
			t.Fatalf("a rollback without a target: %q", f)
		}
		c.must(404, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "mode": "rollback", "rollback_to_deployment_id": "dep-nope"})
		c.must(404, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "prod", "manifest": manifest, "is_dry_run": true})

		// Another organization's token sees nothing of acme.
		tok, err := e.Client.OrganizationTokens.Create(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		other := apiClient{t: t, e: e, token: tok.Token}
		other.must(201, "POST", "/orgs/other/projects", map[string]any{"id": "shop"})
		for _, p := range []string{"/projects", "/projects/shop", "/projects/shop/envs/dev", "/modules/pg", "/module-rules/" + rule["id"].(string), "/env-types", "/module-providers"} {
			other.must(404, "GET", o+p, nil)
		}
		other.must(404, "DELETE", o+"/modules/pg", nil)
		other.must(404, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest, "is_dry_run": true})
		if list := other.must(200, "GET", "/orgs/other/projects", nil)["list"].([]any); len(list) != 1 {
			t.Fatalf("other's projects: %v", list)
		}
		// Deleting in dependency order works.
		c.must(204, "DELETE", o+"/module-rules/"+rule["id"].(string), nil)
		c.must(404, "GET", o+"/module-rules/"+rule["id"].(string), nil)
	})
}
