-- The keys Terrace signs workload identity tokens with (internal/idtoken):
-- RS256 keys, one made on first use. id is the key's RFC 7638 thumbprint,
-- the kid of the tokens it signs; private_key its PKCS#1 DER, base64,
-- sealed at rest (internal/seal, purpose workload_identity_keys.private_key).
-- The public key set (/.well-known/jwks) lists every row; tokens are signed
-- with the newest (created_at: Unix microseconds).
CREATE TABLE workload_identity_keys (
    id TEXT PRIMARY KEY,
    private_key TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
