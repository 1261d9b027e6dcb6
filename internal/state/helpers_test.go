package state_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// testWorkspaces is a small real implementation of state.Workspaces over a
// test-only table, standing in for the workspace domain.
type testWorkspaces struct{ db *store.DB }

func (w *testWorkspaces) scan(ctx context.Context, row interface{ Scan(...any) error }, what string) (*state.Workspace, error) {
	var ws state.Workspace
	if err := row.Scan(&ws.ID, &ws.Organization, &ws.Name, &ws.LockedBy); err != nil {
		if store.IsNoRows(err) {
			return nil, core.NotFound("workspace %s not found", what)
		}
		return nil, err
	}
	if err := auth.CheckOrganization(ctx, ws.Organization); err != nil {
		return nil, core.NotFound("workspace %s not found", what)
	}
	return &ws, nil
}

func (w *testWorkspaces) Get(ctx context.Context, id string) (*state.Workspace, error) {
	return w.scan(ctx, w.db.QueryRow(ctx, `SELECT id, organization_name, name, locked_by FROM test_state_workspaces WHERE id = ?`, id), id)
}

func (w *testWorkspaces) GetByName(ctx context.Context, org, name string) (*state.Workspace, error) {
	return w.scan(ctx, w.db.QueryRow(ctx, `SELECT id, organization_name, name, locked_by FROM test_state_workspaces WHERE organization_name = ? AND name = ?`, org, name), name)
}

// env is a test server with the stand-in workspaces wired in.
type env struct {
	*testenv.Env
	adminID string
}

func wire(t testing.TB, e *testenv.Env) *env {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Server.DB.Exec(ctx, `CREATE TABLE IF NOT EXISTS test_state_workspaces (id TEXT PRIMARY KEY, organization_name TEXT NOT NULL, name TEXT NOT NULL, locked_by TEXT NOT NULL DEFAULT '')`); err != nil {
		t.Fatal(err)
	}
	e.Server.States.SetWorkspaces(&testWorkspaces{db: e.Server.DB})
	admin, err := e.Server.Auth.UserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: e, adminID: admin.ID}
}

func newEnv(t testing.TB, st string) *env {
	return wire(t, testenv.New(t, testenv.Options{Store: st}))
}

func forEachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) { fn(t, newEnv(t, st)) })
	}
}

func (e *env) restart(t testing.TB) *env { return wire(t, e.Env.Restart(t)) }

func (e *env) org(t testing.TB, name string) {
	t.Helper()
	if _, err := e.Client.Organizations.Create(context.Background(), tfe.OrganizationCreateOptions{Name: tfe.String(name), Email: tfe.String("ops@" + name + ".test")}); err != nil {
		t.Fatal(err)
	}
}

// workspace creates a workspace locked by the site admin.
func (e *env) workspace(t testing.TB, org, name string) string {
	t.Helper()
	id := core.NewID(core.PrefixWorkspace)
	if _, err := e.Server.DB.Exec(context.Background(), `INSERT INTO test_state_workspaces (id, organization_name, name, locked_by) VALUES (?, ?, ?, ?)`, id, org, name, e.adminID); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) lock(t testing.TB, wsID, holder string) {
	t.Helper()
	if _, err := e.Server.DB.Exec(context.Background(), `UPDATE test_state_workspaces SET locked_by = ? WHERE id = ?`, holder, wsID); err != nil {
		t.Fatal(err)
	}
}

// userClient makes a user who belongs to no organization and returns a
// go-tfe client with the user's token.
func (e *env) userClient(t testing.TB, name string) *tfe.Client {
	t.Helper()
	ctx := context.Background()
	u, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, name, name+"@example.test", false)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	return e.NewClient(t, secret)
}

// do sends an authenticated request (token "" for none) and returns the
// status and body.
func (e *env) do(t testing.TB, method, url, token string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	if strings.HasPrefix(url, "/") {
		url = e.URL + url
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/vnd.api+json")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

type testState struct {
	serial  int64
	lineage string
	outputs map[string]any
	// resources is the number of managed null_resource-free instances.
	resources int
	padding   int // bytes of padding in one attribute, for large states
}

const lineageA = "2f4a1d0e-6b1c-4c52-9d0b-1a2b3c4d5e6f"
const lineageB = "7e9c3a11-0000-4f00-8000-abcdefabcdef"

func (s testState) bytes() []byte {
	outputs := map[string]any{
		"greeting": map[string]any{"value": "hello", "type": "string"},
		"password": map[string]any{"value": "s3cr3t", "type": "string", "sensitive": true},
		"ports":    map[string]any{"value": []any{80, 443}, "type": []any{"list", "number"}},
		"tags":     map[string]any{"value": map[string]any{"env": "prod"}, "type": []any{"object", map[string]any{"env": "string"}}},
		"enabled":  map[string]any{"value": true, "type": "bool"},
	}
	for k, v := range s.outputs {
		outputs[k] = v
	}
	var instances []any
	for i := 0; i < s.resources; i++ {
		instances = append(instances, map[string]any{"index_key": i, "schema_version": 0, "attributes": map[string]any{"id": fmt.Sprint(i), "pad": strings.Repeat("x", s.padding)}})
	}
	resources := []any{
		map[string]any{"mode": "managed", "type": "aws_instance", "name": "web", "provider": `provider["registry.terraform.io/hashicorp/aws"]`, "instances": instances},
		map[string]any{"mode": "managed", "type": "null_resource", "name": "n", "provider": `provider["registry.terraform.io/hashicorp/null"]`, "instances": []any{map[string]any{"attributes": map[string]any{"id": "1"}}}},
		map[string]any{"mode": "data", "type": "aws_ami", "name": "ubuntu", "provider": `provider["registry.terraform.io/hashicorp/aws"]`, "instances": []any{map[string]any{"attributes": map[string]any{"id": "ami-1"}}}},
	}
	lineage := s.lineage
	if lineage == "" {
		lineage = lineageA
	}
	b, _ := json.MarshalIndent(map[string]any{
		"version": 4, "terraform_version": "1.9.5", "serial": s.serial, "lineage": lineage,
		"outputs": outputs, "resources": resources, "check_results": nil,
	}, "", "  ")
	return b
}

func md5hex(b []byte) string { return fmt.Sprintf("%x", md5.Sum(b)) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// inline creates a finalized version with inline state.
func (e *env) inline(t testing.TB, c *tfe.Client, wsID string, serial int64, raw []byte, mut ...func(*tfe.StateVersionCreateOptions)) (*tfe.StateVersion, error) {
	opts := tfe.StateVersionCreateOptions{Serial: tfe.Int64(serial), MD5: tfe.String(md5hex(raw)), State: tfe.String(b64(raw))}
	for _, m := range mut {
		m(&opts)
	}
	return c.StateVersions.Create(context.Background(), wsID, opts)
}

func (e *env) versionCount(t testing.TB, wsID string) int {
	t.Helper()
	var n int
	if err := e.Server.DB.QueryRow(context.Background(), `SELECT COUNT(*) FROM state_versions WHERE workspace_id = ?`, wsID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) currentID(t testing.TB, wsID string) string {
	t.Helper()
	id, err := e.Server.States.CurrentStateVersionID(context.Background(), wsID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func wantErr(t testing.TB, err error, contains string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error containing %q, got none", contains)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("expected an error containing %q, got %v", contains, err)
	}
}

type storeTx = store.Tx
