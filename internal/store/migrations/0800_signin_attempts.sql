-- Sign-in attempt counts (internal/signin), shared by every replica on
-- one store: one row per limited key (the SHA-256 of "account:<name>" or
-- "address:<ip>") and fixed window (its start, Unix microseconds). The
-- limiter weighs the previous window's count by how much of it still
-- overlaps the sliding window; older rows are swept as attempts come.
CREATE TABLE signin_attempts (
    key_hash TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    PRIMARY KEY (key_hash, window_start)
);
CREATE INDEX signin_attempts_window ON signin_attempts (window_start);
