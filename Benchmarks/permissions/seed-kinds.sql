-- 2,000 more couples of 3 members, numbered on from Benchmarks/permissions/seed.sql and derived the same way,
-- whose members hold their roles in the two other ways a check can meet (owner, then two others):
--   couples 10,001 to 11,000: roles the couple defined, granting what partner and viewer grant;
--   couples 11,001 to 12,000: partner and viewer memberships that expire in 30 days.
-- So each load answers budget.edit yes, yes, no for its three members, as the policy's roles do in seed.sql.
INSERT INTO users (id, email)
SELECT md5('u' || n)::uuid, 'bench-' || n || '@example.com' FROM generate_series(30001, 36000) AS n;
INSERT INTO couples (id, name)
SELECT md5('c' || c)::uuid, 'Couple ' || c FROM generate_series(10001, 12000) AS c;
INSERT INTO couple_roles (couple_id, name, description)
SELECT md5('c' || c)::uuid, r.name, r.name FROM generate_series(10001, 11000) AS c,
       (VALUES ('co_planner'), ('family')) AS r (name);
INSERT INTO couple_role_permissions (couple_id, role, permission)
SELECT md5('c' || c)::uuid, r.name, rp.permission
FROM generate_series(10001, 11000) AS c,
     (VALUES ('co_planner', 'partner'), ('family', 'viewer')) AS r (name, like_role)
JOIN role_permissions rp ON rp.role = r.like_role;
INSERT INTO memberships (couple_id, user_id, role, expires_at)
SELECT md5('c' || c)::uuid, md5('u' || (3 * (c - 1) + k))::uuid,
       CASE WHEN c <= 11000 THEN (ARRAY['owner', 'co_planner', 'family'])[k]
            ELSE (ARRAY['owner', 'partner', 'viewer'])[k] END,
       CASE WHEN c > 11000 AND k > 1 THEN now() + interval '30 days' END
FROM generate_series(10001, 12000) AS c, generate_series(1, 3) AS k;
ANALYZE;
