-- Team access grants (internal/authz): what a team may do in one workspace
-- (team-workspaces) or in one project and its workspaces (team-projects).
-- access is the level (read, plan, write, admin, custom; for projects read,
-- write, maintain, admin, custom); perms holds the resolved permissions as
-- one JSON document, so custom grants and fixed levels read the same way.
CREATE TABLE team_workspaces (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    access TEXT NOT NULL,
    perms TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (team_id, workspace_id)
);
CREATE INDEX team_workspaces_workspace ON team_workspaces (workspace_id);

CREATE TABLE team_projects (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    access TEXT NOT NULL,
    perms TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (team_id, project_id)
);
CREATE INDEX team_projects_project ON team_projects (project_id);

-- Organization token TTL policies (internal/authz): the longest a token of
-- each type may live in an organization. A missing row is the default
-- (about two years); authentication refuses tokens older than their policy.
CREATE TABLE token_ttl_policies (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    token_type TEXT NOT NULL,
    max_ttl_ms BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, token_type)
);
