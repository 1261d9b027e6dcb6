package vcs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/oauth2"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcshost"
)

// Connecting a provider through its OAuth authorization flow (HCP
// Terraform's "connect" of a VCS provider): the organization registers an
// OAuth application on the host, whose redirect URI is the client's
// CallbackURL, and gives the client its key (the application's client ID)
// and secret. A person who manages the organization's VCS settings opens
// ConnectPath in a browser: the host asks them to authorize Terrace and
// sends them back to the callback with a code, which Terrace redeems
// (with the PKCE verifier it kept) for the client's token. A token the
// host lets expire is renewed with its refresh token when it is used.

// ConnectPrefix is where the browser side of the flow lives; the pages
// (internal/ui) serve ConnectPrefix+"{id}/connect" and "{id}/callback".
const ConnectPrefix = "/app/vcs/oauth-clients/"

// RefreshColumn is a flow token's refresh token, sealed.
var RefreshColumn = seal.Column{Table: "oauth_tokens", IDColumn: "id", Column: "refresh_token", Purpose: "oauth_tokens.refresh_token"}

// stateVerifierPurpose seals the PKCE verifier of a connection under way:
// whoever reads the store cannot redeem the code the host hands out.
const stateVerifierPurpose = "vcs_oauth_states.code_verifier"

// stateLifetime is how long an authorization at the host may take.
const stateLifetime = 10 * time.Minute

// renewBefore is how long before its expiry a token is renewed.
const renewBefore = 2 * time.Minute

// Flows reports whether Terrace runs the provider's OAuth authorization
// flow: the hosts it reaches (GitHub, GitHub Enterprise, Gitea, Forgejo)
// all serve GitHub's /login/oauth endpoints.
func (p Provider) Flows() bool {
	return p == GitHub || p == GitHubEnterprise || p == Gitea || p == Forgejo
}

// scopes are what the token needs: reading repositories, registering
// webhooks and setting commit statuses, and the user's name. (Gitea
// grants every scope unless told to honour the ones asked for.)
func (p Provider) scopes() []string {
	if p == Gitea || p == Forgejo {
		return []string{"write:repository", "read:user"}
	}
	return []string{"repo", "read:user"}
}

// CallbackURL is the redirect URI to register with the host's OAuth
// application; "" for a provider whose flow Terrace does not run.
func (s *Service) CallbackURL(c *Client) string {
	if !c.Provider.Flows() {
		return ""
	}
	return s.baseURL + ConnectPrefix + c.ID + "/callback"
}

// ConnectPath is the path on this server a browser opens to connect the
// client; "" for a provider whose flow Terrace does not run.
func ConnectPath(c *Client) string {
	if !c.Provider.Flows() {
		return ""
	}
	return ConnectPrefix + c.ID + "/connect"
}

// oauthConfig is the client's OAuth application; its secret is read from
// the store (sealed) by the caller.
func (s *Service) oauthConfig(c *Client, secret string) *oauth2.Config {
	return &oauth2.Config{ClientID: c.Key, ClientSecret: secret, RedirectURL: s.CallbackURL(c), Scopes: c.Provider.scopes(),
		Endpoint: oauth2.Endpoint{AuthURL: c.HTTPURL + "/login/oauth/authorize", TokenURL: c.HTTPURL + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams}}
}

// clientSecret opens the sealed secret of client id ("" when it has none).
func (s *Service) clientSecret(ctx context.Context, q store.Q, id string) (string, error) {
	var sealed *string
	if err := q.QueryRow(ctx, `SELECT secret FROM oauth_clients WHERE id = ?`, id).Scan(&sealed); err != nil {
		if store.IsNoRows(err) {
			return "", core.NotFound("OAuth client %q not found", id)
		}
		return "", err
	}
	if sealed == nil {
		return "", nil
	}
	return s.Keys.OpenString(SecretColumn.Purpose, *sealed)
}

// connector returns the person connecting: the flow is a browser's, the
// user's own (a team or organization token has nobody to ask).
func connector(ctx context.Context) (string, error) {
	p := auth.FromContext(ctx)
	if p == nil || p.Kind != auth.KindUser || p.UserID == "" {
		return "", core.Forbidden("a VCS provider is connected by a person signed in to Terrace, in a browser")
	}
	return p.UserID, nil
}

func stateHash(state string) string {
	h := sha256.Sum256([]byte(state))
	return hex.EncodeToString(h[:])
}

// StartConnect begins connecting client id for the caller, who must manage
// the organization's VCS providers, and returns the host's authorization
// URL to send the browser to.
func (s *Service) StartConnect(ctx context.Context, id string) (string, error) {
	user, err := connector(ctx)
	if err != nil {
		return "", err
	}
	c, err := s.GetClient(ctx, id)
	if err != nil {
		return "", err
	}
	if err := requireManage(ctx, c.Organization); err != nil {
		return "", err
	}
	if !c.Provider.Flows() {
		return "", core.Invalid("Terrace does not run the OAuth authorization flow of %s: give the client a personal access token (oauth-token-string)", c.Provider.DisplayName())
	}
	secret, err := s.clientSecret(ctx, s.db, c.ID)
	if err != nil {
		return "", err
	}
	if c.Key == "" || secret == "" {
		return "", core.Invalid("this VCS provider has no OAuth application: set its key (the application's client ID) and secret, registered with the callback URL %s", s.CallbackURL(c))
	}
	// 43 characters: PKCE's shortest verifier, about 250 bits.
	state, verifier := core.RandomString(43), core.RandomString(43)
	sealed, err := s.Keys.SealString(stateVerifierPurpose, verifier)
	if err != nil {
		return "", err
	}
	now := core.Now()
	if _, err := s.db.Exec(ctx, `INSERT INTO vcs_oauth_states (state_hash, oauth_client_id, user_id, code_verifier, expires_at) VALUES (?, ?, ?, ?, ?)`,
		stateHash(state), c.ID, user, sealed, core.Micros(now.Add(stateLifetime))); err != nil {
		return "", fmt.Errorf("keeping the connection's state: %w", err)
	}
	// Connections nobody finished: swept by the next one started.
	if _, err := s.db.Exec(ctx, `DELETE FROM vcs_oauth_states WHERE expires_at < ?`, core.Micros(now)); err != nil {
		s.logger.Warn("sweeping expired VCS connections", "error", err)
	}
	return s.oauthConfig(c, secret).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), nil
}

// unknownState is the answer to a callback whose state is not one this
// server handed to the caller (or has expired): the same whatever the
// reason, so that it tells nothing of other people's connections.
func unknownState() error {
	return core.Invalid("this connection is unknown, was started by someone else, or took longer than %s: start it again", stateLifetime)
}

// takeState consumes the state of a connection of client id: it must be
// one the caller started, not expired. It returns the PKCE verifier.
func (s *Service) takeState(ctx context.Context, id, state string) (string, error) {
	user, err := connector(ctx)
	if err != nil {
		return "", err
	}
	if state == "" {
		return "", unknownState()
	}
	var owner, sealed string
	var expires int64
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		err := tx.QueryRow(ctx, `DELETE FROM vcs_oauth_states WHERE state_hash = ? AND oauth_client_id = ? RETURNING user_id, code_verifier, expires_at`,
			stateHash(state), id).Scan(&owner, &sealed, &expires)
		if store.IsNoRows(err) {
			return unknownState()
		}
		return err
	})
	if err != nil {
		return "", err
	}
	if owner != user || core.Now().After(core.FromMicros(expires)) {
		return "", unknownState()
	}
	return s.Keys.OpenString(stateVerifierPurpose, sealed)
}

// DeclinedConnect ends the connection of client id the caller started
// (state) that the host answered with an error (the person declined):
// nothing changes, and the error says what the host said.
func (s *Service) DeclinedConnect(ctx context.Context, id, state, code, description string) error {
	if _, err := s.takeState(ctx, id, state); err != nil {
		return err
	}
	c, err := s.GetClient(ctx, id)
	if err != nil {
		return err
	}
	return core.Invalid("%s did not authorize Terrace (%s); the VCS provider is unchanged", c.Provider.DisplayName(), cut(strings.TrimSpace(code+" "+description), 300))
}

// FinishConnect ends the connection of client id the caller started
// (state), redeeming the host's code for the client's token: it replaces
// the token of a client that has one (its ID, and so every repository
// connected with it, stays) and makes one otherwise.
func (s *Service) FinishConnect(ctx context.Context, id, state, code string) (*Token, error) {
	verifier, err := s.takeState(ctx, id, state)
	if err != nil {
		return nil, err
	}
	// Asked again: the caller's rights may have changed while they were
	// at the host.
	c, err := s.GetClient(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := requireManage(ctx, c.Organization); err != nil {
		return nil, err
	}
	if code == "" {
		return nil, core.Invalid("%s sent no authorization code back", c.Provider.DisplayName())
	}
	secret, err := s.clientSecret(ctx, s.db, c.ID)
	if err != nil {
		return nil, err
	}
	tok, err := s.oauthConfig(c, secret).Exchange(context.WithValue(ctx, oauth2.HTTPClient, s.client), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, core.Invalid("%s did not give a token for the code: %s", c.Provider.DisplayName(), oauthError(err))
	}
	h, err := s.host(&Credential{Provider: c.Provider, APIURL: c.APIURL, HTTPURL: c.HTTPURL, Token: tok.AccessToken})
	if err != nil {
		return nil, err
	}
	login, err := h.User(ctx)
	if err != nil {
		return nil, core.Invalid("%s gave a token that does not read its own user: %v", c.Provider.DisplayName(), err)
	}
	var out *Token
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		c, err := s.loadClient(ctx, tx, id, true)
		if err != nil {
			return err
		}
		tid, err := s.setToken(ctx, tx, c, tok, login)
		if err != nil {
			return err
		}
		out, err = s.loadToken(ctx, tx, tid, false)
		return err
	})
	return out, err
}

// setToken makes tok client c's token, as the host's user login: the
// first token of a client that has none, or the new value of the one it
// has (same ID: everything connected through it stays connected). A token
// without refresh token or expiry (a string given through the API) clears
// those of the token it replaces. It returns the token's ID and records it
// in c.Tokens.
func (s *Service) setToken(ctx context.Context, tx *store.Tx, c *Client, tok *oauth2.Token, login string) (string, error) {
	access, err := s.Keys.SealString(TokenColumn.Purpose, tok.AccessToken)
	if err != nil {
		return "", err
	}
	refresh, err := s.sealRefresh(tok)
	if err != nil {
		return "", err
	}
	if len(c.Tokens) == 0 {
		id := core.NewID(PrefixToken)
		if _, err := tx.Exec(ctx, `INSERT INTO oauth_tokens (id, oauth_client_id, token, refresh_token, expires_at, service_provider_user, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, id, c.ID, access, refresh, expiry(tok), login, core.Micros(core.Now())); err != nil {
			return "", redact(err)
		}
		c.Tokens = []string{id}
		return id, nil
	}
	_, err = tx.Exec(ctx, `UPDATE oauth_tokens SET token = ?, refresh_token = ?, expires_at = ?, service_provider_user = ? WHERE oauth_client_id = ?`,
		access, refresh, expiry(tok), login, c.ID)
	return c.Tokens[0], redact(err)
}

// sealRefresh seals tok's refresh token (nil, SQL NULL, when it has none).
func (s *Service) sealRefresh(tok *oauth2.Token) (any, error) {
	if tok.RefreshToken == "" {
		return nil, nil
	}
	return s.Keys.SealString(RefreshColumn.Purpose, tok.RefreshToken)
}

// expiry is tok's expiry in the store (nil: it does not expire).
func expiry(tok *oauth2.Token) any {
	if tok.Expiry.IsZero() {
		return nil
	}
	return core.Micros(tok.Expiry)
}

// oauthError is what a host said when it refused a code or a refresh
// token, without the request (which carried the client's secret).
func oauthError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return strings.TrimSpace(re.ErrorCode + " " + re.ErrorDescription)
		}
		if re.Response != nil {
			return re.Response.Status
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return vcshost.Unreachable(err)
	}
	return err.Error()
}

// renew renews the token tokenID (it expires within renewBefore, or has)
// with its refresh token, and returns the sealed access token to use. It
// reads the row again once its turn comes: renewals on this replica take
// turns, and one that went before may have renewed it already; one on
// another replica is seen by the update that finds its token changed.
func (s *Service) renew(ctx context.Context, tokenID string) (string, error) {
	s.renewMu.Lock()
	defer s.renewMu.Unlock()
	var clientID, sealed string
	var refresh *string
	var expires *int64
	err := s.db.QueryRow(ctx, `SELECT oauth_client_id, token, refresh_token, expires_at FROM oauth_tokens WHERE id = ?`, tokenID).
		Scan(&clientID, &sealed, &refresh, &expires)
	if store.IsNoRows(err) {
		return "", core.NotFound("OAuth token %q not found", tokenID)
	}
	if err != nil {
		return "", err
	}
	if expires == nil || !core.Now().Add(renewBefore).After(core.FromMicros(*expires)) {
		return sealed, nil // renewed meanwhile
	}
	c, err := s.loadClient(ctx, s.db, clientID, false)
	if err != nil {
		return "", err
	}
	if refresh == nil {
		return "", core.Invalid("the OAuth token of VCS provider %s has expired and %s gave no refresh token: connect the provider again", c.ID, c.Provider.DisplayName())
	}
	rt, err := s.Keys.OpenString(RefreshColumn.Purpose, *refresh)
	if err != nil {
		return "", err
	}
	secret, err := s.clientSecret(ctx, s.db, c.ID)
	if err != nil {
		return "", err
	}
	tok, err := s.refresh(ctx, c, secret, rt)
	if err != nil {
		// Another replica may have renewed it with the same refresh token,
		// which the host then no longer takes.
		var now string
		if rerr := s.db.QueryRow(ctx, `SELECT token FROM oauth_tokens WHERE id = ?`, tokenID).Scan(&now); rerr == nil && now != sealed {
			return now, nil
		}
		s.logger.Warn("renewing a VCS provider's OAuth token", "oauth_client", c.ID, "oauth_token", tokenID, "error", oauthError(err))
		return "", core.Invalid("the OAuth token of VCS provider %s has expired and %s refused to renew it (%s): connect the provider again", c.ID, c.Provider.DisplayName(), oauthError(err))
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = rt
	}
	access, err := s.Keys.SealString(TokenColumn.Purpose, tok.AccessToken)
	if err != nil {
		return "", err
	}
	newRefresh, err := s.sealRefresh(tok)
	if err != nil {
		return "", err
	}
	res, err := s.db.Exec(ctx, `UPDATE oauth_tokens SET token = ?, refresh_token = ?, expires_at = ? WHERE id = ? AND token = ?`,
		access, newRefresh, expiry(tok), tokenID, sealed)
	if err != nil {
		return "", redact(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// Renewed by another replica meanwhile (or deleted): its answer
		// is the one kept.
		if err := s.db.QueryRow(ctx, `SELECT token FROM oauth_tokens WHERE id = ?`, tokenID).Scan(&sealed); err != nil {
			if store.IsNoRows(err) {
				return "", core.NotFound("OAuth token %q not found", tokenID)
			}
			return "", err
		}
		return sealed, nil
	}
	return access, nil
}

// refresh asks client c's host for a new token with refresh token rt.
func (s *Service) refresh(ctx context.Context, c *Client, secret, rt string) (*oauth2.Token, error) {
	old := &oauth2.Token{RefreshToken: rt, Expiry: core.Now().Add(-time.Second)}
	return s.oauthConfig(c, secret).TokenSource(context.WithValue(ctx, oauth2.HTTPClient, s.client), old).Token()
}

// unhookHost is the host as the credential an unhook item sealed reaches
// it: the token as it was, or, when it has expired (or is about to), the
// one its refresh token gets from the host now. Nothing keeps the renewed
// token (its row is gone): should the removal be retried after a host
// that replaces refresh tokens on use gave this one, the retry's renewal
// is refused, and the item fails with the host's answer.
func (s *Service) unhookHost(ctx context.Context, sealed string) (*vcshost.Host, error) {
	plain, err := s.Keys.OpenString(unhookPurpose, sealed)
	if err != nil {
		return nil, outbox.Permanent(err)
	}
	var c sealedCredential
	if err := json.Unmarshal([]byte(plain), &c); err != nil {
		return nil, outbox.Permanent(fmt.Errorf("decoding an unhook's credential: %w", err))
	}
	token := c.Token
	if c.Refresh != "" && core.Now().Add(renewBefore).After(core.FromMicros(c.Expires)) {
		client := &Client{Provider: c.Provider, HTTPURL: c.HTTPURL, Key: c.ClientKey}
		tok, err := s.refresh(ctx, client, c.ClientSecret, c.Refresh)
		if err != nil {
			return nil, outbox.Permanent(fmt.Errorf("the OAuth token of a deleted %s provider had expired and the host refused to renew it (%s)",
				c.Provider.DisplayName(), oauthError(err)))
		}
		token = tok.AccessToken
	}
	return s.host(&Credential{Provider: c.Provider, APIURL: c.APIURL, HTTPURL: c.HTTPURL, Token: token})
}

// cut is s cut to n bytes at a rune boundary, marked when cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
