-- Organization memberships: a user belongs to an organization through a
-- membership (created when the organization is created, when an owner
-- invites an email address, or when a user is added to one of its teams).
-- status: invited | active.
CREATE TABLE organization_memberships (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (organization_name, user_id)
);
CREATE INDEX organization_memberships_user ON organization_memberships (user_id);

-- legacy marks the single regenerable token of a team or organization (the
-- one POST .../authentication-token replaces); other team tokens carry a
-- description and may be many.
ALTER TABLE tokens ADD COLUMN legacy BOOLEAN NOT NULL DEFAULT FALSE;
