-- A stack's deployment workspaces are marked as the stack's in their
-- settings document (workspace.Settings.ManagedBy, "managed-by"): people
-- read them, only the stack's deployment runs change them (the
-- authorization model). Marked from now on when a deployment run prepares
-- its workspace; here, the workspaces deployments already have. The
-- document is a JSON object with keys that are never omitted, so the key
-- goes in front of its first.
UPDATE workspaces
SET attrs = '{"managed-by":"' || (SELECT MIN(d.stack_id) FROM stack_deployments d WHERE d.workspace_id = workspaces.id) || '",' || substr(attrs, 2)
WHERE id IN (SELECT workspace_id FROM stack_deployments WHERE workspace_id <> '')
  AND attrs LIKE '{"%' AND attrs NOT LIKE '%"managed-by"%';
