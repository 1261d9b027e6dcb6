-- Sign-in (internal/signin): password hashes, browser sessions,
-- invitations, login.v1 authorization codes and OIDC sign-in attempts.
-- Secrets are never stored: sessions, invitations, codes and OIDC states
-- are keyed by the SHA-256 of their random value. Timestamps are Unix
-- microseconds.
CREATE TABLE user_passwords (
    user_id TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    hash TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE sessions (
    id_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE invitations (
    token_hash TEXT PRIMARY KEY,
    membership_id TEXT NOT NULL UNIQUE,
    organization_name TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE oauth_codes (
    code_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE oidc_states (
    state_hash TEXT PRIMARY KEY,
    nonce TEXT NOT NULL,
    code_verifier TEXT NOT NULL,
    next_path TEXT NOT NULL,
    invitation TEXT NOT NULL DEFAULT '',
    expires_at BIGINT NOT NULL
);
