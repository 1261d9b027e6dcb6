package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// The signature is hex HMAC-SHA512 of the exact body, computed here with
// the standard library independently of Sign.
func TestSignature(t *testing.T) {
	body := []byte(`{"payload_version":1}`)
	m := hmac.New(sha512.New, []byte("key"))
	m.Write(body)
	want := hex.EncodeToString(m.Sum(nil))
	if got := notify.Sign("key", body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if !notify.Verify("key", body, want) || notify.Verify("other", body, want) || notify.Verify("key", append(body, ' '), want) {
		t.Fatal("Verify accepts what it must refuse or refuses the right signature")
	}
}

// Generic, Slack and Teams bodies carry the run in their own shapes; the
// generic one is HCP Terraform's v1 payload with exactly its keys.
func TestBodies(t *testing.T) {
	e := notify.Event{Trigger: notify.RunCompleted, Message: "Run Applied", RunID: "run-1", RunURL: "https://h/app/o/workspaces/w/runs/run-1",
		RunStatus: "applied", WorkspaceID: "ws-1", WorkspaceName: "w", Organization: "o", RunCreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := notify.Body(&notify.Configuration{ID: "nc-1", Destination: notify.Generic}, e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := []string{"payload_version", "notification_configuration_id", "run_url", "run_id", "run_message", "run_created_at",
		"run_created_by", "workspace_id", "workspace_name", "organization_name", "notifications"}
	if len(m) != len(keys) {
		t.Fatalf("generic payload has %d keys, want %d: %s", len(m), len(keys), b)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Fatalf("generic payload lacks %s: %s", k, b)
		}
	}
	if m["run_created_at"] != "2026-01-02T03:04:05Z" || m["run_message"] != nil || m["payload_version"] != float64(1) {
		t.Fatalf("generic payload values: %s", b)
	}
	n := m["notifications"].([]any)[0].(map[string]any)
	if n["trigger"] != "run:completed" || n["run_status"] != "applied" || n["message"] != "Run Applied" {
		t.Fatalf("notification: %v", n)
	}
	for _, d := range []notify.Destination{notify.Slack, notify.MicrosoftTeams} {
		b, err := notify.Body(&notify.Configuration{ID: "nc-1", Destination: d}, e)
		if err != nil || !json.Valid(b) {
			t.Fatalf("%s body: %s %v", d, b, err)
		}
	}
}

// hanging answers nothing until the client gives up.
func hanging(t *testing.T) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Verify") == "" {
			var p struct {
				Notifications []struct{ Trigger string } `json:"notifications"`
			}
			_ = json.NewDecoder(r.Body).Decode(&p)
			if len(p.Notifications) == 1 && p.Notifications[0].Trigger == "verification" {
				return
			}
		}
		<-r.Context().Done()
	}))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// A destination that never answers holds up neither the run that caused
// the notification nor the deliveries to other destinations.
func TestDeadEndpointBlocksNoOne(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
			t.Fatal(err)
		}
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 10)
		live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got <- b
		}))
		defer live.Close()
		dead := hanging(t)
		for name, url := range map[string]string{"dead": dead.URL, "live": live.URL} {
			if _, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
				DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
				Name: tfe.String(name), URL: tfe.String(url), Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerErrored},
			}); err != nil {
				t.Fatal(err)
			}
		}
		<-got // the live verification
		r := &run.Run{ID: core.NewID(core.PrefixRun), WorkspaceID: ws.ID, Organization: "acme", Status: run.Errored, CreatedAt: core.Now(), UpdatedAt: core.Now()}
		w := &run.Workspace{ID: ws.ID, Name: "app", Organization: "acme"}
		start := time.Now()
		for range 3 {
			e.Server.Notify.RunTransition(ctx, run.Transition{Run: r, Workspace: w, From: run.Planning, To: run.Errored})
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("queueing notifications took %s: it must not wait for destinations", d)
		}
		for i := range 3 {
			select {
			case b := <-got:
				var p struct {
					RunID string `json:"run_id"`
				}
				if err := json.Unmarshal(b, &p); err != nil || p.RunID != r.ID {
					t.Fatalf("delivery %d: %s", i, b)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the live destination got %d of 3 notifications while the dead one hangs", i)
			}
		}
	})
}

// A destination that cannot be reached: the reason kept in the outbox
// (and logged when the outbox gives up) says why, but not the URL, which
// can itself be a secret (a chat webhook's path is its credential).
func TestFailureReasonLeavesTheURLOut(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
			t.Fatal(err)
		}
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		const secretPath = "/hooks/T0KEN-s3cr3t-path"
		if _, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
			DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
			Name: tfe.String("hook"), URL: tfe.String(dest.URL + secretPath), Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerErrored},
		}); err != nil {
			t.Fatal(err)
		}
		dest.Close() // verified; from now on unreachable
		r := &run.Run{ID: core.NewID(core.PrefixRun), WorkspaceID: ws.ID, Organization: "acme", Status: run.Errored, CreatedAt: core.Now(), UpdatedAt: core.Now()}
		e.Server.Notify.RunTransition(ctx, run.Transition{Run: r, Workspace: &run.Workspace{ID: ws.ID, Name: "app", Organization: "acme"}, From: run.Planning, To: run.Errored})
		reason := ""
		for deadline := time.Now().Add(time.Minute); reason == ""; time.Sleep(50 * time.Millisecond) {
			if err := e.Server.DB.QueryRow(ctx, `SELECT COALESCE(MAX(last_error), '') FROM outbox_items WHERE topic = 'notification'`).Scan(&reason); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("no failed attempt was recorded in the outbox")
			}
		}
		if strings.Contains(reason, "s3cr3t") || !strings.Contains(reason, "nothing (") {
			t.Fatalf("the outbox's reason %q must say no answer came, without the URL", reason)
		}
	})
}
