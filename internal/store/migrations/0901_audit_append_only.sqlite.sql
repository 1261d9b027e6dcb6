-- Audit events are append-only: no statement may change one. (Retention
-- deletes old events; nothing else deletes.)
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
