package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestOrganizationsSurviveRestart(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		org, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")})
		if err != nil {
			t.Fatal(err)
		}
		if org.DefaultProject == nil || org.DefaultProject.ID == "" {
			t.Fatal("a new organization has no default project")
		}
		e = e.Restart(t)
		got, err := e.Client.Organizations.Read(ctx, "acme")
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		if got.Email != "ops@acme.test" || got.CreatedAt.IsZero() || got.DefaultProject.ID != org.DefaultProject.ID {
			t.Fatalf("after restart got %+v", got)
		}
	})
}

func TestUnauthenticatedRoutes(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	for path, want := range map[string]int{
		"/healthz":                    200,
		"/.well-known/terraform.json": 200,
		"/api/v2/ping":                204,
		"/api/v2/organizations":       401,
		"/_cap/1/abc/state":           404,
	} {
		resp, err := e.HTTP.Get(e.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestBadInputGetsJSONAPIErrors(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	cases := []struct {
		name, body string
		status     int
		detail     string
	}{
		{"malformed JSON", `{"data":`, 400, "not a JSON object"},
		{"wrong attribute type", `{"data":{"type":"organizations","attributes":{"name":3,"email":"a@b.c"}}}`, 422, `"name" must be of type string`},
		{"missing email", `{"data":{"type":"organizations","attributes":{"name":"x"}}}`, 422, "email is required"},
		{"bad name", `{"data":{"type":"organizations","attributes":{"name":"no spaces","email":"a@b.c"}}}`, 422, "invalid"},
		{"oversized", `{"data":{"attributes":{"name":"` + strings.Repeat("x", 6<<20) + `"}}}`, 413, "larger than the limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.URL+"/api/v2/organizations", strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+e.Token)
			req.Header.Set("Content-Type", "application/vnd.api+json")
			resp, err := e.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var doc struct {
				Errors []struct{ Status, Title, Detail string }
			}
			if err := json.Unmarshal(b, &doc); err != nil || len(doc.Errors) != 1 {
				t.Fatalf("not a JSON:API error document: %s", b)
			}
			if resp.StatusCode != c.status || !strings.Contains(doc.Errors[0].Detail, c.detail) {
				t.Fatalf("got %d %s; want %d with %q", resp.StatusCode, b, c.status, c.detail)
			}
		})
	}
	if _, err := e.Client.Organizations.Read(context.Background(), "nope"); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("unknown organization: %v", err)
	}
}
