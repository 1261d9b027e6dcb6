package blob_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// stores returns every kind of blob store: a local folder, and an S3 bucket
// served by a real S3-compatible server (versitygw, testenv.StartS3).
func stores(t *testing.T) map[string]*blob.Store {
	ctx := context.Background()
	local, err := blob.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })

	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	s3, err := blob.Open(ctx, srv.Spec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Close() })
	return map[string]*blob.Store{"local": local, "s3": s3}
}

func TestStores(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Get(ctx, "missing"); core.KindOf(err) != core.KindNotFound {
				t.Fatalf("missing blob: %v, want not found", err)
			}
			if err := s.Put(ctx, "a/b/state", []byte("v1")); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, "a/b/state", []byte("v2")); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, "a/b/state")
			if err != nil || string(got) != "v2" {
				t.Fatalf("Get = %q, %v", got, err)
			}
			big := bytes.Repeat([]byte("x"), 3<<20)
			n, err := s.PutReader(ctx, "big", bytes.NewReader(big), int64(len(big)))
			if err != nil || n != int64(len(big)) {
				t.Fatalf("PutReader at the limit: %d, %v", n, err)
			}
			if _, err := s.PutReader(ctx, "too-big", bytes.NewReader(big), int64(len(big))-1); core.KindOf(err) != core.KindTooLarge {
				t.Fatalf("PutReader over the limit: %v, want too large", err)
			}
			if ok, _ := s.Exists(ctx, "too-big"); ok {
				t.Fatal("an upload over the limit left an object behind")
			}
			if err := s.Delete(ctx, "a/b/state"); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "a/b/state"); err != nil {
				t.Fatalf("deleting a missing blob: %v", err)
			}
			if ok, _ := s.Exists(ctx, "a/b/state"); ok {
				t.Fatal("deleted blob still exists")
			}
		})
	}
}

func TestCapabilityURLs(t *testing.T) {
	signer := blob.NewSigner([]byte("secret"), "https://terrace.test")
	inner := http.NewServeMux()
	inner.HandleFunc("PUT /state-versions/{id}/content", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok " + r.PathValue("id")))
	})
	inner.HandleFunc("GET /logs/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("log " + r.URL.Query().Get("offset")))
	})
	h := signer.Handler(inner)
	do := func(method, url string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, strings.TrimPrefix(url, "https://terrace.test"), nil))
		return rec.Code, rec.Body.String()
	}
	put := signer.URL("PUT", "/state-versions/sv-1/content", time.Minute)
	if code, body := do("PUT", put); code != 200 || body != "ok sv-1" {
		t.Fatalf("valid URL: %d %q", code, body)
	}
	if code, _ := do("GET", put); code != 404 {
		t.Fatalf("a PUT capability used for GET: %d, want 404", code)
	}
	if code, _ := do("PUT", strings.Replace(put, "sv-1", "sv-2", 1)); code != 404 {
		t.Fatalf("a capability for another object: %d, want 404", code)
	}
	other := blob.NewSigner([]byte("other secret"), "https://terrace.test")
	if code, _ := do("PUT", other.URL("PUT", "/state-versions/sv-1/content", time.Minute)); code != 404 {
		t.Fatalf("a URL signed with another secret: %d, want 404", code)
	}
	if code, _ := do("PUT", signer.URL("PUT", "/state-versions/sv-1/content", -time.Second)); code != 404 {
		t.Fatalf("an expired URL: %d, want 404", code)
	}
	logURL := signer.URL("GET", "/logs/x", time.Minute)
	if code, body := do("GET", logURL+"?offset=10&limit=5"); code != 200 || body != "log 10" {
		t.Fatalf("query added by a log reader: %d %q", code, body)
	}
	if code, _ := do("HEAD", logURL); code != 200 {
		t.Fatalf("HEAD on a GET capability: %d", code)
	}
}
