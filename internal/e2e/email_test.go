package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/mailsink"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestNotificationEmail: with an SMTP server configured (a real one,
// started by the test), an email configuration can be enabled and a run's
// notification arrives as an email to its addresses and its users; the
// answer shows in delivery-responses. Without one, enabling email is a 422
// naming the missing SMTP server.
func TestNotificationEmail(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sink, err := mailsink.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sink.Close() })
			e := testenv.New(t, testenv.Options{Store: st, SMTPAddr: sink.Addr})
			c := e.Client
			org := testenv.NewOrg(t, c, "acme")
			_, member := e.UserClient(t, org.Name, "dev@acme.test")
			ws, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("mailed")})
			if err != nil {
				t.Fatal(err)
			}
			nc, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
				DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeEmail), Enabled: tfe.Bool(true),
				Name: tfe.String("mail"), EmailAddresses: []string{"ops@acme.test"}, EmailUsers: []*tfe.User{{ID: member.User.ID}},
				Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerCompleted},
			})
			if err != nil {
				t.Fatalf("enabling an email configuration with an SMTP server: %v", err)
			}
			if !nc.Enabled {
				t.Fatal("the email configuration is not enabled")
			}
			cv := uploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "a" { input = "x" }`)
			r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
			waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)
			// Adding the member also emailed them an invitation (internal/signin):
			// the run's notification is the message about the run.
			var m mailsink.Message
			for m.Data == nil {
				select {
				case got := <-sink.Messages:
					if strings.Contains(string(got.Data), "Subject: Terrace: Run ") {
						m = got
					} else if !strings.Contains(strings.ToLower(string(got.Data)), "invit") {
						t.Fatalf("an email that is neither the run's notification nor an invitation: %s", got.Data)
					}
				case <-time.After(time.Minute):
					t.Fatal("no email about the run arrived within a minute of the apply")
				}
			}
			to := slices.Clone(m.To)
			slices.Sort(to)
			if !slices.Equal(to, []string{"dev@acme.test", "ops@acme.test"}) {
				t.Fatalf("email recipients %v, want the configured address and the user's", m.To)
			}
			text := string(m.Data)
			for _, want := range []string{"Subject: Terrace: Run Applied: acme/mailed", r.ID, "run:completed"} {
				if !strings.Contains(text, want) {
					t.Fatalf("the email lacks %q:\n%s", want, text)
				}
			}
			// The server's answer is kept on the configuration.
			var responses []deliveryResponse
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				_, responses = readResponses(t, e, nc.ID)
				if len(responses) > 0 || time.Now().After(deadline) {
					break
				}
			}
			if len(responses) != 1 || responses[0].Code != "250" || responses[0].Successful != "true" {
				t.Fatalf("delivery-responses after an email: %+v", responses)
			}
			// verify sends a test email too.
			if _, err := c.NotificationConfigurations.Verify(ctx, nc.ID); err != nil {
				t.Fatal(err)
			}
			select {
			case m = <-sink.Messages:
				if !strings.Contains(string(m.Data), "test email") {
					t.Fatalf("the verification email: %s", m.Data)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("verify sent no email")
			}

			// A server without SMTP refuses to enable email with a 422.
			bare := testenv.New(t, testenv.Options{Store: st})
			bws := testenv.NewOrg(t, bare.Client, "plain")
			w2, err := bare.Client.Workspaces.Create(ctx, bws.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
			if err != nil {
				t.Fatal(err)
			}
			_, err = bare.Client.NotificationConfigurations.Create(ctx, w2.ID, tfe.NotificationConfigurationCreateOptions{
				DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeEmail), Enabled: tfe.Bool(true),
				Name: tfe.String("mail"), EmailAddresses: []string{"ops@plain.test"},
				Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerCompleted},
			})
			if err == nil || !strings.Contains(err.Error(), "SMTP") {
				t.Fatalf("enabling email without an SMTP server: %v, want an error naming SMTP", err)
			}
			status := statusOf(t, bare, "POST", "/api/v2/workspaces/"+w2.ID+"/notification-configurations",
				`{"data":{"type":"notification-configurations","attributes":{"destination-type":"email","enabled":true,"name":"m","triggers":["run:completed"],"email-addresses":["a@b.test"]}}}`)
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("enabling email without an SMTP server answered %d, want 422", status)
			}
		})
	}
}

// statusOf sends a JSON:API request as the site admin and returns the status.
func statusOf(t *testing.T, e *testenv.Env, method, path, body string) int {
	t.Helper()
	code, _ := e.API(t, "", method, path, body)
	return code
}
