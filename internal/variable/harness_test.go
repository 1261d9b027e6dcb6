package variable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/variable"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fakeWorkspaces and fakeProjects stand in for the workspace and project
// domains: a map, access-checked the way the real ones are.
type fakeWorkspaces struct {
	mu sync.Mutex
	m  map[string]*variable.Workspace
}

func (f *fakeWorkspaces) Get(ctx context.Context, id string) (*variable.Workspace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ws, ok := f.m[id]
	if !ok || auth.CheckOrganization(ctx, ws.Organization) != nil {
		return nil, core.NotFound("workspace %q not found", id)
	}
	c := *ws
	return &c, nil
}

type fakeProjects struct {
	mu sync.Mutex
	m  map[string]string
}

func (f *fakeProjects) Get(ctx context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	org, ok := f.m[id]
	if !ok || auth.CheckOrganization(ctx, org) != nil {
		return "", core.NotFound("project %q not found", id)
	}
	return org, nil
}

// harness is a real Terrace server (auth, organizations, the chosen store)
// plus a second HTTPS listener serving the variable API on the same
// database and token authentication, with fake workspaces and projects.
type harness struct {
	t       *testing.T
	env     *testenv.Env
	svc     *variable.Service
	ws      *fakeWorkspaces
	prj     *fakeProjects
	url     string
	http    *http.Client
	token   string
	Client  *tfe.Client
	ctx     context.Context
	orgName string
}

func newHarness(t *testing.T, e *testenv.Env) *harness {
	t.Helper()
	h := &harness{t: t, env: e, ctx: context.Background(),
		ws:  &fakeWorkspaces{m: map[string]*variable.Workspace{}},
		prj: &fakeProjects{m: map[string]string{}},
	}
	h.svc = variable.NewService(e.Server.DB, h.ws, h.prj)
	api := http.NewServeMux()
	api.HandleFunc("/", tfeapi.NotFound)
	(&variable.API{Service: h.svc}).Register(api)
	root := http.NewServeMux()
	root.HandleFunc("GET /api/v2/ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	root.Handle("/api/v2/", e.Server.Auth.Middleware(tfeapi.Error)(api))
	ts := httptest.NewTLSServer(root)
	t.Cleanup(ts.Close)
	h.url, h.http, h.token = ts.URL, ts.Client(), e.Token
	h.Client = h.client(e.Token)
	h.orgName = h.newOrg(e.Client)
	return h
}

func (h *harness) client(token string) *tfe.Client {
	h.t.Helper()
	c, err := tfe.NewClient(&tfe.Config{Address: h.url, Token: token, HTTPClient: h.http, RetryServerErrors: false})
	if err != nil {
		h.t.Fatalf("go-tfe client: %v", err)
	}
	return c
}

// newOrg creates an organization on the real server with the given client.
func (h *harness) newOrg(c *tfe.Client) string {
	h.t.Helper()
	name := "org-" + core.RandomString(8)
	if _, err := c.Organizations.Create(h.ctx, tfe.OrganizationCreateOptions{Name: tfe.String(name), Email: tfe.String("a@example.com")}); err != nil {
		h.t.Fatalf("creating organization: %v", err)
	}
	return name
}

// newWorkspace registers a fake workspace (in a new fake project unless
// projectID is given).
func (h *harness) newWorkspace(org, projectID string) *variable.Workspace {
	if projectID == "" {
		projectID = h.newProject(org)
	}
	ws := &variable.Workspace{ID: core.NewID(core.PrefixWorkspace), Name: "ws-" + core.RandomString(6), Organization: org, ProjectID: projectID}
	h.ws.mu.Lock()
	h.ws.m[ws.ID] = ws
	h.ws.mu.Unlock()
	return ws
}

func (h *harness) newProject(org string) string {
	id := core.NewID(core.PrefixProject)
	h.prj.mu.Lock()
	h.prj.m[id] = org
	h.prj.mu.Unlock()
	return id
}

// userToken makes a non-admin user and returns a token for it.
func (h *harness) userToken() string {
	h.t.Helper()
	a := h.env.Server.Auth
	u, err := a.CreateUser(h.ctx, h.env.Server.DB, "u-"+core.RandomString(8), "", false)
	if err != nil {
		h.t.Fatal(err)
	}
	_, secret, err := a.CreateToken(h.ctx, h.env.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: u.ID})
	if err != nil {
		h.t.Fatal(err)
	}
	return secret
}

// do sends a raw request and returns the status and decoded body.
func (h *harness) do(method, path string, body any) (int, map[string]any, string) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.url+"/api/v2/"+path, rd)
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", tfeapi.ContentType)
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, string(raw)
}

// forEachStore runs fn against a harness on each store.
func forEachStore(t *testing.T, fn func(t *testing.T, h *harness)) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		fn(t, newHarness(t, e))
	})
}
