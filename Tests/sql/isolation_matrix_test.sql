-- The isolation matrix: for every role in the policy, a member of couple A holding it, asked about every
-- permission in both couples. In A the answer is exactly the role's permissions; in B it is always false.
BEGIN;
\ir fixtures.psql

SELECT pg_temp.new_user('owner_a');
SELECT pg_temp.new_user('owner_b');
SELECT pg_temp.new_couple('A', 'owner_a');
SELECT pg_temp.new_couple('B', 'owner_b');
SELECT pg_temp.new_user('holder_' || name) FROM roles;
SELECT pg_temp.add_member('A', 'holder_' || name, name) FROM roles;

SELECT plan((SELECT count(*)::int * 2 FROM roles CROSS JOIN permissions));

SELECT is(
    user_has_permission(pg_temp.id('A'), pg_temp.id('holder_' || r.name), p.name),
    EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role = r.name AND rp.permission = p.name),
    format('a %s in couple A: %s is %s', r.name, p.name,
           CASE WHEN EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role = r.name AND rp.permission = p.name)
                THEN 'allowed' ELSE 'denied' END))
FROM roles r CROSS JOIN permissions p ORDER BY r.rank, p.name;

SELECT is(
    user_has_permission(pg_temp.id('B'), pg_temp.id('holder_' || r.name), p.name), false,
    format('a %s of couple A has no %s in couple B', r.name, p.name))
FROM roles r CROSS JOIN permissions p ORDER BY r.rank, p.name;

SELECT * FROM finish();
ROLLBACK;
