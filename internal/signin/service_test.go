package signin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/signin"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestPasswordHash checks the encoded argon2id hash: its parameters are
// in it, the same password hashes differently each time (salt), and a
// wrong password or a damaged hash does not verify.
func TestPasswordHash(t *testing.T) {
	t.Parallel()
	p := signin.HashParams{Memory: 8 * 1024, Time: 1, Threads: 1}
	h1, err := signin.HashPassword("a long enough password", p)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := signin.HashPassword("a long enough password", p)
	if !strings.HasPrefix(h1, "$argon2id$v=19$m=8192,t=1,p=1$") || h1 == h2 {
		t.Fatalf("hashes %q and %q: want argon2id with the parameters, salted", h1, h2)
	}
	if ok, err := signin.VerifyPassword("a long enough password", h1); !ok || err != nil {
		t.Fatalf("the right password: %v %v", ok, err)
	}
	if ok, _ := signin.VerifyPassword("a long enough passwore", h1); ok {
		t.Fatal("a wrong password verified")
	}
	if _, err := signin.VerifyPassword("x", "$2a$10$notargon"); err == nil {
		t.Fatal("a bcrypt hash was accepted")
	}
	// Hashes made with other parameters still verify.
	h3, _ := signin.HashPassword("another password!", signin.HashParams{Memory: 16 * 1024, Time: 2, Threads: 2})
	if ok, err := signin.VerifyPassword("another password!", h3); !ok || err != nil {
		t.Fatalf("a hash with other parameters: %v %v", ok, err)
	}
}

// TestSessionsAndPasswords runs the stored side of sign-in on both
// stores: passwords, sessions with idle and absolute expiry, sign-out,
// and a password change ending every session of the user.
func TestSessionsAndPasswords(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := e.Server.Signin
		u := newUser(t, e, "dana")
		if err := s.SetPassword(ctx, u.ID, "too short"); core.KindOf(err) != core.KindInvalid {
			t.Fatalf("a short password: %v, want invalid", err)
		}
		if _, err := s.CheckPassword(ctx, "dana", "wrong password!!", "192.0.2.10"); core.KindOf(err) != core.KindUnauthorized {
			t.Fatalf("a wrong password: %v", err)
		}
		if _, err := s.CheckPassword(ctx, "nobody", goodPassword, "192.0.2.10"); core.KindOf(err) != core.KindUnauthorized {
			t.Fatalf("an unknown user: %v", err)
		}
		for _, login := range []string{"dana", "dana@example.test"} {
			got, err := s.CheckPassword(ctx, login, goodPassword, "192.0.2.10")
			if err != nil || got.ID != u.ID {
				t.Fatalf("signing in as %s: %v %v", login, got, err)
			}
		}

		session := func() string {
			secret, err := s.StartSession(ctx, u.ID)
			if err != nil {
				t.Fatal(err)
			}
			if id, err := s.SessionUser(ctx, secret); err != nil || id != u.ID {
				t.Fatalf("a new session: %q %v", id, err)
			}
			return secret
		}
		gone := func(what, secret string) {
			t.Helper()
			if _, err := s.SessionUser(ctx, secret); core.KindOf(err) != core.KindUnauthorized {
				t.Fatalf("%s: the session still works (%v)", what, err)
			}
		}
		// Only a hash is stored.
		a := session()
		var n int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM sessions WHERE id_hash = ?`, a).Scan(&n); err != nil || n != 0 {
			t.Fatalf("sessions stored by their secret: %d %v", n, err)
		}
		if err := s.EndSession(ctx, a); err != nil {
			t.Fatal(err)
		}
		gone("after sign-out", a)

		idle, old := session(), session()
		past := func(col string, d time.Duration) {
			if _, err := e.Server.DB.Exec(ctx, `UPDATE sessions SET `+col+` = ? WHERE user_id = ?`, core.Micros(core.Now().Add(-d)), u.ID); err != nil {
				t.Fatal(err)
			}
		}
		past("last_seen_at", 13*time.Hour) // default idle timeout 12h
		gone("idle for 13h", idle)
		gone("idle for 13h", old)

		c, d := session(), session()
		past("expires_at", time.Second) // absolute lifetime over
		gone("past its lifetime", c)
		gone("past its lifetime", d)

		x, y := session(), session()
		if err := s.SetPassword(ctx, u.ID, "a brand new password"); err != nil {
			t.Fatal(err)
		}
		gone("after a password change", x)
		gone("after a password change", y)
		if _, err := s.CheckPassword(ctx, "dana", goodPassword, "192.0.2.11"); err == nil {
			t.Fatal("the old password still works")
		}
	})
}

// TestSuspendedUserCannotSignIn: a suspended user's right password
// starts no session and is told why (a wrong one is still just wrong),
// and the sign-in is recorded as refused; unsuspended, the user signs in.
func TestSuspendedUserCannotSignIn(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	u := newUser(t, e, "erin")
	if _, err := e.Client.Admin.Users.Suspend(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Server.Signin.CheckPassword(ctx, "erin", "wrong password!!", "192.0.2.11"); core.KindOf(err) != core.KindUnauthorized {
		t.Fatalf("a suspended user's wrong password: %v, want it wrong", err)
	}
	f := newFormClient(t, e)
	f.get("/app/signin")
	status, body := f.post("/app/signin", url.Values{"username": {"erin"}, "password": {goodPassword}}, true)
	if status != http.StatusForbidden || !strings.Contains(body, "suspended") {
		t.Fatalf("a suspended user signing in: %d %.300s", status, body)
	}
	for _, c := range f.c.Jar.Cookies(mustURL(t, e.URL)) {
		if c.Name == signin.CookieName {
			t.Fatal("a suspended user's sign-in started a session")
		}
	}
	wantEvents(t, signinEvents(t, e), "sign-in-refused erin")

	if _, err := e.Client.Admin.Users.Unsuspend(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	f.get("/app/signin")
	if status, _ := f.post("/app/signin", url.Values{"username": {"erin"}, "password": {goodPassword}}, true); status != http.StatusSeeOther {
		t.Fatalf("an unsuspended user signing in: %d", status)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
