-- Connecting a VCS provider through its OAuth authorization flow
-- (internal/vcs flow.go). A token the flow gave may expire: expires_at
-- (NULL: it does not) and its refresh_token (sealed, NULL when the host
-- gave none) renew it.
ALTER TABLE oauth_tokens ADD COLUMN refresh_token TEXT;
ALTER TABLE oauth_tokens ADD COLUMN expires_at BIGINT;

-- A connection under way: keyed by the SHA-256 of the OAuth state the
-- browser carries, bound to the client and to the user who started it,
-- with the PKCE verifier sealed. Deleted by its callback (first use) or
-- swept by the next connection started once expired.
CREATE TABLE vcs_oauth_states (
    state_hash TEXT PRIMARY KEY,
    oauth_client_id TEXT NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_verifier TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX vcs_oauth_states_client ON vcs_oauth_states (oauth_client_id);
CREATE INDEX vcs_oauth_states_expires ON vcs_oauth_states (expires_at);
