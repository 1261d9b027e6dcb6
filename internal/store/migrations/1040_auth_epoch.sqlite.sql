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
CREATE TABLE auth_epoch (id INTEGER PRIMARY KEY CHECK (id = 1), n BIGINT NOT NULL);
INSERT INTO auth_epoch (id, n) VALUES (1, 0);
-- How the counter is raised, in one place (PostgreSQL's auth_epoch_raise
-- function): the tables' triggers insert into this view.
CREATE VIEW auth_epoch_raise (x) AS SELECT 1;
CREATE TRIGGER auth_epoch_raise INSTEAD OF INSERT ON auth_epoch_raise BEGIN UPDATE auth_epoch SET n = max(n + 1, CAST(unixepoch('subsec') * 1000000 AS INTEGER)) WHERE id = 1; END;
CREATE TRIGGER users_auth_epoch_insert AFTER INSERT ON users BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER users_auth_epoch_update AFTER UPDATE ON users BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER users_auth_epoch_delete AFTER DELETE ON users BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER organizations_auth_epoch_insert AFTER INSERT ON organizations BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER organizations_auth_epoch_update AFTER UPDATE ON organizations BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER organizations_auth_epoch_delete AFTER DELETE ON organizations BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER teams_auth_epoch_insert AFTER INSERT ON teams BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER teams_auth_epoch_update AFTER UPDATE ON teams BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER teams_auth_epoch_delete AFTER DELETE ON teams BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER team_members_auth_epoch_insert AFTER INSERT ON team_members BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER team_members_auth_epoch_update AFTER UPDATE ON team_members BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER team_members_auth_epoch_delete AFTER DELETE ON team_members BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER organization_memberships_auth_epoch_insert AFTER INSERT ON organization_memberships BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER organization_memberships_auth_epoch_update AFTER UPDATE ON organization_memberships BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER organization_memberships_auth_epoch_delete AFTER DELETE ON organization_memberships BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER tokens_auth_epoch_update AFTER UPDATE OF kind, subject, hash, expired_at ON tokens WHEN OLD.kind IN ('user', 'team', 'organization', 'audit-trails') OR NEW.kind IN ('user', 'team', 'organization', 'audit-trails') BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER tokens_auth_epoch_delete AFTER DELETE ON tokens WHEN OLD.kind IN ('user', 'team', 'organization', 'audit-trails') BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER token_ttl_policies_auth_epoch_insert AFTER INSERT ON token_ttl_policies BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER token_ttl_policies_auth_epoch_update AFTER UPDATE ON token_ttl_policies BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
CREATE TRIGGER token_ttl_policies_auth_epoch_delete AFTER DELETE ON token_ttl_policies BEGIN INSERT INTO auth_epoch_raise (x) VALUES (1); END;
