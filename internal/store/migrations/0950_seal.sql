-- Encryption at rest (internal/seal, docs/design/storage.md). Data keys seal
-- values and blobs with AES-GCM; each is stored wrapped (AES-GCM) by the
-- key-encryption key, whose fingerprint is kek_id so that starting with a
-- different key is a clear error. wrapped is base64.
CREATE TABLE seal_data_keys (
    id TEXT PRIMARY KEY,
    wrapped TEXT NOT NULL,
    kek_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- One-off conversions done at start (sealing rows and blobs written before
-- encryption at rest existed).
CREATE TABLE seal_migrations (
    name TEXT PRIMARY KEY,
    done_at BIGINT NOT NULL
);
