-- The two lookups that every check answered from the database makes for each (couple, user) pair, the couple
-- by id and the user's membership, through hash indexes: one bucket page each, where a B-tree descends to a
-- leaf and searches it. At a million couples those pages are spread over hundreds of megabytes that no CPU
-- cache holds (docs/decisions/0010). The primary keys stay B-trees: they enforce uniqueness.
CREATE INDEX couples_id_hash ON couples USING hash (id);
DROP INDEX memberships_user_id_idx;
CREATE INDEX memberships_user_id_idx ON memberships USING hash (user_id);
