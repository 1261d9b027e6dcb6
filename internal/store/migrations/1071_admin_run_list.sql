-- The site administrator's list of every run pages in the store, across
-- organizations (internal/run AdminListPage): newest first, read from an
-- index range in list order instead of sorting the site's whole history
-- for each page.
CREATE INDEX runs_admin_list ON runs (assessment, created_at, id);
