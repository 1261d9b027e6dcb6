package configversion

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/core/copytest"
)

var mainTF = map[string]string{
	"main.tf":          "resource \"null_resource\" \"x\" {}\n",
	"modules/m/m.tf":   "variable \"v\" {}\n",
	"modules/link.tf":  "->m/m.tf",
	"README.md":        "hello\n",
	"empty/.gitignore": "",
}

func waitStatus(t *testing.T, c *tfe.Client, id string, want tfe.ConfigurationStatus) *tfe.ConfigurationVersion {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cv, err := c.ConfigurationVersions.Read(context.Background(), id)
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
		}
		if cv.Status == want {
			return cv
		}
		if time.Now().After(deadline) {
			t.Fatalf("configuration version %s is %s, want %s", id, cv.Status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCreateUploadDownload(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		cv, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		if cv.Status != tfe.ConfigurationPending || cv.Source != tfe.ConfigurationSourceAPI || cv.AutoQueueRuns || cv.UploadURL == "" || cv.Error != "" {
			t.Fatalf("created %+v", cv)
		}
		if !strings.Contains(cv.UploadURL, "/_cap/") {
			t.Fatalf("upload URL %q is not a capability URL", cv.UploadURL)
		}
		read, err := e.client.ConfigurationVersions.Read(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if read.UploadURL != "" {
			t.Fatalf("read shows the upload URL %q", read.UploadURL)
		}
		created := *cv
		created.UploadURL = ""
		if !equalCV(&created, read) {
			t.Fatalf("create %+v != read %+v", created, *read)
		}

		// Downloading before upload is a 404.
		if _, err := e.client.ConfigurationVersions.Download(ctx, cv.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("download of pending version: %v", err)
		}

		archive := packDir(t, mainTF)
		if err := e.client.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
			t.Fatal(err)
		}
		up := waitStatus(t, e.client, cv.ID, tfe.ConfigurationUploaded)
		if up.StatusTimestamps == nil || up.StatusTimestamps.FinishedAt.IsZero() || up.StatusTimestamps.StartedAt.IsZero() {
			t.Fatalf("status timestamps %+v", up.StatusTimestamps)
		}
		got, err := e.client.ConfigurationVersions.Download(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, archive) {
			t.Fatalf("download (%d bytes) differs from upload (%d bytes)", len(got), len(archive))
		}
		// The run domain's view.
		raw, err := e.svc.Archive(acmeCtx(), cv.ID)
		if err != nil || !bytes.Equal(raw, archive) {
			t.Fatalf("Service.Archive: %v (equal=%v)", err, bytes.Equal(raw, archive))
		}
		// Without a caller only the unchecked variant (for the executor) answers.
		if _, err := e.svc.Archive(context.Background(), cv.ID); core.KindOf(err) != core.KindNotFound {
			t.Fatalf("Archive without a principal: %v", err)
		}
		rc, size, err := e.svc.OpenArchiveUnchecked(context.Background(), cv.ID)
		if err != nil || size != int64(len(archive)) {
			t.Fatalf("OpenArchiveUnchecked: %v, size %d", err, size)
		}
		rc.Close()
		// Survives a fresh service on the same store (nothing kept in memory).
		again := NewService(e.db, e.blobs, nil, e.svc.ws, Options{})
		if raw, err := again.Archive(acmeCtx(), cv.ID); err != nil || !bytes.Equal(raw, archive) {
			t.Fatalf("Archive from a fresh service: %v", err)
		}
		// Unknown and malformed IDs are 404s.
		for _, id := range []string{"cv-nonexisting", "nonexisting", "ws-" + cv.ID[3:]} {
			if _, err := e.client.ConfigurationVersions.Read(ctx, id); !errors.Is(err, tfe.ErrResourceNotFound) {
				t.Errorf("read %s: %v", id, err)
			}
		}
	})
}

// equalCV compares what go-tfe decodes, as go-tfe's Read test does.
func equalCV(a, b *tfe.ConfigurationVersion) bool {
	if (a.StatusTimestamps == nil) != (b.StatusTimestamps == nil) {
		return false
	}
	if a.StatusTimestamps != nil && *a.StatusTimestamps != *b.StatusTimestamps {
		return false
	}
	x, y := *a, *b
	x.StatusTimestamps, y.StatusTimestamps = nil, nil
	return x == y
}

func TestHostileArchives(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 3<<20) // compresses to a few KB
	random := make([]byte, 256<<10)
	_, _ = rand.Read(random)
	cases := []struct {
		name    string
		archive func(t *testing.T) []byte
		status  int
		message string
	}{
		{"path traversal", func(t *testing.T) []byte {
			return rawTarGz(t, entry{name: "main.tf", typeflag: tar.TypeReg, body: []byte("x")}, entry{name: "../../evil.tf", typeflag: tar.TypeReg, body: []byte("pwn")})
		}, 422, "escapes the archive"},
		{"absolute path", func(t *testing.T) []byte {
			return rawTarGz(t, entry{name: "/etc/evil", typeflag: tar.TypeReg, body: []byte("pwn")})
		}, 422, "absolute path"},
		{"symlink escape", func(t *testing.T) []byte {
			return rawTarGz(t, entry{name: "link", typeflag: tar.TypeSymlink, link: "../../../etc"})
		}, 422, "points outside the archive"},
		{"write through symlink", func(t *testing.T) []byte {
			return rawTarGz(t, entry{name: "d", typeflag: tar.TypeSymlink, link: "."}, entry{name: "d/x.tf", typeflag: tar.TypeReg, body: []byte("x")})
		}, 422, "symbolic link"},
		{"hard link", func(t *testing.T) []byte {
			return rawTarGz(t, entry{name: "h", typeflag: tar.TypeLink, link: "/etc/passwd"})
		}, 422, "hard link"},
		{"unpacks too large", func(t *testing.T) []byte {
			return rawTarGz(t, entry{name: "big.tf", typeflag: tar.TypeReg, body: big})
		}, 422, "unpacks to more than the limit of 1048576 bytes"},
		{"not gzip", func(t *testing.T) []byte { return []byte("definitely not a tarball") }, 422, "not gzip"},
		{"empty body", func(t *testing.T) []byte { return nil }, 422, "not gzip"},
		{"upload too large", func(t *testing.T) []byte { return random }, 413, "larger than the limit of 131072 bytes"},
	}
	forEachStore(t, Options{MaxUnpackedBytes: 1 << 20, MaxUploadBytes: 128 << 10}, func(t *testing.T, e *env) {
		ctx := context.Background()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cv, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				code, body := e.put(t, cv.UploadURL, tc.archive(t))
				if code != tc.status || !strings.Contains(body, `"errors"`) || !strings.Contains(body, tc.message) {
					t.Fatalf("PUT answered %d %s; want %d mentioning %q", code, body, tc.status, tc.message)
				}
				got := waitStatus(t, e.client, cv.ID, tfe.ConfigurationErrored)
				if got.Error == "" || !strings.Contains(got.ErrorMessage, tc.message) {
					t.Fatalf("error %q, error-message %q; want it to mention %q", got.Error, got.ErrorMessage, tc.message)
				}
				if _, err := e.client.ConfigurationVersions.Download(ctx, cv.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
					t.Fatalf("download of errored version: %v", err)
				}
				// Nothing of the refused upload is left behind.
				var n int
				if err := e.db.QueryRow(ctx, `SELECT COUNT(*) FROM configuration_version_garbage`).Scan(&n); err != nil || n != 0 {
					t.Fatalf("garbage rows: %d, %v", n, err)
				}
				// An errored version can be fixed with a good upload.
				good := packDir(t, mainTF)
				if code, body := e.put(t, cv.UploadURL, good); code != http.StatusOK {
					t.Fatalf("good upload after a bad one: %d %s", code, body)
				}
				fixed := waitStatus(t, e.client, cv.ID, tfe.ConfigurationUploaded)
				if fixed.Error != "" || fixed.ErrorMessage != "" {
					t.Fatalf("fixed version still shows error %q %q", fixed.Error, fixed.ErrorMessage)
				}
			})
		}

		// A hostile re-upload leaves an uploaded version as it was.
		cv, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		good := packDir(t, mainTF)
		if code, body := e.put(t, cv.UploadURL, good); code != 200 {
			t.Fatalf("upload: %d %s", code, body)
		}
		if code, _ := e.put(t, cv.UploadURL, cases[0].archive(t)); code != 422 {
			t.Fatalf("hostile re-upload answered %d", code)
		}
		waitStatus(t, e.client, cv.ID, tfe.ConfigurationUploaded)
		if got, err := e.client.ConfigurationVersions.Download(ctx, cv.ID); err != nil || !bytes.Equal(got, good) {
			t.Fatalf("download after hostile re-upload: %v", err)
		}
	})
}

func TestCapabilityURL(t *testing.T) {
	e := newEnv(t, "sqlite", Options{})
	ctx := context.Background()
	cv, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	archive := packDir(t, mainTF)
	u := cv.UploadURL
	i := strings.Index(u, "/_cap/") + len("/_cap/")
	exp, rest, _ := strings.Cut(u[i:], "/")
	sig, inner, _ := strings.Cut(rest, "/")
	flip := func(s string) string {
		if s[0] == 'a' {
			return "b" + s[1:]
		}
		return "a" + s[1:]
	}
	tampered := map[string]string{
		"signature":      u[:i] + exp + "/" + flip(sig) + "/" + inner,
		"expiry":         u[:i] + "9" + exp + "/" + sig + "/" + inner,
		"other version":  u[:i] + exp + "/" + sig + "/" + strings.Replace(inner, cv.ID, other.ID, 1),
		"go-tfe's test":  u[:len(u)-10] + "nonexisting",
		"no capability":  e.srv.URL + UploadPath(cv.ID),
		"api path":       e.srv.URL + "/api/v2" + UploadPath(cv.ID),
		"truncated":      u[:i] + exp,
		"signature only": u[:i] + exp + "/" + sig,
	}
	for name, url := range tampered {
		code, _ := e.put(t, url, archive)
		if code != http.StatusNotFound && !(name == "api path" && code == http.StatusUnauthorized) {
			t.Errorf("%s: PUT %s answered %d, want 404", name, url, code)
		}
	}
	// The right URL with the wrong method is refused too.
	resp, err := e.http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET on the upload URL answered %d", resp.StatusCode)
	}
	for _, id := range []string{cv.ID, other.ID} {
		if got := waitStatus(t, e.client, id, tfe.ConfigurationPending); got.Status != tfe.ConfigurationPending {
			t.Fatal("tampered upload changed a version")
		}
	}
	if code, body := e.put(t, u, archive); code != http.StatusOK {
		t.Fatalf("genuine URL answered %d %s", code, body)
	}
	waitStatus(t, e.client, cv.ID, tfe.ConfigurationUploaded)
}

func TestCrossOrganization(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		cv, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := e.put(t, cv.UploadURL, packDir(t, mainTF)); code != 200 {
			t.Fatal("upload failed")
		}
		if _, err := e.evil.ConfigurationVersions.Read(ctx, cv.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("read: %v", err)
		}
		if _, err := e.evil.ConfigurationVersions.Download(ctx, cv.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("download: %v", err)
		}
		if err := e.evil.ConfigurationVersions.Archive(ctx, cv.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("archive: %v", err)
		}
		if _, err := e.evil.ConfigurationVersions.List(ctx, e.ws.ID, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("list: %v", err)
		}
		if _, err := e.evil.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("create: %v", err)
		}
		// And the other way round.
		if _, err := e.client.ConfigurationVersions.Create(ctx, e.evilWS.ID, tfe.ConfigurationVersionCreateOptions{}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("create in another organization: %v", err)
		}
		for _, id := range []string{"ws-doesnotexist", "nonexisting", "cv-" + e.ws.ID[3:]} {
			if _, err := e.client.ConfigurationVersions.List(ctx, id, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
				t.Errorf("list of %s: %v", id, err)
			}
		}
		// The versions are untouched.
		if got := waitStatus(t, e.client, cv.ID, tfe.ConfigurationUploaded); got == nil {
			t.Fatal("lost")
		}
	})
}

func TestArchiveAction(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		upload := func(ws string) *tfe.ConfigurationVersion {
			cv, err := e.client.ConfigurationVersions.Create(ctx, ws, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.client.ConfigurationVersions.Upload(ctx, cv.UploadURL, filepath.Join("testdata", "config-version")); err != nil {
				t.Fatal(err)
			}
			return waitStatus(t, e.client, cv.ID, tfe.ConfigurationUploaded)
		}
		cv1 := upload(e.ws.ID)
		err := e.client.ConfigurationVersions.Archive(ctx, cv1.ID)
		if err == nil || !strings.Contains(err.Error(), "transition not allowed") || !strings.Contains(err.Error(), "configuration could not be archived because it is current") {
			t.Fatalf("archiving the current version: %v", err)
		}
		pending, err := e.client.ConfigurationVersions.Create(ctx, e.ws2.ID, tfe.ConfigurationVersionCreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.client.ConfigurationVersions.Archive(ctx, pending.ID); err == nil || !strings.Contains(err.Error(), "only uploaded") {
			t.Fatalf("archiving a pending version: %v", err)
		}
		cv2 := upload(e.ws.ID)

		// The injected check (active runs) is consulted.
		e.svc.SetArchiveCheck(func(ctx context.Context, cv *ConfigurationVersion) error {
			return core.Conflict("configuration version %s is used by an active run", cv.ID)
		})
		if err := e.client.ConfigurationVersions.Archive(ctx, cv1.ID); err == nil || !strings.Contains(err.Error(), "active run") {
			t.Fatalf("archive with a refusing check: %v", err)
		}
		e.svc.SetArchiveCheck(nil)

		before, err := Lookup(ctx, e.db, cv1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.client.ConfigurationVersions.Archive(ctx, cv1.ID); err != nil {
			t.Fatal(err)
		}
		got := waitStatus(t, e.client, cv1.ID, tfe.ConfigurationArchived)
		if got.StatusTimestamps.ArchivedAt.IsZero() {
			t.Error("no archived-at")
		}
		if ok, err := e.blobs.Exists(ctx, before.blobKey); err != nil || ok {
			t.Errorf("archive blob still exists: %v %v", ok, err)
		}
		if _, err := e.client.ConfigurationVersions.Download(ctx, cv1.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("download of archived version: %v", err)
		}
		// Archiving again is harmless; uploading to an archived version is not allowed.
		if err := e.client.ConfigurationVersions.Archive(ctx, cv1.ID); err != nil {
			t.Errorf("archiving twice: %v", err)
		}
		if _, err := e.svc.Upload(ctx, cv1.ID, bytes.NewReader(packDir(t, mainTF))); core.KindOf(err) != core.KindConflict {
			t.Errorf("upload to archived version: %v", err)
		}
		if id, err := CurrentID(ctx, e.db, e.ws.ID); err != nil || id != cv2.ID {
			t.Errorf("current is %q (%v), want %s", id, err, cv2.ID)
		}
		if err := e.client.ConfigurationVersions.Archive(ctx, "cv-nonexisting"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("archive of unknown: %v", err)
		}
	})
}

func TestReuploadAndHook(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		var mu sync.Mutex
		var hooked []string
		e.svc.SetUploadHook(func(ctx context.Context, cv *ConfigurationVersion) error {
			mu.Lock()
			defer mu.Unlock()
			if cv.Status != StatusUploaded || ctx.Err() != nil {
				t.Errorf("hook got status %s, ctx err %v", cv.Status, ctx.Err())
			}
			if cv.CreatedByToken == "" {
				t.Errorf("hook got no creator token: the queued run could not act as its creator")
			}
			hooked = append(hooked, cv.ID)
			return nil
		})
		auto, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !auto.AutoQueueRuns {
			t.Fatal("auto-queue-runs does not default to true")
		}
		manual, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		a1, a2 := packDir(t, mainTF), packDir(t, map[string]string{"main.tf": "# changed\n"})
		for _, cv := range []*tfe.ConfigurationVersion{auto, manual} {
			if code, body := e.put(t, cv.UploadURL, a1); code != 200 {
				t.Fatalf("upload: %d %s", code, body)
			}
		}
		// Identical content again: accepted, nothing changes.
		if code, _ := e.put(t, auto.UploadURL, a1); code != 200 {
			t.Fatalf("identical re-upload answered %d", code)
		}
		// Different content before any run used it: replaces the archive (go-tfe uploads twice).
		if code, _ := e.put(t, auto.UploadURL, a2); code != 200 {
			t.Fatalf("re-upload answered %d", code)
		}
		if got, err := e.client.ConfigurationVersions.Download(ctx, auto.ID); err != nil || !bytes.Equal(got, a2) {
			t.Fatalf("download after re-upload: %v", err)
		}
		// Once a run uses it, only identical content is accepted.
		e.svc.SetInUse(func(ctx context.Context, cv *ConfigurationVersion) (bool, error) { return true, nil })
		if code, body := e.put(t, auto.UploadURL, a1); code != http.StatusConflict {
			t.Fatalf("re-upload of a used version answered %d %s", code, body)
		}
		if code, _ := e.put(t, auto.UploadURL, a2); code != 200 {
			t.Fatalf("identical re-upload of a used version answered %d", code)
		}
		mu.Lock()
		if len(hooked) != 1 || hooked[0] != auto.ID {
			t.Errorf("hook called for %v, want once for %s", hooked, auto.ID)
		}
		mu.Unlock()
		// Exactly one blob per uploaded version remains.
		var n int
		if err := e.db.QueryRow(ctx, `SELECT COUNT(*) FROM configuration_version_garbage`).Scan(&n); err != nil || n != 0 {
			t.Errorf("garbage rows %d %v", n, err)
		}
	})
}

// TestQueueFailureRecorded: when the run an upload should queue is
// refused, the version stays uploaded and says why (error, error-message);
// an internal cause is not shown.
func TestQueueFailureRecorded(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		fail := core.Conflict(`workspace "ws" uses local execution`)
		e.svc.SetUploadHook(func(context.Context, *ConfigurationVersion) error { return fail })
		for _, c := range []struct {
			cause error
			want  string
		}{
			{core.Conflict(`workspace "ws" uses local execution`), `could not be queued: workspace "ws" uses local execution`},
			{errors.New("database on fire at 10.0.0.7"), "an internal error occurred"},
		} {
			fail = c.cause
			cv, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if code, body := e.put(t, cv.UploadURL, packDir(t, mainTF)); code != 200 {
				t.Fatalf("upload: %d %s", code, body)
			}
			got, err := e.client.ConfigurationVersions.Read(ctx, cv.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tfe.ConfigurationUploaded || got.Error != ErrorQueueFailed || !strings.Contains(got.ErrorMessage, c.want) {
				t.Errorf("after a refused queueing: status %s, error %q, message %q; want uploaded, %q, %q", got.Status, got.Error, got.ErrorMessage, ErrorQueueFailed, c.want)
			}
			if strings.Contains(got.ErrorMessage, "10.0.0.7") {
				t.Errorf("an internal cause reached the API: %q", got.ErrorMessage)
			}
		}
	})
}

func TestCreateFromArchive(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := acmeCtx()
		good := packDir(t, mainTF)
		cv, err := e.svc.CreateFromArchive(ctx, e.ws.ID, good, CreateOptions{AutoQueueRuns: new(bool), Source: "terraform"})
		if err != nil {
			t.Fatal(err)
		}
		if cv.Status != StatusUploaded || cv.Source != "terraform" || cv.Size != int64(len(good)) {
			t.Fatalf("got %+v", cv)
		}
		bad := rawTarGz(t, entry{name: "../x", typeflag: tar.TypeReg, body: []byte("x")})
		cv, err = e.svc.CreateFromArchive(ctx, e.ws.ID, bad, CreateOptions{})
		if core.KindOf(err) != core.KindInvalid || cv == nil || cv.Status != StatusErrored {
			t.Fatalf("hostile archive: %v, %+v", err, cv)
		}
		if _, err := e.svc.CreateFromArchive(ctx, e.evilWS.ID, good, CreateOptions{}); core.KindOf(err) != core.KindNotFound {
			t.Fatalf("other organization: %v", err)
		}
	})
}

func TestListCurrentAndDelete(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		var ids []string
		for i := 0; i < 3; i++ {
			cv, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, cv.ID)
			if i == 0 {
				if code, _ := e.put(t, cv.UploadURL, packDir(t, mainTF)); code != 200 {
					t.Fatal("upload failed")
				}
			}
		}
		l, err := e.client.ConfigurationVersions.List(ctx, e.ws.ID, &tfe.ConfigurationVersionListOptions{ListOptions: tfe.ListOptions{PageSize: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 2 || l.TotalCount != 3 || l.TotalPages != 2 || l.Items[0].ID != ids[2] {
			t.Fatalf("page 1: %d items, total %d, pages %d", len(l.Items), l.TotalCount, l.TotalPages)
		}
		l, err = e.client.ConfigurationVersions.List(ctx, e.ws.ID, &tfe.ConfigurationVersionListOptions{ListOptions: tfe.ListOptions{PageNumber: 999, PageSize: 100}})
		if err != nil || len(l.Items) != 0 || l.CurrentPage != 999 || l.TotalCount != 3 {
			t.Fatalf("page 999: %v %+v", err, l)
		}
		if _, err := e.client.ConfigurationVersions.ReadWithOptions(ctx, ids[0], &tfe.ConfigurationVersionReadOptions{Include: []tfe.ConfigVerIncludeOpt{tfe.ConfigVerIngressAttributes}}); err != nil {
			t.Fatalf("include ingress_attributes: %v", err)
		}

		// Current: the newest non-speculative, non-provisional version.
		if id, _ := CurrentID(ctx, e.db, e.ws.ID); id != ids[2] {
			t.Fatalf("current %s, want %s", id, ids[2])
		}
		prov, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{Provisional: tfe.Bool(true)})
		if err != nil || !prov.Provisional {
			t.Fatal(err)
		}
		spec, err := e.client.ConfigurationVersions.Create(ctx, e.ws.ID, tfe.ConfigurationVersionCreateOptions{Speculative: tfe.Bool(true)})
		if err != nil || !spec.Speculative {
			t.Fatal(err)
		}
		if id, _ := CurrentID(ctx, e.db, e.ws.ID); id != ids[2] {
			t.Fatalf("current %s after provisional/speculative, want %s", id, ids[2])
		}
		if err := Promote(ctx, e.db, prov.ID); err != nil {
			t.Fatal(err)
		}
		if id, _ := CurrentID(ctx, e.db, e.ws.ID); id != prov.ID {
			t.Fatalf("current %s after promotion, want %s", id, prov.ID)
		}

		// Workspace deletion removes the rows now and the blobs at the next sweep.
		first, _ := Lookup(ctx, e.db, ids[0])
		if err := DeleteWorkspaceConfigurationVersions(ctx, e.db, e.ws.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.ConfigurationVersions.Read(ctx, ids[0]); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("read after delete: %v", err)
		}
		if ok, _ := e.blobs.Exists(ctx, first.blobKey); !ok {
			t.Fatal("blob deleted before the sweep")
		}
		if n, err := e.svc.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep deleted %d: %v", n, err)
		}
		if ok, _ := e.blobs.Exists(ctx, first.blobKey); ok {
			t.Fatal("blob survived the sweep")
		}
	})
}

// A crash after the blob is written but before the row is updated leaves a
// pending version and a staged blob that a sweep removes once its grace
// period has passed.
func TestCrashBetweenBlobAndStatus(t *testing.T) {
	forEachStore(t, Options{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		cv, err := e.svc.Create(acmeCtx(), e.ws.ID, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		key := "configuration-versions/" + cv.ID + "/crashed.tar.gz"
		if err := addGarbage(ctx, e.db, key, core.Now().Add(stagingGrace)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.svc.stage(ctx, key, bytes.NewReader(packDir(t, mainTF))); err != nil {
			t.Fatal(err)
		}
		// ...crash. The version is still pending and shows no archive.
		got, err := e.svc.Get(acmeCtx(), cv.ID)
		if err != nil || got.Status != StatusPending {
			t.Fatalf("after crash: %v %+v", err, got)
		}
		if _, err := e.svc.Archive(acmeCtx(), cv.ID); core.KindOf(err) != core.KindNotFound {
			t.Fatalf("archive after crash: %v", err)
		}
		if n, _ := e.svc.Sweep(ctx); n != 0 {
			t.Fatal("sweep removed an upload still within its grace period")
		}
		if _, err := e.db.Exec(ctx, `UPDATE configuration_version_garbage SET not_before = 0`); err != nil {
			t.Fatal(err)
		}
		if n, _ := e.svc.Sweep(ctx); n != 1 {
			t.Fatal("sweep did not remove the abandoned upload")
		}
		if ok, _ := e.blobs.Exists(ctx, key); ok {
			t.Fatal("abandoned blob survived")
		}
	})
}

type brokenReader struct{ n int }

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.n > 0 {
		b.n--
		return copy(p, "\x1f\x8b"), nil
	}
	return 0, errors.New("connection reset by peer")
}

// A body that breaks off is the client's problem (400), not an errored version.
func TestBrokenUploadBody(t *testing.T) {
	e := newEnv(t, "sqlite", Options{})
	cv, err := e.svc.Create(acmeCtx(), e.ws.ID, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Upload(context.Background(), cv.ID, &brokenReader{n: 3}); core.KindOf(err) != core.KindBadRequest {
		t.Fatalf("broken body: %v", err)
	}
	got, err := e.svc.Get(acmeCtx(), cv.ID)
	if err != nil || got.Status != StatusPending {
		t.Fatalf("after a broken body: %v %+v", err, got)
	}
	var n int
	if err := e.db.QueryRow(context.Background(), `SELECT COUNT(*) FROM configuration_version_garbage`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("garbage rows %d %v", n, err)
	}
}

func TestQueueRunPermission(t *testing.T) {
	e := newEnv(t, "sqlite", Options{})
	ro := &Workspace{ID: core.NewID("ws"), Name: "readonly", Organization: "acme"}
	e.svc.ws.(fakeWorkspaces)[ro.ID] = ro
	reader := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, UserID: "user-r", Orgs: []string{"acme"}})
	if _, err := e.svc.Create(reader, ro.ID, CreateOptions{}); core.KindOf(err) != core.KindForbidden {
		t.Fatalf("create by a reader: %v", err)
	}
	cv, err := e.svc.Create(acmeCtx(), ro.ID, CreateOptions{})
	if err != nil {
		t.Fatalf("create by an owner: %v", err)
	}
	if _, err := e.svc.Get(reader, cv.ID); err != nil {
		t.Fatalf("read by a reader: %v", err)
	}
	if err := e.svc.MarkArchived(reader, cv.ID); core.KindOf(err) != core.KindForbidden {
		t.Fatalf("archive by a reader: %v", err)
	}
}

// TestCloneSharesNothing: what the request memo hands out (lookup) is a
// copy a caller may change without changing the memo's. Every pointer of
// the version is set here (by reflection over its status timestamps, so
// that a new one is covered).
func TestCloneSharesNothing(t *testing.T) {
	now := time.Now()
	cv := &ConfigurationVersion{ID: "cv-1", Ingress: &Ingress{Branch: "main", CommitSHA: "abc"}}
	ts := reflect.ValueOf(&cv.StatusTimestamps).Elem()
	for i := range ts.NumField() {
		v := now.Add(time.Duration(i) * time.Second)
		ts.Field(i).Set(reflect.ValueOf(&v))
	}
	copytest.SharesNothing(t, cv, cv.clone())
}
