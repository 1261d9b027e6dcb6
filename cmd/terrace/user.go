package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/signin"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/team"
)

// signinFlags are the server's browser sign-in flags.
func signinFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.DurationVar(&cfg.SessionIdleTimeout, "session-idle-timeout", 12*time.Hour, "a browser session unused this long ends")
	f.DurationVar(&cfg.SessionLifetime, "session-lifetime", 7*24*time.Hour, "a browser session ends this long after sign-in")
	f.StringVar(&cfg.OIDCIssuer, "oidc-issuer", "", "OpenID Connect issuer URL for single sign-on (none: passwords only)")
	f.StringVar(&cfg.OIDCClientID, "oidc-client-id", "", "Terrace's client ID at the OpenID provider")
	f.StringVar(&cfg.OIDCClientSecret, "oidc-client-secret", "", "Terrace's client secret at the OpenID provider (also TERRACE_OIDC_CLIENT_SECRET_FILE)")
	f.StringVar(&cfg.OIDCRedirectURL, "oidc-redirect-url", "", "the redirect URL registered at the provider (default https://<hostname>/app/sso/callback)")
	f.StringVar(&cfg.OIDCName, "oidc-name", "single sign-on", "the provider's name on the sign-in button")
}

func userCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Manage users' sign-in"}
	var dataDir, database, username string
	setPassword := &cobra.Command{
		Use:   "set-password",
		Short: "Set a user's password (read from standard input) and end the user's browser sessions",
		Long: `Set the password a user signs in to the web UI with, as a site admin with
access to the database. The password is the first line of standard input
(at least 12 characters):

    printf '%s\n' "$PASSWORD" | terrace user set-password --username admin

The database is --database (TERRACE_DATABASE) or <data-dir>/terrace.db.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := envTwins(cmd.Flags()); err != nil {
				return err
			}
			if username == "" {
				return errors.New("--username is required")
			}
			ctx := cmd.Context()
			dataDir = cmp.Or(dataDir, ".terrace")
			database = cmp.Or(database, filepath.Join(dataDir, "terrace.db"))
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && line == "" {
				return errors.New("no password on standard input")
			}
			password := strings.TrimRight(line, "\r\n")
			db, err := store.Open(ctx, database)
			if err != nil {
				return err
			}
			defer db.Close()
			u, err := auth.NewService(db, nil, nil, nil).UserByName(ctx, username)
			if err != nil {
				return err
			}
			if err := signin.SetUserPassword(ctx, db, u.ID, password); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "The password of %s is set; their browser sessions have ended.\n", u.Username)
			return nil
		},
	}
	f := setPassword.Flags()
	f.StringVar(&dataDir, "data-dir", ".terrace", "the server's data dir")
	f.StringVar(&database, "database", "", "postgres://… URL, or a SQLite file (default <data-dir>/terrace.db)")
	f.StringVar(&username, "username", "", "the user")
	cmd.AddCommand(setPassword, inviteLinkCmd())
	return cmd
}

func inviteLinkCmd() *cobra.Command {
	var dataDir, database, hostname, org, email string
	cmd := &cobra.Command{
		Use:   "invite-link",
		Short: "Print a fresh invitation link for an invited organization member",
		Long: `Print a fresh link that accepts an invitation to an organization (the
earlier link stops working). Terrace emails invitation links itself when it
has a mail server (--smtp-addr); without one, a site admin hands this link
to the person:

    terrace user invite-link --organization acme --email ana@example.com

--hostname (TERRACE_HOSTNAME) is the server's public host:port, the start of
the link.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := envTwins(cmd.Flags()); err != nil {
				return err
			}
			if org == "" || email == "" {
				return errors.New("--organization and --email are required")
			}
			ctx := cmd.Context()
			dataDir = cmp.Or(dataDir, ".terrace")
			database = cmp.Or(database, filepath.Join(dataDir, "terrace.db"))
			db, err := store.Open(ctx, database)
			if err != nil {
				return err
			}
			defer db.Close()
			users := auth.NewService(db, nil, nil, nil)
			teams := team.NewService(db)
			teams.SetAuth(users, users)
			admin := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
			ms, _, _, err := teams.ListMemberships(admin, org, team.MembershipFilter{Emails: []string{email}, Status: team.StatusInvited}, 0, 1)
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				return fmt.Errorf("organization %q has no invited member with email %s", org, email)
			}
			m := ms[0]
			link, err := signin.InvitationLink(ctx, db, "https://"+hostname, team.Invitation{Organization: m.Organization, MembershipID: m.ID, UserID: m.UserID, Email: email})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), link)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", ".terrace", "the server's data dir")
	f.StringVar(&database, "database", "", "postgres://… URL, or a SQLite file (default <data-dir>/terrace.db)")
	f.StringVar(&hostname, "hostname", "localhost:8443", "the server's public host:port")
	f.StringVar(&org, "organization", "", "the organization")
	f.StringVar(&email, "email", "", "the invited email address")
	return cmd
}
