-- The authentication epoch: a counter that every write able to change the
-- principal of a user, team, organization or audit trail token (the token
-- itself, its user, the user's teams and memberships, a team, an
-- organization's settings or name, a token TTL policy) raises in the
-- writing transaction, so that a replica may keep those principals between
-- requests and drop them the moment the counter moves (internal/auth,
-- cache.go). Inserting a token, and a token's last use, change no
-- principal; nor does anything done to run, agent or task result tokens
-- (their principals are not kept), so the runs' own tokens, made and
-- deleted with every run, leave it alone.
--
-- The counter moves to the clock (microseconds since 1970) when that is
-- ahead of it, so that a value is never read twice for different rows: a
-- database restored from a backup under running replicas goes on from the
-- restore's time, past every value they kept a principal under.
--
-- The triggers are deferred to the commit, and a transaction raises the
-- counter once: its row lock is then always the last lock a transaction
-- takes, so two writers can wait for each other there but never deadlock.
CREATE TABLE auth_epoch (id INTEGER PRIMARY KEY CHECK (id = 1), n BIGINT NOT NULL);
INSERT INTO auth_epoch (id, n) VALUES (1, 0);
CREATE FUNCTION auth_epoch_raise() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF current_setting('terrace.auth_epoch_raised', true) IS DISTINCT FROM 'on' THEN UPDATE auth_epoch SET n = GREATEST(n + 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT) WHERE id = 1; PERFORM set_config('terrace.auth_epoch_raised', 'on', true); END IF; RETURN NULL; END; $$;
CREATE CONSTRAINT TRIGGER users_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON users DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_raise();
CREATE CONSTRAINT TRIGGER organizations_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON organizations DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_raise();
CREATE CONSTRAINT TRIGGER teams_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON teams DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_raise();
CREATE CONSTRAINT TRIGGER team_members_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON team_members DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_raise();
CREATE CONSTRAINT TRIGGER organization_memberships_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON organization_memberships DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_raise();
CREATE CONSTRAINT TRIGGER tokens_auth_epoch_update AFTER UPDATE OF kind, subject, hash, expired_at ON tokens DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (OLD.kind IN ('user', 'team', 'organization', 'audit-trails') OR NEW.kind IN ('user', 'team', 'organization', 'audit-trails')) EXECUTE FUNCTION auth_epoch_raise();
CREATE CONSTRAINT TRIGGER tokens_auth_epoch_delete AFTER DELETE ON tokens DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (OLD.kind IN ('user', 'team', 'organization', 'audit-trails')) EXECUTE FUNCTION auth_epoch_raise();
CREATE CONSTRAINT TRIGGER token_ttl_policies_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON token_ttl_policies DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_raise();
