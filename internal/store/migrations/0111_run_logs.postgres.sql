-- Log chunks of a phase while it runs; folded into one blob when it ends.
CREATE TABLE log_chunks (
    log_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (log_id, seq)
);
