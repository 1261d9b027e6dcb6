-- The number of each organization's workspaces, kept as workspaces are
-- created and deleted, so that the total of an unfiltered workspace list
-- (an owner's or a site admin's: every workspace of the organization)
-- does not count them all for every page (internal/workspace, ListPage).
-- The triggers are deferred to the commit, as auth_epoch's: the counter's
-- row lock is taken last, so concurrent creations in one organization
-- queue there but never deadlock through it. A deletion only lowers an
-- existing row: the organization's own deletion cascades to its counter.
CREATE TABLE workspace_counts (
    organization_name TEXT PRIMARY KEY REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    workspaces BIGINT NOT NULL
);
INSERT INTO workspace_counts (organization_name, workspaces) SELECT organization_name, COUNT(*) FROM workspaces GROUP BY organization_name;
CREATE FUNCTION workspace_counts_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF TG_OP = 'INSERT' THEN INSERT INTO workspace_counts (organization_name, workspaces) SELECT NEW.organization_name, 1 WHERE EXISTS (SELECT 1 FROM organizations WHERE name = NEW.organization_name) ON CONFLICT (organization_name) DO UPDATE SET workspaces = workspace_counts.workspaces + 1; ELSE UPDATE workspace_counts SET workspaces = workspaces - 1 WHERE organization_name = OLD.organization_name; END IF; RETURN NULL; END; $$;
CREATE CONSTRAINT TRIGGER workspaces_count AFTER INSERT OR DELETE ON workspaces DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION workspace_counts_change();
