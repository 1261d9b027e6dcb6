-- Request forwarding through agent pools (internal/forward): a run task
-- with an agent pool (run_tasks.agent_pool_id, '' for none) has its
-- requests sent by an agent of that pool, from the agent's network, not by
-- the server. agent_forwards holds each request until an agent claims it
-- and reports the service's answer: url, header (JSON object) and body
-- (sealed at rest, purpose agent_forwards.body: it carries the run task's
-- access token); status pending → claimed → done, agent_id the claimant,
-- response_status the service's HTTP status (0 when the agent could not
-- reach it; error says why). expires_at (Unix microseconds): the sender
-- gave up; an expired row is never claimed, and the sender deletes it.
ALTER TABLE run_tasks ADD COLUMN agent_pool_id TEXT NOT NULL DEFAULT '';

CREATE TABLE agent_forwards (
    id TEXT PRIMARY KEY,
    pool_id TEXT NOT NULL REFERENCES agent_pools (id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    header TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    response_status INTEGER NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX agent_forwards_pending ON agent_forwards (pool_id, status, created_at);
