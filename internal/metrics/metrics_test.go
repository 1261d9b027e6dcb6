package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// get requests path from the server over HTTPS with token ("" for none).
func get(t *testing.T, e *testenv.Env, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", e.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading GET %s: %v", path, err)
	}
	return res.StatusCode, string(b)
}

// scrape reads /metrics as the site admin and parses the exposition.
func scrape(t *testing.T, e *testenv.Env) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, e, "/metrics", e.Token)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics as the site admin: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	return fams
}

// sample finds the series of family name whose labels include want; ok is
// false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if match {
			return m, true
		}
	}
	return nil, false
}

// value is a counter's or gauge's value, or a histogram's count; -1 when
// the series is missing.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m, ok := sample(fams, name, labels)
	switch {
	case !ok:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func routes(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for _, m := range fams["terrace_http_request_duration_seconds"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "route" && !slices.Contains(out, lp.GetValue()) {
				out = append(out, lp.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestMetricsAfterARealRun scrapes /metrics over HTTPS after a real
// terraform run (auto-apply) with a notification configuration, on both
// stores: runs by status, transitions, job claims and queue wait, phase
// durations, delivered notifications, the route-labelled latency
// histogram, and that unknown paths add no route label.
func TestMetricsAfterARealRun(t *testing.T) {
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Fatal("this test runs a real run: it needs terraform on PATH")
	}
	testenv.ForEachStore(t, testMetricsAfterARealRun)
}

func testMetricsAfterARealRun(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	hook := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case hook <- string(b):
		default:
		}
	}))
	defer receiver.Close()
	if _, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
		DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeGeneric), Enabled: tfe.Bool(true),
		Name: tfe.String("ops"), Token: tfe.String("hmac-key"), URL: tfe.String(receiver.URL),
		Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerCompleted},
	}); err != nil {
		t.Fatal(err)
	}

	before := scrape(t, e)
	if v := value(before, "terrace_job_claims_total", map[string]string{"phase": "plan"}); v != 0 {
		t.Fatalf("a fresh server reports %v plan claims, want a 0 series", v)
	}

	cv, err := c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigurationVersions.Upload(ctx, cv.UploadURL, "testdata/run"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cv, err = c.ConfigurationVersions.Read(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cv.Status == tfe.ConfigurationUploaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the configuration version is still %s", cv.Status)
		}
	}
	r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err = c.Runs.Read(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == tfe.RunApplied {
			break
		}
		if r.Status == tfe.RunErrored || r.Status == tfe.RunCanceled || time.Now().After(deadline) {
			t.Fatalf("the run is %s, want applied", r.Status)
		}
	}

	// The completed notification is delivered from the outbox; the
	// attempt is counted once its outcome is recorded.
	var fams map[string]*dto.MetricFamily
	delivered := map[string]string{"destination": "generic", "outcome": "delivered"}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		fams = scrape(t, e)
		// The run's last transition and its apply duration are counted by
		// observers that may run after the notification went out, and the
		// outbox marks the item handled after the delivery was counted.
		if value(fams, "terrace_notification_delivery_attempts_total", delivered) >= 1 &&
			value(fams, "terrace_run_transitions_total", map[string]string{"status": "applied"}) >= 1 &&
			value(fams, "terrace_run_phase_duration_seconds", map[string]string{"phase": "apply", "outcome": "applied"}) >= 1 &&
			value(fams, "terrace_outbox_attempts_total", map[string]string{"topic": "notification", "outcome": "handled"}) >= 1 &&
			value(fams, "terrace_notification_outbox_pending", nil) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivered notification, applied transition, apply duration or handled outbox item counted, or an item still pending: delivered %v, pending %v",
				value(fams, "terrace_notification_delivery_attempts_total", delivered), value(fams, "terrace_notification_outbox_pending", nil))
		}
	}
	// The receiver first got the verification request (sent when the
	// configuration was enabled, outside the outbox), then the run's.
	var got []string
	for len(hook) > 0 {
		got = append(got, <-hook)
	}
	if !slices.ContainsFunc(got, func(b string) bool { return strings.Contains(b, `"trigger":"run:completed"`) }) {
		t.Fatalf("a delivery was counted but the receiver got no run:completed notification: %q", got)
	}

	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"terrace_runs", map[string]string{"status": "applied"}, 1},
		{"terrace_run_transitions_total", map[string]string{"status": "pending"}, 1},
		{"terrace_run_transitions_total", map[string]string{"status": "planning"}, 1},
		{"terrace_run_transitions_total", map[string]string{"status": "applying"}, 1},
		{"terrace_run_transitions_total", map[string]string{"status": "applied"}, 1},
		{"terrace_job_claims_total", map[string]string{"phase": "plan"}, 1},
		{"terrace_job_queue_wait_seconds", map[string]string{"phase": "plan"}, 1},
		{"terrace_run_phase_duration_seconds", map[string]string{"phase": "plan", "outcome": "planned"}, 1},
		{"terrace_run_phase_duration_seconds", map[string]string{"phase": "apply", "outcome": "applied"}, 1},
		{"terrace_job_queue_depth", map[string]string{"phase": "plan"}, 0},
		{"terrace_job_queue_depth", map[string]string{"phase": "apply"}, 0},
		{"terrace_notification_outbox_pending", nil, 0},
		{"terrace_outbox_attempts_total", map[string]string{"topic": "notification", "outcome": "handled"}, 1},
		{"terrace_http_request_duration_seconds", map[string]string{"route": "POST /api/v2/runs", "status_class": "2xx"}, 1},
		{"terrace_http_request_statements", map[string]string{"route": "POST /api/v2/runs"}, 1},
		{"terrace_metrics_store_errors_total", nil, 0},
	}
	for _, w := range want {
		if got := value(fams, w.name, w.labels); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
	if m, ok := sample(fams, "terrace_run_phase_duration_seconds", map[string]string{"phase": "plan", "outcome": "planned"}); !ok || m.GetHistogram().GetSampleSum() <= 0 {
		t.Errorf("the plan's duration is not recorded: %v", m)
	}
	if m, ok := sample(fams, "terrace_http_request_statements", map[string]string{"route": "POST /api/v2/runs"}); !ok || m.GetHistogram().GetSampleSum() < 2 {
		t.Errorf("creating a run ran no statements, by terrace_http_request_statements: %v", m)
	}
	if n := value(fams, "terrace_http_request_duration_seconds", map[string]string{"route": "GET /api/v2/runs/{id}", "status_class": "2xx"}); n < 1 {
		t.Errorf("reading the run (GET /api/v2/runs/{id}) is not in the latency histogram: %v", n)
	}
	if v := value(fams, "process_resident_memory_bytes", nil); v <= 0 {
		t.Errorf("process_resident_memory_bytes = %v", v)
	}

	// Unknown paths, inside and outside the API, fall into the same
	// bounded labels: after the first of each kind, no new label value.
	nonce := strings.ToLower(core.RandomString(8))
	for _, p := range []string{"/api/v2/no-such-" + nonce, "/no-such-" + nonce, "/api/v2/runs/" + nonce + "/no-such"} {
		if code, _ := get(t, e, p, e.Token); code != http.StatusNotFound {
			t.Fatalf("GET %s = %d, want 404", p, code)
		}
	}
	first := routes(scrape(t, e))
	for i := range 5 {
		for _, p := range []string{"/api/v2/no-such-" + nonce + "-" + string(rune('a'+i)), "/other-" + nonce + string(rune('a'+i)), "/api/v2/runs/" + nonce + "/x" + string(rune('a'+i))} {
			if code, _ := get(t, e, p, e.Token); code != http.StatusNotFound {
				t.Fatalf("GET %s = %d, want 404", p, code)
			}
		}
	}
	after := routes(scrape(t, e))
	if !slices.Equal(first, after) {
		t.Errorf("unknown paths added route labels:\nbefore %q\nafter  %q", first, after)
	}
	for _, r := range after {
		if strings.Contains(r, nonce) {
			t.Errorf("a raw path became a route label: %q", r)
		}
	}
	for _, must := range []string{"/api/v2/", "unmatched", "GET /metrics"} {
		if !slices.Contains(after, must) {
			t.Errorf("route %q missing from %q", must, after)
		}
	}
}

// memberToken invites email into org, accepts for them, and returns a
// user token of theirs.
func memberToken(t *testing.T, e *testenv.Env, org, email string) string {
	t.Helper()
	ctx := context.Background()
	m, err := e.Client.OrganizationMemberships.Create(ctx, org, tfe.OrganizationMembershipCreateOptions{Email: tfe.String(email)})
	if err != nil {
		t.Fatalf("inviting %s: %v", email, err)
	}
	e.Accept(t, m.ID)
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestMetricsAccess: by default only a site admin (or the dedicated
// metrics token) reads /metrics; "open" lets anyone, "off" nobody. The
// metrics token opens nothing else.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	const metricsToken = "scraper-0123456789abcdef"
	e := testenv.New(t, testenv.Options{MetricsToken: metricsToken})
	testenv.NewOrg(t, e.Client, "acme")
	member := memberToken(t, e, "acme", "dev@acme.test")
	cases := []struct {
		who, token, path string
		want             int
	}{
		{"no token", "", "/metrics", http.StatusUnauthorized},
		{"an unknown token", "not-a-token", "/metrics", http.StatusUnauthorized},
		{"a member", member, "/metrics", http.StatusNotFound},
		{"the site admin", e.Token, "/metrics", http.StatusOK},
		{"the metrics token", metricsToken, "/metrics", http.StatusOK},
		{"the metrics token", metricsToken, "/api/v2/account/details", http.StatusUnauthorized},
		{"the metrics token", metricsToken, "/debug/pprof/", http.StatusUnauthorized},
	}
	for _, c := range cases {
		code, body := get(t, e, c.path, c.token)
		if code != c.want {
			t.Errorf("GET %s with %s: %d, want %d (%s)", c.path, c.who, code, c.want, body)
		}
		if c.want == http.StatusOK && c.path == "/metrics" && !strings.Contains(body, "terrace_runs") && !strings.Contains(body, "terrace_http_request_duration_seconds") {
			t.Errorf("GET /metrics with %s is not the exposition: %.200s", c.who, body)
		}
	}

	open := testenv.New(t, testenv.Options{MetricsAccess: "open"})
	if code, body := get(t, open, "/metrics", ""); code != http.StatusOK || !strings.Contains(body, "# TYPE terrace_job_claims_total counter") {
		t.Errorf("GET /metrics without a token on an open server: %d %.200s", code, body)
	}
	off := testenv.New(t, testenv.Options{MetricsAccess: "off"})
	if code, _ := get(t, off, "/metrics", off.Token); code != http.StatusNotFound {
		t.Errorf("GET /metrics as the site admin with metrics off: %d, want 404", code)
	}
}

// TestPprofForSiteAdminsOnly: /debug/pprof/ is the Go profiler for site
// admins; anyone else is refused before it runs.
func TestPprofForSiteAdminsOnly(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	member := memberToken(t, e, "acme", "dev@acme.test")
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if code, body := get(t, e, p, member); code != http.StatusNotFound || strings.Contains(body, "goroutine") {
			t.Errorf("GET %s as a member: %d, want 404 (%.200s)", p, code, body)
		}
		if code, _ := get(t, e, p, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", p, code)
		}
	}
	if code, body := get(t, e, "/debug/pprof/", e.Token); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ as the site admin: %d %.200s", code, body)
	}
	if code, body := get(t, e, "/debug/pprof/goroutine?debug=1", e.Token); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("GET /debug/pprof/goroutine as the site admin: %d %.200s", code, body)
	}
}

// TestBadMetricsAccessIsRefused: an unknown --metrics-access stops the
// server from starting, with a message naming the choices.
func TestBadMetricsAccessIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := server.New(context.Background(), server.Config{DataDir: dir, MetricsAccess: "public",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "site-admin") {
		t.Fatalf("metrics access %q: got %v, want an error naming the choices", "public", err)
	}
}
