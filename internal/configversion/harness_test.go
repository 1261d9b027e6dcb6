package configversion

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/tfeapi"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fakeWorkspaces stands in for the workspace domain: a workspace is
// visible to callers who may access its organization.
type fakeWorkspaces map[string]*Workspace

func (f fakeWorkspaces) Get(ctx context.Context, id string) (*Workspace, error) {
	ws, ok := f[id]
	if !ok || !auth.FromContext(ctx).CanAccessOrganization(ws.Organization) {
		return nil, core.NotFound("workspace %s not found", id)
	}
	return ws, nil
}

// CheckQueueRun lets only owners write in workspaces named "readonly".
func (f fakeWorkspaces) CheckQueueRun(ctx context.Context, ws *Workspace) error {
	if ws.Name == "readonly" && !auth.FromContext(ctx).IsOwner(ws.Organization) {
		return core.Forbidden("you may not queue runs in workspace %s", ws.Name)
	}
	return nil
}

// env is a configversion API served over HTTPS the way server.go wires
// it: token-authenticated /api/v2 and a capability mux behind the signer.
type env struct {
	svc    *Service
	db     *store.DB
	blobs  *blob.Store
	srv    *httptest.Server
	http   *http.Client
	ws     *Workspace // in org "acme"
	ws2    *Workspace // also in "acme"
	evilWS *Workspace // in org "evil"
	client *tfe.Client
	evil   *tfe.Client // member of "evil" only
}

var principals = map[string]*auth.Principal{
	"tok-acme": {Kind: auth.KindUser, TokenID: "at-acme", UserID: "user-a", Username: "alice", Orgs: []string{"acme"}, Owns: []string{"acme"}},
	"tok-evil": {Kind: auth.KindUser, TokenID: "at-evil", UserID: "user-e", Username: "eve", Orgs: []string{"evil"}, Owns: []string{"evil"}},
}

func newEnv(t *testing.T, st string, opts Options) *env {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, storetest.DSN(t, st))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	blobs, err := blob.Open(ctx, filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	e := &env{db: db, blobs: blobs,
		ws:     &Workspace{ID: core.NewID("ws"), Name: "one", Organization: "acme"},
		ws2:    &Workspace{ID: core.NewID("ws"), Name: "two", Organization: "acme"},
		evilWS: &Workspace{ID: core.NewID("ws"), Name: "evil", Organization: "evil"},
	}
	wss := fakeWorkspaces{e.ws.ID: e.ws, e.ws2.ID: e.ws2, e.evilWS.ID: e.evilWS}

	var handler http.Handler
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	e.http = e.srv.Client()

	signer := blob.NewSigner([]byte("test-secret-test-secret-test-secret"), e.srv.URL)
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	e.svc = NewService(db, blobs, signer, wss, opts)
	a := &API{Service: e.svc}
	api := http.NewServeMux()
	api.HandleFunc("/", tfeapi.NotFound)
	a.Register(api)
	capability := http.NewServeMux()
	capability.HandleFunc("/", http.NotFound)
	a.RegisterCapability(capability)
	root := http.NewServeMux()
	root.HandleFunc("GET /api/v2/ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("TFP-API-Version", "2.6")
		w.WriteHeader(http.StatusNoContent)
	})
	root.Handle("/api/v2/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := principals[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			tfeapi.Error(w, r, core.Unauthorized("bad token"))
			return
		}
		api.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	}))
	root.Handle(blob.CapabilityPrefix, signer.Handler(capability))
	handler = root

	e.client = e.newClient(t, "tok-acme")
	e.evil = e.newClient(t, "tok-evil")
	return e
}

func (e *env) newClient(t *testing.T, token string) *tfe.Client {
	t.Helper()
	c, err := tfe.NewClient(&tfe.Config{Address: e.srv.URL, Token: token, HTTPClient: e.srv.Client(), RetryServerErrors: false})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ctx is a context carrying the acme member.
func acmeCtx() context.Context {
	return auth.WithPrincipal(context.Background(), principals["tok-acme"])
}

func forEachStore(t *testing.T, opts Options, fn func(t *testing.T, e *env)) {
	for _, st := range storetest.Stores {
		t.Run(st, func(t *testing.T) { fn(t, newEnv(t, st, opts)) })
	}
}

// put uploads body to url without Authorization and returns status and body.
func (e *env) put(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// packDir writes files (path → content; content "->target" makes a
// symlink) into a temp dir and packs it with slug.Pack.
func packDir(t *testing.T, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type entry struct {
	name     string
	typeflag byte
	body     []byte
	link     string
}

// rawTarGz builds an archive entry by entry, hostile ones included.
func rawTarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, en := range entries {
		h := &tar.Header{Name: en.name, Typeflag: en.typeflag, Mode: 0o644, Linkname: en.link, Size: int64(len(en.body))}
		if en.typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if en.typeflag == tar.TypeReg {
			if _, err := tw.Write(en.body); err != nil {
				t.Fatal(err)
			}
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
