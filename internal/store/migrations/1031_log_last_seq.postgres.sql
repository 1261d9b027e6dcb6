-- A running log's last sequence number, kept on its first chunk (the STX
-- row, seq 0): an append on PostgreSQL takes the next number from that
-- row and inserts its chunk in one statement, serialized on the row's lock
-- (internal/run AppendLog). Open logs get the number they have reached.
ALTER TABLE log_chunks ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
UPDATE log_chunks SET last_seq = (SELECT MAX(c.seq) FROM log_chunks c WHERE c.log_id = log_chunks.log_id) WHERE seq = 0;
