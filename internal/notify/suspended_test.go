package notify_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/mailsink"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestSuspendedUsersGetNoEmail: an email configuration's users are mailed
// through a real SMTP server (mailsink), but a user a site admin has
// suspended is left out of the recipients until unsuspended; the
// configuration's addresses and its other users still get the mail; on
// both stores.
func TestSuspendedUsersGetNoEmail(t *testing.T) {
	t.Parallel()
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
			testenv.NewOrg(t, c, "acme")
			_, dev := e.UserClient(t, "acme", "dev@acme.test")
			_, sus := e.UserClient(t, "acme", "sus@acme.test")
			ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("mailed")})
			if err != nil {
				t.Fatal(err)
			}
			nc, err := c.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
				DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeEmail), Enabled: tfe.Bool(false),
				Name: tfe.String("mail"), EmailAddresses: []string{"ops@acme.test"}, EmailUsers: []*tfe.User{{ID: dev.User.ID}, {ID: sus.User.ID}},
				Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerCompleted},
			})
			if err != nil {
				t.Fatal(err)
			}
			// verified sends the configuration's test email and returns
			// its recipients (invitations, also mailed, are skipped).
			verified := func(step string) []string {
				t.Helper()
				if _, err := c.NotificationConfigurations.Verify(ctx, nc.ID); err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				for {
					select {
					case m := <-sink.Messages:
						if !strings.Contains(string(m.Data), "test email") {
							continue
						}
						to := slices.Clone(m.To)
						slices.Sort(to)
						return to
					case <-time.After(30 * time.Second):
						t.Fatalf("%s: verify sent no email", step)
					}
				}
			}
			if to := verified("both users active"); !slices.Equal(to, []string{"dev@acme.test", "ops@acme.test", "sus@acme.test"}) {
				t.Fatalf("recipients with both users active: %v", to)
			}
			if _, err := c.Admin.Users.Suspend(ctx, sus.User.ID); err != nil {
				t.Fatal(err)
			}
			if to := verified("sus suspended"); !slices.Equal(to, []string{"dev@acme.test", "ops@acme.test"}) {
				t.Fatalf("recipients with sus suspended: %v, want sus left out", to)
			}
			if _, err := c.Admin.Users.Unsuspend(ctx, sus.User.ID); err != nil {
				t.Fatal(err)
			}
			if to := verified("sus unsuspended"); !slices.Equal(to, []string{"dev@acme.test", "ops@acme.test", "sus@acme.test"}) {
				t.Fatalf("recipients with sus unsuspended: %v", to)
			}
		})
	}
}
