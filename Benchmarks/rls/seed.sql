-- 100 couples with 3 members each (owner, partner, viewer) and 1,000 expenses each; ids derived from numbers
-- as in Benchmarks/permissions/seed.sql: couple c is md5('c' || c)::uuid, its owner md5('u' || (3 * c - 2))::uuid.
-- Two login roles read them: bench_app, a member of rbac_app (row-level security applies), and bench_owner,
-- with BYPASSRLS and the same SELECT (the baseline).
SET session_replication_role = replica;
INSERT INTO users (id, email)
SELECT md5('u' || n)::uuid, 'bench-' || n || '@example.com' FROM generate_series(1, 300) AS n;
INSERT INTO couples (id, name)
SELECT md5('c' || c)::uuid, 'Couple ' || c FROM generate_series(1, 100) AS c;
INSERT INTO memberships (couple_id, user_id, role)
SELECT md5('c' || c)::uuid, md5('u' || (3 * c - 3 + k))::uuid, (ARRAY['owner', 'partner', 'viewer'])[k]
FROM generate_series(1, 100) AS c, generate_series(1, 3) AS k;
INSERT INTO expenses (couple_id, id, name, amount)
SELECT md5('c' || c)::uuid, md5('e' || c || '.' || n)::uuid, 'expense ' || n, n
FROM generate_series(1, 100) AS c, generate_series(1, 1000) AS n;
RESET session_replication_role;
CREATE ROLE bench_app LOGIN IN ROLE rbac_app;
CREATE ROLE bench_owner LOGIN BYPASSRLS;
GRANT SELECT ON expenses TO bench_owner;
VACUUM ANALYZE;
