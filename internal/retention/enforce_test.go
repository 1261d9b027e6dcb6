package retention_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestPoliciesDeleteOldBackingData: one pass of the enforcer, at a time
// 40 days after three state versions and three configuration versions of
// each workspace were made, under an organization's 30-day policy:
//   - a workspace under it loses the content of its two older state
//     versions (status backing_data_permanently_deleted, downloads a 404
//     saying why, outputs kept) and keeps the current one whole; its two
//     older uploaded configuration versions are archived, the current one
//     stays;
//   - a workspace with its own dont-delete policy, and one whose own
//     policy says 60 days, lose nothing;
//   - the deleted contents' blobs are gone once the garbage collector ran.
//
// Both stores, go-tfe for everything a client sees.
func TestPoliciesDeleteOldBackingData(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		if _, err := c.Organizations.SetDataRetentionPolicyDeleteOlder(ctx, "acme", tfe.DataRetentionPolicyDeleteOlderSetOptions{DeleteOlderThanNDays: 30}); err != nil {
			t.Fatal(err)
		}
		old, keep, long := makeVersions(ctx, t, c, "old"), makeVersions(ctx, t, c, "keep"), makeVersions(ctx, t, c, "long")
		if _, err := c.Workspaces.SetDataRetentionPolicyDontDelete(ctx, keep.ws.ID, tfe.DataRetentionPolicyDontDeleteSetOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.SetDataRetentionPolicyDeleteOlder(ctx, long.ws.ID, tfe.DataRetentionPolicyDeleteOlderSetOptions{DeleteOlderThanNDays: 60}); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, q := range []string{`SELECT state_key FROM state_versions WHERE workspace_id = ? AND serial < 3`, `SELECT json_state_key FROM state_versions WHERE workspace_id = ? AND serial < 3 AND json_state_key <> ''`} {
			rows, err := e.Server.DB.Query(ctx, q, old.ws.ID)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k string
				if err := rows.Scan(&k); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k)
			}
			rows.Close()
		}
		if len(keys) < 2 {
			t.Fatalf("the two older state versions have %d blobs", len(keys))
		}

		res, err := e.Server.Retention.Enforce(ctx, core.Now().Add(40*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if res.Workspaces != 2 || res.StateVersions != 2 || res.ConfigurationVersions != 2 {
			t.Fatalf("the pass: %+v, want 2 workspaces under a policy that deletes, 2 state and 2 configuration versions", res)
		}

		for i, sv := range old.states {
			got, err := c.StateVersions.Read(ctx, sv.ID)
			if err != nil {
				t.Fatal(err)
			}
			_, derr := c.StateVersions.Download(ctx, got.DownloadURL)
			if i == 2 {
				if got.Status != tfe.StateVersionFinalized || derr != nil {
					t.Errorf("the current state version: %s, download %v", got.Status, derr)
				}
				continue
			}
			if string(got.Status) != "backing_data_permanently_deleted" {
				t.Errorf("state version %d of old: %s", i+1, got.Status)
			}
			status, body := e.API(t, "", "GET", "/api/v2/state-versions/"+sv.ID+"/download", nil)
			if status != 404 || !strings.Contains(string(body), "deleted (by its workspace's data retention policy") {
				t.Errorf("downloading the emptied state version %d: %d %s", i+1, status, body)
			}
			if outs, err := c.StateVersions.ListOutputs(ctx, sv.ID, nil); err != nil || len(outs.Items) != 1 {
				t.Errorf("the emptied state version %d's outputs: %+v %v", i+1, outs, err)
			}
		}
		for i, cv := range old.cvs {
			got, err := c.ConfigurationVersions.Read(ctx, cv.ID)
			want := tfe.ConfigurationArchived
			if i == 2 {
				want = tfe.ConfigurationUploaded
			}
			if err != nil || got.Status != want {
				t.Errorf("configuration version %d of old: %+v %v, want %s", i+1, got, err, want)
			}
		}
		for _, m := range []versions{keep, long} {
			for i := range 3 {
				sv, err := c.StateVersions.Read(ctx, m.states[i].ID)
				if err != nil || sv.Status != tfe.StateVersionFinalized {
					t.Errorf("state version %d of %s: %+v %v", i+1, m.ws.Name, sv, err)
				}
				cv, err := c.ConfigurationVersions.Read(ctx, m.cvs[i].ID)
				if err != nil || cv.Status != tfe.ConfigurationUploaded {
					t.Errorf("configuration version %d of %s: %+v %v", i+1, m.ws.Name, cv, err)
				}
			}
		}

		if _, err := e.Server.States.CollectGarbage(ctx, -time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if ok, err := e.Server.Blobs.Exists(ctx, k); err != nil || ok {
				t.Errorf("blob %s of an emptied state version: exists %v, %v", k, ok, err)
			}
		}
		// A second pass finds nothing more to do.
		if res, err := e.Server.Retention.Enforce(ctx, core.Now().Add(40*24*time.Hour)); err != nil || res.StateVersions+res.ConfigurationVersions != 0 {
			t.Fatalf("the second pass: %+v %v", res, err)
		}
	})
}

// versions are a workspace's three state versions and three configuration
// versions (the last of each current), made one after the other.
type versions struct {
	ws     *tfe.Workspace
	states []*tfe.StateVersion
	cvs    []*tfe.ConfigurationVersion
}

// makeVersions creates workspace name of acme with three state versions
// (each with an output n) and three uploaded configuration versions.
func makeVersions(ctx context.Context, t *testing.T, c *tfe.Client, name string) versions {
	t.Helper()
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	m := versions{ws: ws}
	for serial := int64(1); serial <= 3; serial++ {
		state := fmt.Sprintf(`{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":"l-%s","outputs":{"n":{"value":%d,"type":"number"}},"resources":[]}`, serial, name, serial)
		if _, err := c.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		sv, err := c.StateVersions.Create(ctx, ws.ID, tfe.StateVersionCreateOptions{Serial: tfe.Int64(serial), Lineage: tfe.String("l-" + name),
			MD5: tfe.String(fmt.Sprintf("%x", md5.Sum([]byte(state)))), State: tfe.String(base64.StdEncoding.EncodeToString([]byte(state)))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Workspaces.Unlock(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
		m.states = append(m.states, sv)
		m.cvs = append(m.cvs, testenv.UploadConfig(ctx, t, c, ws.ID, fmt.Sprintf("# %d\n", serial)))
	}
	return m
}

// TestRunPassesSoonAfterStart: the enforcer's loop makes its first pass
// after its first delay, not a whole interval after the start (a server
// restarted more often than hourly would never enforce), and acts as
// Enforce does: the versions made 40 days ago (their created_at set back
// in the store) lose their backing data, the current ones stay.
func TestRunPassesSoonAfterStart(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	if _, err := c.Organizations.SetDataRetentionPolicyDeleteOlder(ctx, "acme", tfe.DataRetentionPolicyDeleteOlderSetOptions{DeleteOlderThanNDays: 30}); err != nil {
		t.Fatal(err)
	}
	v := makeVersions(ctx, t, c, "app")
	old := core.Micros(core.Now().Add(-40 * 24 * time.Hour))
	for _, table := range []string{"state_versions", "configuration_versions"} {
		if _, err := e.Server.DB.Exec(ctx, `UPDATE `+table+` SET created_at = ? WHERE workspace_id = ?`, old, v.ws.ID); err != nil {
			t.Fatal(err)
		}
	}
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	go e.Server.Retention.Run(loopCtx, 0, time.Hour)
	// A pass empties the state versions, then archives the configuration
	// versions: the test waits for both, the second being the pass's end.
	deadline := time.Now().Add(time.Minute)
	for {
		sv, err := c.StateVersions.Read(ctx, v.states[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		cv, err := c.ConfigurationVersions.Read(ctx, v.cvs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(sv.Status) == "backing_data_permanently_deleted" && cv.Status == tfe.ConfigurationArchived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pass within a minute of the loop's start: the oldest state version is %s, the oldest configuration version %s", sv.Status, cv.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sv, err := c.StateVersions.Read(ctx, v.states[2].ID); err != nil || sv.Status != tfe.StateVersionFinalized {
		t.Fatalf("the current state version after the pass: %+v %v", sv, err)
	}
	if cv, err := c.ConfigurationVersions.Read(ctx, v.cvs[2].ID); err != nil || cv.Status != tfe.ConfigurationUploaded {
		t.Fatalf("the current configuration version after the pass: %+v %v", cv, err)
	}
}

// TestOwnPolicyWithoutTheOrganizations: a workspace's own delete-older
// policy works in an organization that has none (the enforcer finds it by
// its settings document alone), and a workspace under no policy is left
// alone. Both stores.
func TestOwnPolicyWithoutTheOrganizations(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		own, none := makeVersions(ctx, t, c, "own"), makeVersions(ctx, t, c, "none")
		if _, err := c.Workspaces.SetDataRetentionPolicyDeleteOlder(ctx, own.ws.ID, tfe.DataRetentionPolicyDeleteOlderSetOptions{DeleteOlderThanNDays: 30}); err != nil {
			t.Fatal(err)
		}
		res, err := e.Server.Retention.Enforce(ctx, core.Now().Add(40*24*time.Hour))
		if err != nil || res.Workspaces != 1 || res.StateVersions != 2 || res.ConfigurationVersions != 2 {
			t.Fatalf("the pass: %+v %v, want the one workspace with a policy, 2 state and 2 configuration versions", res, err)
		}
		if sv, err := c.StateVersions.Read(ctx, own.states[0].ID); err != nil || string(sv.Status) != "backing_data_permanently_deleted" {
			t.Fatalf("the oldest state version of the workspace with a policy: %+v %v", sv, err)
		}
		for i := range 3 {
			if sv, err := c.StateVersions.Read(ctx, none.states[i].ID); err != nil || sv.Status != tfe.StateVersionFinalized {
				t.Errorf("state version %d of the workspace under no policy: %+v %v", i+1, sv, err)
			}
		}
	})
}
