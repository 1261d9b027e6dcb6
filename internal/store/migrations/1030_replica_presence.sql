-- Replicas of one database say they are alive, and with which signing
-- secret (a fingerprint, never the secret): a replica that starts with a
-- secret other than a live replica's would sign URLs the others refuse, so
-- it refuses to start instead (internal/server/presence.go).
CREATE TABLE replica_presence (
    replica TEXT PRIMARY KEY,
    secret_fingerprint TEXT NOT NULL,
    seen_at BIGINT NOT NULL
);
