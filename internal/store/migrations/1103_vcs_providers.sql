-- VCS providers (internal/vcs): an organization's OAuth clients (HCP
-- Terraform's name for a connection to a VCS provider such as GitHub or
-- Gitea) and their OAuth tokens, the credential Terrace reads
-- repositories and registers webhooks with.
-- secret, private_key, token and ssh_key are sealed at rest and never
-- returned by the API (key and rsa_public_key are public halves);
-- secret, private_key and ssh_key are NULL when not given.
-- name is NULL when the client was given none (go-tfe's *string).
-- organization_scoped: every workspace of the organization may use the
-- client; otherwise only those of the projects in oauth_client_projects.
CREATE TABLE oauth_clients (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    name TEXT,
    service_provider TEXT NOT NULL,
    api_url TEXT NOT NULL,
    http_url TEXT NOT NULL,
    key TEXT NOT NULL DEFAULT '',
    secret TEXT,
    rsa_public_key TEXT NOT NULL DEFAULT '',
    private_key TEXT,
    organization_scoped BOOLEAN NOT NULL DEFAULT TRUE,
    created_at BIGINT NOT NULL
);
CREATE INDEX oauth_clients_organization ON oauth_clients (organization_name, created_at);

CREATE TABLE oauth_client_projects (
    oauth_client_id TEXT NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    PRIMARY KEY (oauth_client_id, project_id)
);
CREATE INDEX oauth_client_projects_project ON oauth_client_projects (project_id);

CREATE TABLE oauth_tokens (
    id TEXT PRIMARY KEY,
    oauth_client_id TEXT NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    token TEXT NOT NULL,
    ssh_key TEXT,
    service_provider_user TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
CREATE INDEX oauth_tokens_client ON oauth_tokens (oauth_client_id, created_at);
