package providerregistry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/providerregistry/release"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestPlatformDuringShasumsUpload: a platform created while SHA256SUMS is
// uploaded to its version, which the file does not list, is refused, or
// the upload is: never both accepted, so that every platform of a version
// with SHA256SUMS is listed in it with its shasum. Each check reads what
// the other writes; they are run together many times.
func TestPlatformDuringShasumsUpload(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		f := newFixture(t, e)
		darwinZip := "terraform-provider-toolbox_1.0.0_darwin_arm64.zip"
		// SHA256SUMS listing the linux zip only.
		linuxOnly := release.Shasums(map[string][]byte{f.linuxZip: f.zips[f.linuxZip]})
		for i := range 40 {
			version := fmt.Sprintf("2.0.%d", i)
			v := f.version(t, version, f.key.KeyID())
			f.platform(t, version, "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
			var wg sync.WaitGroup
			start := make(chan struct{})
			var createErr error
			var code int
			var body string
			var putErr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				_, createErr = e.Client.RegistryProviderPlatforms.Create(ctx, f.vid(version), tfe.RegistryProviderPlatformCreateOptions{
					OS: "darwin", Arch: "arm64", Shasum: release.SHA256(f.zips[darwinZip]), Filename: darwinZip})
			}()
			go func() {
				defer wg.Done()
				<-start
				code, body, putErr = putAsync(e, v.Links["shasums-upload"].(string), linuxOnly)
			}()
			close(start)
			wg.Wait()
			if putErr != nil {
				t.Fatal(putErr)
			}
			uploaded := code == http.StatusOK
			switch {
			case uploaded && createErr == nil:
				t.Errorf("%s: both the darwin platform and a SHA256SUMS without it were accepted", version)
			case !uploaded && createErr != nil:
				t.Errorf("%s: both were refused: upload %d %s; platform %v", version, code, body, createErr)
			case !uploaded && (code != http.StatusUnprocessableEntity || !strings.Contains(body, "does not list")):
				t.Errorf("%s: upload refused with %d %s, want 422 naming the unlisted file", version, code, body)
			case createErr != nil && !strings.Contains(createErr.Error(), "SHA256SUMS does not list"):
				t.Errorf("%s: platform refused with %v, want the unlisted file named", version, createErr)
			}
			// The invariant, as stored.
			rv, err := e.Client.RegistryProviderVersions.Read(ctx, f.vid(version))
			if err != nil {
				t.Fatal(err)
			}
			pls, err := e.Client.RegistryProviderPlatforms.List(ctx, f.vid(version), nil)
			if err != nil {
				t.Fatal(err)
			}
			if rv.ShasumsUploaded {
				for _, pl := range pls.Items {
					if pl.Filename != f.linuxZip {
						t.Errorf("%s: SHA256SUMS is uploaded but does not list platform %s_%s (%s)", version, pl.OS, pl.Arch, pl.Filename)
					}
				}
			}
			if t.Failed() {
				return
			}
		}
	})
}

// putAsync is put for a goroutine other than the test's.
func putAsync(e *testenv.Env, url string, body []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
