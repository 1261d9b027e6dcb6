package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

// webhook is a real HTTP receiver that checks the signature of every
// request against the token it shares with the configuration. fail
// decides the status of each run notification (the verification request
// is always accepted); hold, when set, keeps a request open until closed.
type webhook struct {
	t     *testing.T
	token string
	srv   *httptest.Server

	mu        sync.Mutex
	fail      int // how many run notifications to refuse before accepting
	badSigs   int
	attempts  map[string]int // trigger -> requests
	delivered map[string]int // trigger -> accepted requests
	bodies    map[string][]byte
	got       chan string // trigger of each accepted request
	arrived   chan string // trigger of each request, on arrival
	// holdFirst keeps the first run:completed request open until its
	// client goes away, and does not count it.
	holdFirst bool
}

func newWebhook(t *testing.T, token string, fail int) *webhook {
	w := &webhook{t: t, token: token, fail: fail, attempts: map[string]int{}, delivered: map[string]int{}, bodies: map[string][]byte{},
		got: make(chan string, 100), arrived: make(chan string, 100)}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhook) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var p struct {
		Notifications []struct {
			Trigger string `json:"trigger"`
		} `json:"notifications"`
		Trigger string `json:"trigger"` // v2 payloads (assessments)
	}
	_ = json.Unmarshal(body, &p)
	trig := "?"
	if len(p.Notifications) == 1 {
		trig = p.Notifications[0].Trigger
	} else if p.Trigger != "" {
		trig = p.Trigger
	}
	w.arrived <- trig
	w.mu.Lock()
	if !notify.Verify(w.token, body, r.Header.Get("X-TFE-Notification-Signature")) {
		w.badSigs++
	}
	w.attempts[trig]++
	refuse := trig != "verification" && w.fail > 0
	if refuse {
		w.fail--
	}
	hold := w.holdFirst && trig == "run:completed"
	if hold {
		w.holdFirst = false
	}
	w.mu.Unlock()
	if hold {
		<-r.Context().Done()
		return
	}
	if refuse {
		http.Error(rw, "not now", http.StatusServiceUnavailable)
		return
	}
	w.mu.Lock()
	w.delivered[trig]++
	w.bodies[trig] = body
	w.mu.Unlock()
	rw.Write([]byte("ok"))
	w.got <- trig
}

// waitFor waits for an accepted delivery of trig.
func (w *webhook) waitFor(limit time.Duration, trig string) {
	w.t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case got := <-w.got:
			if got == trig {
				return
			}
		case <-deadline:
			w.mu.Lock()
			defer w.mu.Unlock()
			w.t.Fatalf("no %s delivered in %s (attempts %v, delivered %v)", trig, limit, w.attempts, w.delivered)
		}
	}
}

func (w *webhook) counts() (attempts, delivered map[string]int, badSigs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, d := map[string]int{}, map[string]int{}
	for k, v := range w.attempts {
		a[k] = v
	}
	for k, v := range w.delivered {
		d[k] = v
	}
	return a, d, w.badSigs
}

type deliveryResponse struct {
	Code       string `json:"code"`
	Successful string `json:"successful"`
	Body       string `json:"body"`
}

// readResponses reads a configuration's delivery-responses as sent (go-tfe
// decodes its []*DeliveryResponse as empty), and the whole response body.
func readResponses(t *testing.T, e *testenv.Env, id string) (string, []deliveryResponse) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.URL+"/api/v2/notification-configurations/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc struct {
		Data struct {
			Attributes struct {
				Responses []deliveryResponse `json:"delivery-responses"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("reading %s: %v: %s", id, err, raw)
	}
	return string(raw), doc.Data.Attributes.Responses
}

var allRunTriggers = []tfe.NotificationTriggerType{tfe.NotificationTriggerCreated, tfe.NotificationTriggerPlanning,
	tfe.NotificationTriggerNeedsAttention, tfe.NotificationTriggerApplying, tfe.NotificationTriggerCompleted, tfe.NotificationTriggerErrored}

// TestNotificationDelivery: a receiver that verifies the HMAC of every
// delivery and refuses the first three attempts still gets the
// notification, once; the failures show on the configuration; a second
// configuration gets every run trigger of an auto-applied run in order.
func TestNotificationDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testNotificationDelivery(t, testenv.New(t, testenv.Options{Store: st}))
		})
	}
}

func testNotificationDelivery(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	c := e.Client
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-hmac-key-for-the-test"
	flaky := newWebhook(t, secret, 3)
	all := newWebhook(t, "other-key", 0)
	nc, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
		DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
		Name: tfe.String("flaky"), Token: tfe.String(secret), URL: tfe.String(flaky.srv.URL),
		Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerCompleted},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
		DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
		Name: tfe.String("all"), Token: tfe.String("other-key"), URL: tfe.String(all.srv.URL), Triggers: allRunTriggers,
	}); err != nil {
		t.Fatal(err)
	}
	flaky.waitFor(10*time.Second, "verification")
	raw, responses := readResponses(t, e, nc.ID)
	if len(responses) != 1 || responses[0].Code != "200" || responses[0].Successful != "true" {
		t.Fatalf("delivery-responses after a verified create: %+v", responses)
	}
	// The token is write-only: no response carries it.
	if strings.Contains(raw, secret) {
		t.Fatalf("a notification configuration read shows its token: %s", raw)
	}

	// A dead endpoint is refused when enabling, and nothing is saved.
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusGone) }))
	defer dead.Close()
	_, err = c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
		DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
		Name: tfe.String("dead"), URL: tfe.String(dead.URL), Triggers: allRunTriggers,
	})
	if err == nil || !strings.Contains(err.Error(), "verification") {
		t.Fatalf("creating an enabled configuration for a dead endpoint: %v, want a verification failure", err)
	}
	// Email is refused with a clear error while no SMTP server is configured.
	_, err = c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
		DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeEmail), Enabled: tfe.Bool(true),
		Name: tfe.String("mail"), Triggers: allRunTriggers,
	})
	if err == nil || !strings.Contains(err.Error(), "SMTP") {
		t.Fatalf("enabling an email configuration without SMTP: %v, want an error naming SMTP", err)
	}

	cv := uploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "a" { input = "x" }`)
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)

	flaky.waitFor(time.Minute, "run:completed")
	all.waitFor(30*time.Second, "run:completed")
	attempts, delivered, bad := flaky.counts()
	if bad != 0 {
		t.Fatalf("%d deliveries had a wrong signature", bad)
	}
	if attempts["run:completed"] != 4 || delivered["run:completed"] != 1 {
		t.Fatalf("run:completed: %d attempts, %d accepted; want 4 and 1", attempts["run:completed"], delivered["run:completed"])
	}
	var p struct {
		PayloadVersion int    `json:"payload_version"`
		ConfigID       string `json:"notification_configuration_id"`
		RunID          string `json:"run_id"`
		RunURL         string `json:"run_url"`
		WorkspaceID    string `json:"workspace_id"`
		WorkspaceName  string `json:"workspace_name"`
		Organization   string `json:"organization_name"`
		Notifications  []struct {
			Message   string `json:"message"`
			Trigger   string `json:"trigger"`
			RunStatus string `json:"run_status"`
		} `json:"notifications"`
	}
	flaky.mu.Lock()
	err = json.Unmarshal(flaky.bodies["run:completed"], &p)
	flaky.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if p.PayloadVersion != 1 || p.ConfigID != nc.ID || p.RunID != r.ID || p.WorkspaceID != ws.ID || p.WorkspaceName != "app" ||
		p.Organization != "acme" || !strings.Contains(p.RunURL, r.ID) || len(p.Notifications) != 1 ||
		p.Notifications[0].RunStatus != "applied" || p.Notifications[0].Trigger != "run:completed" {
		t.Fatalf("run:completed payload: %+v", p)
	}

	// The failures are visible on the configuration.
	// (The receiver answered before the server recorded the answer: wait
	// for the record.)
	var failures, successes int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, responses = readResponses(t, e, nc.ID)
		failures, successes = 0, 0
		for _, d := range responses {
			if d.Successful == "true" {
				successes++
			} else if d.Code == "503" {
				failures++
			}
		}
		if successes >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if failures != 3 || successes != 2 {
		t.Fatalf("delivery-responses: %d failures and %d successes, want 3 and 2 (verification, delivery): %+v", failures, successes, responses)
	}

	// Every run trigger of an auto-applied run reached the other
	// configuration once, signed with its own key.
	attempts, delivered, bad = all.counts()
	if bad != 0 {
		t.Fatalf("%d deliveries to the second receiver had a wrong signature", bad)
	}
	for _, trig := range []string{"run:created", "run:planning", "run:applying", "run:completed"} {
		if delivered[trig] != 1 {
			t.Errorf("%s delivered %d times, want once (attempts %v)", trig, delivered[trig], attempts)
		}
	}
	if delivered["run:needs_attention"] != 0 || delivered["run:errored"] != 0 {
		t.Errorf("an auto-applied run sent needs_attention or errored: %v", delivered)
	}
}

// TestNotificationSurvivesKill kills the server while a delivery is in
// flight (the receiver holds the request open): after the restart the
// notification is sent again and arrives.
func TestNotificationSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			database := ""
			if st == "postgres" {
				database = storetest.PostgresDSN(t)
			}
			p := startProc(t, t.TempDir(), database, "")
			ctx := mustCtx()
			c := p.Client
			if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
				t.Fatal(err)
			}
			ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
			if err != nil {
				t.Fatal(err)
			}
			hook := newWebhook(t, "k", 0)
			hook.holdFirst = true
			if _, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
				DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
				Name: tfe.String("hook"), Token: tfe.String("k"), URL: tfe.String(hook.srv.URL),
				Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerCompleted},
			}); err != nil {
				t.Fatal(err)
			}
			cv := uploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "a" { input = "x" }`)
			r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
			waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)
			// Wait until the delivery is in flight, then kill the server.
			for inFlight := false; !inFlight; {
				select {
				case trig := <-hook.arrived:
					inFlight = trig == "run:completed"
				case <-time.After(time.Minute):
					t.Fatal("the run:completed delivery never started")
				}
			}
			p.kill()

			p.restart()
			hook.waitFor(time.Minute, "run:completed")
			_, delivered, bad := hook.counts()
			if bad != 0 {
				t.Fatalf("%d deliveries had a wrong signature", bad)
			}
			if delivered["run:completed"] < 1 {
				t.Fatalf("run:completed never delivered after the restart")
			}
		})
	}
}
