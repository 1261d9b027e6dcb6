-- A suspended user keeps their account, but none of their tokens or
-- sessions is accepted (a site admin's decision: the admin users API). A
-- column, not attrs, because every request's authentication reads it
-- (internal/auth's one query); an update of users raises the
-- authentication epoch (migration 1040), so a suspension counts on the
-- very next request on every replica.
ALTER TABLE users ADD COLUMN is_suspended BOOLEAN NOT NULL DEFAULT FALSE;
