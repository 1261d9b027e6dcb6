-- The site administrator's list of every workspace pages in the store,
-- across organizations (internal/workspace AdminListPage): by name, read
-- from an index range in list order instead of sorting the whole site for
-- each page.
CREATE INDEX workspaces_admin_list ON workspaces (name, organization_name);
