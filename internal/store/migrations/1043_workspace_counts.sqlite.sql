-- The number of each organization's workspaces, kept as workspaces are
-- created and deleted, so that the total of an unfiltered workspace list
-- (an owner's or a site admin's: every workspace of the organization)
-- does not count them all for every page (internal/workspace, ListPage).
-- A deletion only lowers an existing row: the organization's own deletion
-- cascades to its counter.
CREATE TABLE workspace_counts (
    organization_name TEXT PRIMARY KEY REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    workspaces BIGINT NOT NULL
);
INSERT INTO workspace_counts (organization_name, workspaces) SELECT organization_name, COUNT(*) FROM workspaces GROUP BY organization_name;
CREATE TRIGGER workspaces_count_insert AFTER INSERT ON workspaces BEGIN INSERT INTO workspace_counts (organization_name, workspaces) VALUES (NEW.organization_name, 1) ON CONFLICT (organization_name) DO UPDATE SET workspaces = workspaces + 1; END;
CREATE TRIGGER workspaces_count_delete AFTER DELETE ON workspaces BEGIN UPDATE workspace_counts SET workspaces = workspaces - 1 WHERE organization_name = OLD.organization_name; END;
