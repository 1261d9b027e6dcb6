-- Lists select their page in the store (issue 16): with the order's
-- columns and the tie-break in an index, a page of an organization's
-- memberships or projects is read from the index's range in order,
-- instead of sorting every row of the organization for each page.
CREATE INDEX organization_memberships_list ON organization_memberships (organization_name, created_at, id);
CREATE INDEX projects_list ON projects (organization_name, created_at, id);
