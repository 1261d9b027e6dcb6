-- The site administrators' settings (Terraform Enterprise's admin settings
-- API, internal/sitesettings): one row per group ('general', 'smtp').
-- attrs holds, as a JSON object, only the attributes a site admin has set;
-- an attribute not in it takes its value from the server's flags (the
-- per-token rate limit, the SMTP server) or Terrace's default, so that a
-- setting once set replaces its flag and the others go on following theirs.
-- secret is the group's write-only secret (the SMTP password), sealed at
-- rest (internal/seal, purpose site_settings.secret); NULL when none was
-- set. updated_at (Unix microseconds) moves with every change: replicas
-- watch it (the rate limit is kept in memory, not read per request).
CREATE TABLE site_settings (
    id TEXT PRIMARY KEY,
    attrs TEXT NOT NULL DEFAULT '{}',
    secret TEXT,
    updated_at BIGINT NOT NULL
);
-- Both rows exist from the start, so that a change locks its row (FOR
-- UPDATE) even before the first one.
INSERT INTO site_settings (id, attrs, updated_at) VALUES ('general', '{}', 0);
INSERT INTO site_settings (id, attrs, updated_at) VALUES ('smtp', '{}', 0);
