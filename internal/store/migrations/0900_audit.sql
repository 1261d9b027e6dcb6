-- The audit trail (internal/audit). Events name their organization by ID
-- and name as plain text, with no foreign key: an organization's trail
-- outlives a rename and the organization itself, until retention prunes it.
-- organization_id is '' for site events (creating an organization, site
-- administration, a user's own account).
CREATE TABLE audit_events (
    id TEXT PRIMARY KEY,
    occurred_at BIGINT NOT NULL,
    organization_id TEXT NOT NULL,
    organization_name TEXT NOT NULL,
    actor_kind TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    actor_name TEXT NOT NULL,
    token_id TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    action TEXT NOT NULL,
    meta TEXT NOT NULL,
    request_id TEXT NOT NULL,
    client_ip TEXT NOT NULL,
    user_agent TEXT NOT NULL
);
CREATE INDEX audit_events_org_time ON audit_events (organization_id, occurred_at, id);
CREATE INDEX audit_events_time ON audit_events (occurred_at);

-- An organization's audit configuration; no row means the defaults
-- (audit trails on since the organization was created).
CREATE TABLE audit_configurations (
    organization_id TEXT PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    trails_enabled BOOLEAN NOT NULL,
    trails_enabled_at BIGINT,
    trails_disabled_at BIGINT,
    updated_at BIGINT NOT NULL
);
