-- Agents (internal/agent, docs/design/agents.md). A job of an agent-mode
-- workspace carries its agent pool: only that pool's agents claim it; the
-- server's own runner claims the jobs with no pool ('').
ALTER TABLE jobs ADD COLUMN agent_pool_id TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_pool_status ON jobs (agent_pool_id, status, created_at);

-- One row per registered `terrace agent` process. status is what the
-- agent last reported (idle, busy, exited, errored); an agent silent for
-- longer than the heartbeat timeout reads as unknown.
CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    pool_id TEXT NOT NULL REFERENCES agent_pools (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    ip_address TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    last_ping_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX agents_pool ON agents (pool_id, created_at);

-- Which workspaces and projects a pool that is not organization-scoped
-- serves (allowed), and workspaces it never serves (excluded).
CREATE TABLE agent_pool_scopes (
    pool_id TEXT NOT NULL REFERENCES agent_pools (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target_id TEXT NOT NULL,
    PRIMARY KEY (pool_id, kind, target_id)
);
