-- Functions that run with their owner's rights (SECURITY DEFINER), against what a caller can put in their way.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

-- A session's temporary schema comes first in the search path, before pg_catalog, unless the path names it:
-- a function whose path does not end in pg_temp reads a caller's temporary table in place of its own. A pinned
-- path replaces the caller's for the function and all it calls, so every pinned one ends in pg_temp.
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
    WHERE p.pronamespace IN ('public'::regnamespace, 'rbac'::regnamespace)
      AND NOT EXISTS (SELECT 1 FROM pg_depend d
                      WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
      AND (p.prosecdef OR EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%'))
      AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%, pg\_temp')
$$, 'every SECURITY DEFINER function, and every function that pins search_path, names pg_temp last');

-- Functions find what they call through public; a function an end user could create there might outbid the
-- one meant and run as the functions' owner (sql/functions/privileges.sql).
SELECT ok(NOT has_schema_privilege('rbac_app', 'public', 'CREATE')
          AND NOT has_schema_privilege('rbac_app', 'rbac', 'CREATE'),
          'rbac_app may create objects in neither public nor rbac');

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'xena']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia');
SELECT pg_temp.new_couple('Xena & Co', 'xena');

-- Xena, a member of the application role, forges an owner's membership of Olivia's couple in a temporary table
-- named like the real one, and has every cached plan made again (as any session may), so that the functions
-- look the table up anew.
SET LOCAL ROLE rbac_app;
SELECT pg_temp.act_as('xena');
CREATE TEMPORARY TABLE memberships (couple_id uuid, user_id uuid, role text, status text, expires_at timestamptz);
INSERT INTO pg_temp.memberships VALUES (pg_temp.id('Olivia & Paul'), pg_temp.id('xena'), 'owner', 'active', NULL);
DISCARD PLANS;
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), 'couple.edit'),
          'a forged membership in a temporary table grants nothing');
SELECT throws_ok(format('SELECT rename_couple(%L, %L)', pg_temp.id('Olivia & Paul'), 'Taken'), 'RBDEN', NULL,
                 'nor lets her rename a couple she is not in');
SELECT results_eq($$SELECT name FROM couples$$, $$VALUES ('Xena & Co')$$,
                  'nor shows her the couple through row-level security');
DROP TABLE pg_temp.memberships;
RESET ROLE;
SELECT is((SELECT name FROM couples WHERE id = pg_temp.id('Olivia & Paul')), 'Olivia & Paul', 'the couple is as it was');

SELECT * FROM finish();
ROLLBACK;
