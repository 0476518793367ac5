-- 10,000 couples with 3 members each (owner, partner, viewer). Ids are derived from numbers, so the pgbench
-- scripts can name any member without a lookup: couple c is md5('c' || c)::uuid, its k-th member (k = 1..3)
-- is md5('u' || (3 * (c - 1) + k))::uuid.
INSERT INTO users (id, email)
SELECT md5('u' || n)::uuid, 'bench-' || n || '@example.com' FROM generate_series(1, 30000) AS n;
INSERT INTO couples (id, name)
SELECT md5('c' || c)::uuid, 'Couple ' || c FROM generate_series(1, 10000) AS c;
INSERT INTO memberships (couple_id, user_id, role)
SELECT md5('c' || c)::uuid, md5('u' || (3 * (c - 1) + k))::uuid, (ARRAY['owner', 'partner', 'viewer'])[k]
FROM generate_series(1, 10000) AS c, generate_series(1, 3) AS k;
ANALYZE;
