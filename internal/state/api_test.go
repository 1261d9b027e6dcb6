package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestUploadReadDownloadOutputs(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "net")
		raw := testState{serial: 1, resources: 3}.bytes()
		jsonState := []byte(`{"format_version":"1.0","terraform_version":"1.9.5","values":{}}`)

		sv, err := e.Client.StateVersions.Upload(ctx, ws, tfe.StateVersionUploadOptions{
			StateVersionCreateOptions: tfe.StateVersionCreateOptions{
				Lineage: tfe.String(lineageA), MD5: tfe.String(md5hex(raw)), Serial: tfe.Int64(1),
				JSONStateOutputs: tfe.String(b64([]byte(`{"greeting":{"sensitive":false,"value":"hello","type":"string"}}`))),
			},
			RawState: raw, RawJSONState: jsonState,
		})
		if err != nil {
			t.Fatal(err)
		}
		if sv.Status != tfe.StateVersionFinalized || sv.DownloadURL == "" || sv.Serial != 1 || sv.Size != int64(len(raw)) {
			t.Fatalf("after upload: %+v", sv)
		}
		if !sv.ResourcesProcessed || sv.StateVersion != 4 || sv.TerraformVersion != "1.9.5" {
			t.Fatalf("summary attributes: %+v", sv)
		}
		if sv.BillableRUMCount == nil || *sv.BillableRUMCount != 3 {
			t.Fatalf("billable-rum-count = %v, want 3 (null_resource and data sources excluded)", sv.BillableRUMCount)
		}
		if len(sv.Resources) != 3 || len(sv.Outputs) != 5 {
			t.Fatalf("resources %d outputs %d", len(sv.Resources), len(sv.Outputs))
		}
		if sv.JSONDownloadURL == "" {
			t.Fatal("no hosted-json-state-download-url after a JSON state upload")
		}

		cur, err := e.Client.StateVersions.ReadCurrent(ctx, ws)
		if err != nil || cur.ID != sv.ID {
			t.Fatalf("current: %v %v", cur, err)
		}
		got, err := e.Client.StateVersions.Download(ctx, cur.DownloadURL)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("download: %v (equal=%v)", err, bytes.Equal(got, raw))
		}
		status, body, _ := e.do(t, "GET", cur.JSONDownloadURL, "", nil)
		if status != 200 || !bytes.Equal(body, jsonState) {
			t.Fatalf("JSON state download: %d %s", status, body)
		}
		status, body, _ = e.do(t, "GET", "/api/v2/state-versions/"+sv.ID+"/download", e.Token, nil)
		if status != 200 || !bytes.Equal(body, raw) {
			t.Fatalf("authenticated download: %d", status)
		}
		status, _, _ = e.do(t, "GET", "/api/v2/state-versions/"+sv.ID+"/download", "", nil)
		if status != 401 {
			t.Fatalf("download without a token: %d, want 401", status)
		}

		// Snapshot interval header on reads.
		for _, p := range []string{"/api/v2/state-versions/" + sv.ID, "/api/v2/workspaces/" + ws + "/current-state-version"} {
			_, _, h := e.do(t, "GET", p, e.Token, nil)
			if h.Get("X-Terraform-Snapshot-Interval") != "300" {
				t.Errorf("GET %s: x-terraform-snapshot-interval = %q", p, h.Get("X-Terraform-Snapshot-Interval"))
			}
		}

		outs, err := e.Client.StateVersions.ListOutputs(ctx, sv.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*tfe.StateVersionOutput{}
		for _, o := range outs.Items {
			byName[o.Name] = o
		}
		if len(byName) != 5 || outs.TotalCount != 5 {
			t.Fatalf("outputs: %d total %d", len(byName), outs.TotalCount)
		}
		if o := byName["ports"]; o.Type != "array" || !jsonEq(o.DetailedType, `["list","number"]`) || !jsonEq(o.Value, `[80,443]`) {
			t.Fatalf("ports: %+v", o)
		}
		if o := byName["tags"]; o.Type != "hash" || !jsonEq(o.DetailedType, `["object",{"env":"string"}]`) {
			t.Fatalf("tags: %+v", o)
		}
		if o := byName["enabled"]; o.Type != "boolean" || o.Value != true {
			t.Fatalf("enabled: %+v", o)
		}
		if o := byName["password"]; !o.Sensitive || o.Value != "s3cr3t" {
			t.Fatalf("password in the version's outputs: %+v", o)
		}

		// Current outputs hide sensitive values; reading the output by ID
		// shows it (terraform reads sensitive outputs that way).
		curOuts, err := e.Client.StateVersionOutputs.ReadCurrent(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		var pw *tfe.StateVersionOutput
		for _, o := range curOuts.Items {
			if o.Name == "password" {
				pw = o
			}
			if o.Name == "greeting" && o.Value != "hello" {
				t.Fatalf("greeting: %+v", o)
			}
		}
		if pw == nil || !pw.Sensitive || pw.Value != nil {
			t.Fatalf("sensitive output in current outputs: %+v", pw)
		}
		_, raw2, _ := e.do(t, "GET", "/api/v2/workspaces/"+ws+"/current-state-version-outputs", e.Token, nil)
		if bytes.Contains(raw2, []byte("s3cr3t")) {
			t.Fatal("current-state-version-outputs leaks a sensitive value")
		}
		one, err := e.Client.StateVersionOutputs.Read(ctx, pw.ID)
		if err != nil || one.Value != "s3cr3t" {
			t.Fatalf("read sensitive output: %+v %v", one, err)
		}

		withOuts, err := e.Client.StateVersions.ReadCurrentWithOptions(ctx, ws, &tfe.StateVersionCurrentOptions{Include: []tfe.StateVersionIncludeOpt{tfe.SVoutputs}})
		if err != nil || len(withOuts.Outputs) != 5 || withOuts.Outputs[0].Name == "" {
			t.Fatalf("include=outputs: %v %+v", err, withOuts)
		}
		if _, err := e.Client.StateVersions.ReadWithOptions(ctx, sv.ID, &tfe.StateVersionReadOptions{Include: []tfe.StateVersionIncludeOpt{"bogus"}}); !errors.Is(err, tfe.ErrInvalidIncludeValue) {
			t.Fatalf("bad include: %v", err)
		}

		list, err := e.Client.StateVersions.List(ctx, &tfe.StateVersionListOptions{Organization: "acme", Workspace: "net"})
		if err != nil || list.TotalCount != 1 || list.Items[0].ID != sv.ID {
			t.Fatalf("list: %v %+v", err, list)
		}
		status, _, _ = e.do(t, "GET", "/api/v2/state-versions?filter[workspace][name]=net", e.Token, nil)
		if status != 400 {
			t.Fatalf("list without an organization filter: %d, want 400", status)
		}

		rs, err := e.Client.WorkspaceResources.List(ctx, ws, nil)
		if err != nil || rs.TotalCount != 4 {
			t.Fatalf("workspace resources: %v %+v", err, rs)
		}
		if r := rs.Items[0]; r.Address != "aws_instance.web[0]" || r.Module != "root" || r.Provider != "hashicorp/aws" || r.NameIndex == nil || *r.NameIndex != "0" || r.ModifiedByStateVersionID != sv.ID {
			t.Fatalf("first resource: %+v", r)
		}

		// Exports for other domains.
		if n, err := e.Server.States.ResourceCount(ctx, ws); err != nil || n != 4 {
			t.Fatalf("ResourceCount = %d, %v; want 4 managed instances", n, err)
		}
		v, b, err := e.Server.States.CurrentState(ctx, ws)
		if err != nil || v.ID != sv.ID || !bytes.Equal(b, raw) {
			t.Fatalf("CurrentState: %v", err)
		}
	})
}

func jsonEq(v any, want string) bool {
	a, _ := json.Marshal(v)
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal([]byte(want), &y)
	ax, _ := json.Marshal(x)
	ay, _ := json.Marshal(y)
	return string(ax) == string(ay)
}

func TestRefusals(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "app")
		s5 := testState{serial: 5}.bytes()
		first, err := e.inline(t, e.Client, ws, 5, s5)
		if err != nil {
			t.Fatal(err)
		}
		n := e.versionCount(t, ws)

		// Stale serial.
		s4 := testState{serial: 4}.bytes()
		_, err = e.inline(t, e.Client, ws, 4, s4)
		wantErr(t, err, "lower than the current state's serial 5")
		// Same serial, other content.
		s5b := testState{serial: 5, outputs: map[string]any{"x": map[string]any{"value": "y", "type": "string"}}}.bytes()
		_, err = e.inline(t, e.Client, ws, 5, s5b)
		wantErr(t, err, "content differs")
		// Same serial, same content: idempotent.
		if _, err := e.inline(t, e.Client, ws, 5, s5); err != nil {
			t.Fatalf("re-sending the current state: %v", err)
		}
		n++
		// Foreign lineage, by attribute and by content.
		s6b := testState{serial: 6, lineage: lineageB}.bytes()
		_, err = e.inline(t, e.Client, ws, 6, s6b, func(o *tfe.StateVersionCreateOptions) { o.Lineage = tfe.String(lineageB) })
		wantErr(t, err, "differs from the current state's lineage")
		_, err = e.inline(t, e.Client, ws, 6, s6b)
		wantErr(t, err, "lineage")
		// MD5 mismatch.
		s6 := testState{serial: 6}.bytes()
		_, err = e.inline(t, e.Client, ws, 6, s6, func(o *tfe.StateVersionCreateOptions) { o.MD5 = tfe.String(md5hex([]byte("other"))) })
		wantErr(t, err, "does not match the state's MD5")
		// Not JSON, not a state.
		for _, bad := range []string{`{"version":4,`, `[1,2]`, `{"serial":6}`, `{"version":4,"serial":6} trailing`} {
			_, err = e.inline(t, e.Client, ws, 6, []byte(bad))
			wantErr(t, err, "not a valid Terraform state file")
		}
		_, err = e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(6), MD5: tfe.String(md5hex(s6)), State: tfe.String("!!not base64")})
		wantErr(t, err, "base64")
		// Too large.
		e.Server.States.SetMaxSize(512)
		_, err = e.inline(t, e.Client, ws, 6, s6)
		wantErr(t, err, "larger than the limit")
		e.Server.States.SetMaxSize(100 << 20)

		if got := e.versionCount(t, ws); got != n {
			t.Fatalf("refused creates stored versions: %d, want %d", got, n)
		}
		if cur := e.currentID(t, ws); cur == first.ID || cur == "" {
			t.Fatalf("current is %q; want the re-sent copy of %s", cur, first.ID)
		}

		// Force replaces a foreign lineage and a lower serial.
		forced, err := e.inline(t, e.Client, ws, 1, testState{serial: 1, lineage: lineageB}.bytes(), func(o *tfe.StateVersionCreateOptions) {
			o.Force = tfe.Bool(true)
			o.Lineage = tfe.String(lineageB)
		})
		if err != nil {
			t.Fatalf("force: %v", err)
		}
		if e.currentID(t, ws) != forced.ID {
			t.Fatal("a forced version did not become current")
		}

		// Strict mode: content must agree with the attributes.
		e.Server.States.SetStrictContent(true)
		_, err = e.inline(t, e.Client, ws, 2, testState{serial: 3, lineage: lineageB}.bytes())
		wantErr(t, err, "does not match the serial 2 given")
		e.Server.States.SetStrictContent(false)
		if _, err := e.inline(t, e.Client, ws, 2, testState{serial: 3, lineage: lineageB}.bytes()); err != nil {
			t.Fatalf("lenient mode refused a content/attribute serial mismatch: %v", err)
		}
		// Content checks still apply in lenient mode: a high attribute serial
		// cannot smuggle in content older than the current content.
		_, err = e.inline(t, e.Client, ws, 99, testState{serial: 2, lineage: lineageB}.bytes())
		wantErr(t, err, "the state's serial 2 is lower")
	})
}

func TestLockRequired(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "app")
		raw := testState{serial: 1}.bytes()
		e.lock(t, ws, "")
		_, err := e.inline(t, e.Client, ws, 1, raw)
		wantErr(t, err, "must be locked")
		e.lock(t, ws, "user-someoneElse12345")
		_, err = e.inline(t, e.Client, ws, 1, raw)
		wantErr(t, err, "is locked by user-someoneElse12345")
		status, _, _ := e.do(t, "POST", "/api/v2/workspaces/"+ws+"/state-versions", e.Token,
			[]byte(`{"data":{"type":"state-versions","attributes":{"serial":1,"md5":"`+md5hex(raw)+`","state":"`+b64(raw)+`"}}}`))
		if status != http.StatusConflict {
			t.Fatalf("create under another's lock: %d, want 409", status)
		}
		if e.versionCount(t, ws) != 0 {
			t.Fatal("a refused create stored a version")
		}
		e.lock(t, ws, e.adminID)
		if _, err := e.inline(t, e.Client, ws, 1, raw); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPendingIsNeverCurrent(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "app")
		raw1 := testState{serial: 1}.bytes()

		// A created-but-never-uploaded version is not current.
		pending, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), MD5: tfe.String(md5hex(raw1)), Lineage: tfe.String(lineageA)})
		if err != nil {
			t.Fatal(err)
		}
		if pending.Status != tfe.StateVersionPending || pending.UploadURL == "" || pending.JSONUploadURL == "" || pending.DownloadURL != "" {
			t.Fatalf("pending version: %+v", pending)
		}
		if _, err := e.Client.StateVersions.ReadCurrent(ctx, ws); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("current with only a pending version: %v", err)
		}
		if outs, err := e.Client.StateVersionOutputs.ReadCurrent(ctx, ws); err != nil || len(outs.Items) != 0 {
			t.Fatalf("current outputs with only a pending version: %v %v", outs, err)
		}
		status, _, _ := e.do(t, "GET", pending.UploadURL, "", nil)
		if status != 404 {
			t.Fatalf("GET on an upload URL: %d", status)
		}
		// Upload URLs are write capabilities: the lock holder sees them on
		// reads, others do not.
		if sv, err := e.Client.StateVersions.Read(ctx, pending.ID); err != nil || sv.UploadURL == "" {
			t.Fatalf("lock holder's read of a pending version: %v %+v", err, sv)
		}
		e.lock(t, ws, "user-someoneElse12345")
		if sv, err := e.Client.StateVersions.Read(ctx, pending.ID); err != nil || sv.UploadURL != "" || sv.JSONUploadURL != "" {
			t.Fatalf("a read by someone not holding the lock shows upload URLs: %v %+v", err, sv)
		}
		e.lock(t, ws, e.adminID)

		// Content is validated again at upload time: wrong MD5, bad JSON.
		raw1b := testState{serial: 1, outputs: map[string]any{"z": map[string]any{"value": 1, "type": "number"}}}.bytes()
		status, body, _ := e.do(t, "PUT", pending.UploadURL, "", raw1b)
		if status != 422 || !strings.Contains(string(body), "MD5") {
			t.Fatalf("PUT with the wrong MD5: %d %s", status, body)
		}
		status, _, _ = e.do(t, "PUT", pending.UploadURL, "", []byte("not json"))
		if status != 422 {
			t.Fatalf("PUT of non-JSON: %d", status)
		}
		e.Server.States.SetMaxSize(100)
		status, _, _ = e.do(t, "PUT", pending.UploadURL, "", raw1)
		e.Server.States.SetMaxSize(100 << 20)
		if status != 413 {
			t.Fatalf("PUT over the limit: %d, want 413", status)
		}
		if e.currentID(t, ws) != "" {
			t.Fatal("a refused upload made a version current")
		}
		sv, _ := e.Client.StateVersions.Read(ctx, pending.ID)
		if sv.Status != tfe.StateVersionPending {
			t.Fatalf("after refused uploads: %s", sv.Status)
		}

		// The real upload finalizes it; again is a no-op; other content is refused.
		status, _, _ = e.do(t, "PUT", pending.UploadURL, "", raw1)
		if status != 200 {
			t.Fatalf("PUT: %d", status)
		}
		if e.currentID(t, ws) != pending.ID {
			t.Fatal("the uploaded version is not current")
		}
		if status, _, _ = e.do(t, "PUT", pending.UploadURL, "", raw1); status != 200 {
			t.Fatalf("re-PUT of the same content: %d", status)
		}
		if status, _, _ = e.do(t, "PUT", pending.UploadURL, "", raw1b); status != 409 {
			t.Fatalf("re-PUT of other content: %d", status)
		}
		// The JSON state may arrive after the raw state.
		if status, _, _ = e.do(t, "PUT", pending.JSONUploadURL, "", []byte(`{"format_version":"1.0"}`)); status != 200 {
			t.Fatalf("late JSON state PUT: %d", status)
		}
		sv, _ = e.Client.StateVersions.Read(ctx, pending.ID)
		if sv.Status != tfe.StateVersionFinalized || sv.JSONDownloadURL == "" {
			t.Fatalf("after upload: %+v", sv)
		}

		// A pending version whose serial fell behind is refused at upload
		// time, and a newer finalized version discards older pending ones.
		raw2 := testState{serial: 2}.bytes()
		p2, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(2), MD5: tfe.String(md5hex(raw2))})
		if err != nil {
			t.Fatal(err)
		}
		raw3 := testState{serial: 3}.bytes()
		if _, err := e.inline(t, e.Client, ws, 3, raw3); err != nil {
			t.Fatal(err)
		}
		if status, _, _ = e.do(t, "PUT", p2.UploadURL, "", raw2); status != 409 {
			t.Fatalf("upload of an overtaken version: %d, want 409", status)
		}
		if sv, _ = e.Client.StateVersions.Read(ctx, p2.ID); sv.Status != tfe.StateVersionDiscarded {
			t.Fatalf("overtaken pending version is %s", sv.Status)
		}
		// Pending created with a stale serial is refused at once.
		_, err = e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(2), MD5: tfe.String(md5hex(raw2))})
		wantErr(t, err, "lower than the current state's serial 3")
		// A pending version created before a race is checked again when its
		// content arrives.
		raw5 := testState{serial: 5}.bytes()
		p5, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(5), MD5: tfe.String(md5hex(raw5))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(7), MD5: tfe.String(md5hex(raw5))}); err != nil {
			t.Fatal(err)
		}
		if status, _, _ = e.do(t, "PUT", p5.UploadURL, "", raw5); status != 200 {
			t.Fatalf("upload: %d", status)
		}
		if e.currentID(t, ws) != p5.ID {
			t.Fatal("p5 is not current")
		}
	})
}

func TestRestartKeepsVersions(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "app")
		raw := testState{serial: 1}.bytes()
		sv, err := e.inline(t, e.Client, ws, 1, raw)
		if err != nil {
			t.Fatal(err)
		}
		raw2 := testState{serial: 2}.bytes()
		pending, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(2), MD5: tfe.String(md5hex(raw2))})
		if err != nil {
			t.Fatal(err)
		}
		e = e.restart(t)
		cur, err := e.Client.StateVersions.ReadCurrent(ctx, ws)
		if err != nil || cur.ID != sv.ID {
			t.Fatalf("after restart: %v %v", cur, err)
		}
		got, err := e.Client.StateVersions.Download(ctx, cur.DownloadURL)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("download after restart: %v", err)
		}
		// An upload URL issued before the restart still works.
		if status, _, _ := e.do(t, "PUT", pending.UploadURL, "", raw2); status != 200 {
			t.Fatalf("upload after restart: %d", status)
		}
		if e.currentID(t, ws) != pending.ID {
			t.Fatal("upload after restart did not become current")
		}
	})
}

func TestCapabilityURLTampering(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "app")
		raw1 := testState{serial: 1}.bytes()
		done, err := e.inline(t, e.Client, ws, 1, raw1)
		if err != nil {
			t.Fatal(err)
		}
		raw2 := testState{serial: 2}.bytes()
		p, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(2), MD5: tfe.String(md5hex(raw2))})
		if err != nil {
			t.Fatal(err)
		}
		flip := func(u string, i int) string {
			b := []byte(u)
			if b[i] == 'a' {
				b[i] = 'b'
			} else {
				b[i] = 'a'
			}
			return string(b)
		}
		sigAt := strings.Index(p.UploadURL, "/_cap/") + len("/_cap/") + 12
		for name, u := range map[string]string{
			"signature changed":      flip(p.UploadURL, sigAt),
			"other version":          strings.Replace(p.UploadURL, p.ID, done.ID, 1),
			"JSON URL for raw state": strings.Replace(p.JSONUploadURL, "/json-content", "/content", 1),
			"expiry changed":         strings.Replace(p.UploadURL, "/_cap/1", "/_cap/2", 1),
			"download URL for PUT":   done.DownloadURL,
		} {
			if status, _, _ := e.do(t, "PUT", u, "", raw2); status != 404 {
				t.Errorf("%s: PUT %d, want 404", name, status)
			}
		}
		if status, _, _ := e.do(t, "GET", flip(done.DownloadURL, sigAt), "", nil); status != 404 {
			t.Errorf("download with a changed signature: %d", status)
		}
		if status, _, _ := e.do(t, "GET", strings.Replace(done.DownloadURL, done.ID, p.ID, 1), "", nil); status != 404 {
			t.Errorf("download URL moved to another version: %d", status)
		}
		if e.currentID(t, ws) != done.ID {
			t.Fatal("tampered uploads changed the current version")
		}
		// go-tfe sends its bearer token to download URLs: fine.
		if _, err := e.Client.StateVersions.Download(ctx, done.DownloadURL); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOtherOrganizationsSeeNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		e.org(t, "evil")
		ws := e.workspace(t, "acme", "app")
		sv, err := e.inline(t, e.Client, ws, 1, testState{serial: 1}.bytes())
		if err != nil {
			t.Fatal(err)
		}
		outs, err := e.Client.StateVersions.ListOutputs(ctx, sv.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		var orgID string
		if err := e.Server.DB.QueryRow(ctx, `SELECT id FROM organizations WHERE name = 'evil'`).Scan(&orgID); err != nil {
			t.Fatal(err)
		}
		_, orgSecret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindOrganization, Subject: orgID})
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]*tfe.Client{"outsider user": e.userClient(t, "mallory"), "other org's token": e.NewClient(t, orgSecret)} {
			t.Run(name, func(t *testing.T) {
				checks := map[string]error{}
				_, checks["read"] = c.StateVersions.Read(ctx, sv.ID)
				_, checks["current"] = c.StateVersions.ReadCurrent(ctx, ws)
				_, checks["outputs"] = c.StateVersions.ListOutputs(ctx, sv.ID, nil)
				_, checks["output"] = c.StateVersionOutputs.Read(ctx, outs.Items[0].ID)
				_, checks["current outputs"] = c.StateVersionOutputs.ReadCurrent(ctx, ws)
				_, checks["list"] = c.StateVersions.List(ctx, &tfe.StateVersionListOptions{Organization: "acme", Workspace: "app"})
				_, checks["create"] = c.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(9), MD5: tfe.String(md5hex([]byte("x")))})
				for what, err := range checks {
					if !errors.Is(err, tfe.ErrResourceNotFound) {
						t.Errorf("%s: %v, want not found", what, err)
					}
				}
			})
		}
		// Malformed IDs are 404s, never 5xx.
		for _, p := range []string{"/api/v2/state-versions/nonexisting", "/api/v2/state-versions/sv-", "/api/v2/state-version-outputs/x",
			"/api/v2/workspaces/nope/current-state-version", "/api/v2/state-versions/sv-missing1234567/outputs"} {
			if status, _, _ := e.do(t, "GET", p, e.Token, nil); status != 404 {
				t.Errorf("GET %s: %d", p, status)
			}
		}
	})
}

func TestDeleteWorkspaceStates(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "app")
		other := e.workspace(t, "acme", "keep")
		sv, err := e.inline(t, e.Client, ws, 1, testState{serial: 1}.bytes())
		if err != nil {
			t.Fatal(err)
		}
		kept, err := e.inline(t, e.Client, other, 1, testState{serial: 1}.bytes())
		if err != nil {
			t.Fatal(err)
		}
		var key string
		if err := e.Server.DB.QueryRow(ctx, `SELECT state_key FROM state_versions WHERE id = ?`, sv.ID).Scan(&key); err != nil {
			t.Fatal(err)
		}
		// A rolled-back deletion keeps everything.
		boom := errors.New("boom")
		err = e.Server.DB.Tx(ctx, func(tx *storeTx) error {
			if err := e.Server.States.DeleteWorkspaceStates(ctx, tx, ws); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if _, err := e.Server.States.CollectGarbage(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.StateVersions.Download(ctx, sv.DownloadURL); err != nil {
			t.Fatalf("rolled-back deletion lost the state: %v", err)
		}
		if err := e.Server.DB.Tx(ctx, func(tx *storeTx) error { return e.Server.States.DeleteWorkspaceStates(ctx, tx, ws) }); err != nil {
			t.Fatal(err)
		}
		if e.currentID(t, ws) != "" || e.versionCount(t, ws) != 0 {
			t.Fatal("states survived deletion")
		}
		if _, err := e.Server.States.CollectGarbage(ctx, 0); err != nil {
			t.Fatalf("garbage collection: %v", err)
		}
		if ok, _ := e.Server.Blobs.Exists(ctx, key); ok {
			t.Fatal("the deleted workspace's state blob is still stored")
		}
		if _, err := e.Client.StateVersions.Download(ctx, kept.DownloadURL); err != nil {
			t.Fatalf("another workspace's state was collected: %v", err)
		}
		// Orphan records younger than the cut-off are left alone.
		if _, err := e.Server.DB.Exec(ctx, `INSERT INTO state_blob_orphans (blob_key, created_at) VALUES ('young', ?)`, core.Micros(time.Now())); err != nil {
			t.Fatal(err)
		}
		if n, _ := e.Server.States.CollectGarbage(ctx, time.Hour); n != 0 {
			t.Fatalf("collected %d young orphans", n)
		}
	})
}

func TestConcurrentUploadsOfOneVersion(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "app")
		raw := testState{serial: 1}.bytes()
		p, err := e.Client.StateVersions.Create(ctx, ws, tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), MD5: tfe.String(md5hex(raw))})
		if err != nil {
			t.Fatal(err)
		}
		const n = 6
		statuses := make(chan int, n)
		for i := 0; i < n; i++ {
			go func() {
				req, _ := http.NewRequest(http.MethodPut, p.UploadURL, bytes.NewReader(raw))
				resp, err := e.HTTP.Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				resp.Body.Close()
				statuses <- resp.StatusCode
			}()
		}
		for i := 0; i < n; i++ {
			if s := <-statuses; s != 200 {
				t.Errorf("concurrent identical upload: %d", s)
			}
		}
		if e.currentID(t, ws) != p.ID {
			t.Fatal("not current after concurrent uploads")
		}
		var orphans int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM state_blob_orphans`).Scan(&orphans); err != nil {
			t.Fatal(err)
		}
		if orphans != 0 {
			t.Fatalf("%d orphan blob records left after concurrent uploads", orphans)
		}
		sv, err := e.Client.StateVersions.Read(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Client.StateVersions.Download(ctx, sv.DownloadURL)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("download: %v", err)
		}
	})
}

// TestWithRealWorkspaces runs the terraform flow against the workspace
// domain as the server wires it: lock, upload, unlock, read back through
// the workspace, then delete the workspace and its states with it.
func TestWithRealWorkspaces(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
			t.Fatal(err)
		}
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("net")})
		if err != nil {
			t.Fatal(err)
		}
		raw := testState{serial: 1, resources: 2}.bytes()
		opts := tfe.StateVersionUploadOptions{StateVersionCreateOptions: tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), MD5: tfe.String(md5hex(raw)), Lineage: tfe.String(lineageA)}, RawState: raw}
		if _, err := c.StateVersions.Upload(ctx, w.ID, opts); err == nil || !strings.Contains(err.Error(), "must be locked") {
			t.Fatalf("upload without the lock: %v", err)
		}
		if _, err := c.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{Reason: tfe.String("terraform")}); err != nil {
			t.Fatal(err)
		}
		sv, err := c.StateVersions.Upload(ctx, w.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.Unlock(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		got, err := c.Workspaces.ReadWithOptions(ctx, "acme", "net", &tfe.WorkspaceReadOptions{Include: []tfe.WSIncludeOpt{tfe.WSOutputs}})
		if err != nil {
			t.Fatal(err)
		}
		if got.CurrentStateVersion == nil || got.CurrentStateVersion.ID != sv.ID || got.ResourceCount != 3 {
			t.Fatalf("workspace after upload: current %+v, resource-count %d", got.CurrentStateVersion, got.ResourceCount)
		}
		var pw *tfe.WorkspaceOutputs
		for _, o := range got.Outputs {
			if o.Name == "password" {
				pw = o
			}
		}
		if len(got.Outputs) != 5 || pw == nil || !pw.Sensitive || pw.Value != nil {
			t.Fatalf("workspace outputs: %d, password %+v", len(got.Outputs), pw)
		}
		if err := c.Workspaces.DeleteByID(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		if id, _ := e.Server.States.CurrentStateVersionID(ctx, w.ID); id != "" {
			t.Fatal("deleting the workspace kept its current state version")
		}
		if _, err := c.StateVersions.Read(ctx, sv.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("state version after workspace deletion: %v", err)
		}
	})
}
