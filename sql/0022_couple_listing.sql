-- `rbac couples list` pages through couples oldest first, by (created_at, id): without an index in that order
-- each page read and sorted every couple, and listing them all took a page's time once for every page.
CREATE INDEX couples_by_creation ON couples (created_at, id);
