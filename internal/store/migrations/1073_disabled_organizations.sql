-- A disabled organization is closed to its members, teams and tokens (a
-- site admin's decision: the admin organizations API). A column, not
-- attrs, because every request's authentication reads it (internal/auth's
-- one query); an update of organizations raises the authentication epoch
-- (migration 1040), so it counts on the very next request on every
-- replica.
ALTER TABLE organizations ADD COLUMN is_disabled BOOLEAN NOT NULL DEFAULT FALSE;
