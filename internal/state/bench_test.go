package state_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
)

// bigState is a valid state file of about n bytes.
func bigState(n int) []byte {
	const per = 1000
	return testState{serial: 1, resources: n / (per + 80), padding: per}.bytes()
}

// BenchmarkStateUpload10MB measures creating a pending version and PUTting
// a 10 MB state to its upload URL over HTTPS (SQLite store): validation,
// blob write and the finalizing transaction.
func BenchmarkStateUpload10MB(b *testing.B) {
	e := newEnv(b, "sqlite")
	e.org(b, "acme")
	ws := e.workspace(b, "acme", "bench")
	raw := bigState(10 << 20)
	sum := md5hex(raw)
	ctx := context.Background()
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Same content under a rising serial: accepted (the content's own
		// serial equals the current one and the content is identical).
		sv, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(int64(i + 1)), MD5: tfe.String(sum)})
		if err != nil {
			b.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPut, sv.UploadURL, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := e.HTTP.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("upload: %d", resp.StatusCode)
		}
	}
}

// BenchmarkStateDownload10MB measures downloading a 10 MB state through its
// capability URL over HTTPS (SQLite store, local blobs).
func BenchmarkStateDownload10MB(b *testing.B) {
	e := newEnv(b, "sqlite")
	e.org(b, "acme")
	ws := e.workspace(b, "acme", "bench")
	raw := bigState(10 << 20)
	sv, err := e.inline(b, e.Client, ws, 1, raw)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := e.HTTP.Get(sv.DownloadURL)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != int64(len(raw)) {
			b.Fatalf("download: %d, %d bytes", resp.StatusCode, n)
		}
	}
}
