-- Row-level security, seen through the application role rbac_app (no BYPASSRLS).
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'vera', 'xena', 'sam']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'vera:viewer', 'sam:viewer');
UPDATE memberships SET status = 'suspended' WHERE user_id = pg_temp.id('sam');
SELECT pg_temp.new_couple('Xena & Co', 'xena');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_1'), 'viewer');
INSERT INTO budget_scenarios (couple_id, name) VALUES (pg_temp.id('Olivia & Paul'), 'Olivia''s plan'),
                                                      (pg_temp.id('Xena & Co'), 'Xena''s plan');
INSERT INTO expenses (couple_id, name, amount) VALUES (pg_temp.id('Olivia & Paul'), 'Olivia''s venue', 100),
                                                      (pg_temp.id('Xena & Co'), 'Xena''s venue', 200);

-- How many times p_function ran while p_query ran: a policy asks once per statement, however many rows it reads.
SET LOCAL track_functions = 'all';
CREATE FUNCTION pg_temp.calls(p_function regprocedure, p_query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_before bigint := coalesce(pg_stat_get_xact_function_calls(p_function), 0);
BEGIN
    EXECUTE p_query;
    RETURN coalesce(pg_stat_get_xact_function_calls(p_function), 0) - v_before;
END $$;

SELECT ok(NOT rolbypassrls AND NOT rolsuper, 'rbac_app is neither superuser nor BYPASSRLS') FROM pg_roles WHERE rolname = 'rbac_app';
SELECT ok(relrowsecurity AND relforcerowsecurity, relname || ': row-level security enabled and forced')
FROM pg_class WHERE relname IN ('couples', 'users', 'memberships', 'invitations', 'audit_log') ORDER BY relname;
-- Isolation by default, so that a table a later migration adds is not read past its couple: every table
-- rbac_app may read has row-level security, enabled and forced, with a policy for rbac_app, but the policy's
-- own tables, which hold nothing of any couple.
SELECT is_empty($$
    SELECT c.relname FROM pg_class c
    WHERE c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace
      AND has_any_column_privilege('rbac_app', c.oid, 'SELECT')
      AND NOT (c.relrowsecurity AND c.relforcerowsecurity
               AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND 'rbac_app'::regrole = ANY (p.polroles)))
      AND c.relname NOT IN ('permissions', 'roles', 'role_permissions', 'role_grants', 'budget_row_limits')
$$, 'every table rbac_app may read is under row-level security with a policy for it, but the policy''s own');

SET LOCAL ROLE rbac_app;
SELECT pg_temp.act_as('olivia');
SELECT results_eq($$SELECT name FROM couples$$, $$VALUES ('Olivia & Paul')$$, 'an owner sees only their couple');
SELECT is((SELECT count(*)::int FROM memberships), 3, 'and its three memberships');
SELECT is((SELECT count(*)::int FROM invitations), 1, 'and its invitation');
\if :distributed
SELECT throws_ok($$SELECT 1 FROM audit_log$$, '42501', NULL, 'on Citus the couple''s audit log is refused, to owners too');
\else
SELECT ok((SELECT count(*) FROM audit_log) > 0, 'and its audit log');
\endif
SELECT is((SELECT count(*)::int FROM users), 3, 'and the users they share a couple with');
SELECT is(pg_temp.calls('rbac.readable_couples(text)', 'SELECT * FROM memberships'), 1::bigint,
          'reading three memberships asks for the reader''s couples once');
SELECT is(pg_temp.calls('rbac.visible_users()', 'SELECT * FROM users'), 1::bigint,
          'reading three users asks for the people the reader sees once');
SELECT is(pg_temp.calls('rbac.readable_couples(text)', 'SELECT * FROM users'), 1::bigint,
          'and for the reader''s couples once');
SELECT throws_ok($$SELECT token_hash FROM invitations$$, '42501', NULL, 'token hashes are not readable at all');

SELECT pg_temp.act_as('vera');
SELECT is((SELECT count(*)::int FROM memberships), 3, 'a viewer sees the members');
SELECT is((SELECT count(*)::int FROM invitations), 0, 'but not the invitations (no collaborators.invite)');
\if :distributed
\else
SELECT is((SELECT count(*)::int FROM audit_log), 0, 'nor the audit log (no audit.view)');
\endif

SELECT pg_temp.act_as('xena');
SELECT results_eq($$SELECT name FROM couples$$, $$VALUES ('Xena & Co')$$, 'another couple''s owner sees only theirs');
SELECT is_empty($$SELECT 1 FROM memberships WHERE couple_id = pg_temp.id('Olivia & Paul')$$, 'and none of the first couple''s members');
SELECT is_empty($$SELECT 1 FROM users WHERE id = pg_temp.id('olivia')$$, 'nor its users');

SELECT pg_temp.act_as('sam');
SELECT is_empty($$SELECT 1 FROM couples$$, 'a suspended member sees nothing');

-- The budget, and each table's count of it: members read their own couple's; on Citus, where these tables
-- are distributed and a policy could not read the coordinator's memberships, rbac_app is refused them.
SELECT pg_temp.act_as('olivia');
\if :distributed
SELECT throws_ok(format('SELECT 1 FROM %I', t), '42501', NULL, 'on Citus rbac_app is refused ' || t)
FROM unnest(ARRAY['budget_scenarios', 'budget_folders', 'budget_items', 'expenses', 'expense_payments',
                  'expense_allocations', 'gifts_and_owed', 'budget_revisions', 'budget_row_counts']) AS t;
\else
SELECT results_eq($$SELECT name FROM budget_scenarios$$, $$VALUES ('Olivia''s plan')$$,
                  'a member reads their couple''s budget and no other''s');
SELECT results_eq($$SELECT name FROM expenses$$, $$VALUES ('Olivia''s venue')$$, 'and its expenses');
RESET ROLE;
INSERT INTO expenses (couple_id, name, amount)
SELECT pg_temp.id('Olivia & Paul'), 'expense ' || n, n FROM generate_series(1, 20) AS n;
SET LOCAL ROLE rbac_app;
SELECT is(pg_temp.calls('rbac.holds_permission(uuid, uuid, text)', 'SELECT * FROM expenses'), 1::bigint,
          'reading 21 expenses asks whether the reader may view them once, for their one couple');
SELECT pg_temp.act_as('sam');
SELECT is_empty($$SELECT 1 FROM budget_scenarios$$, 'a suspended member reads none of it');
\endif

SELECT pg_temp.act_as_operator();
SELECT is_empty($$SELECT 1 FROM memberships$$, 'without claims the application role sees nothing');
SELECT throws_ok($$INSERT INTO memberships (couple_id, user_id, role) VALUES (pg_temp.id('Xena & Co'), pg_temp.id('olivia'), 'owner')$$,
                 '42501', NULL, 'the application role cannot write memberships directly');
SELECT throws_ok($$DELETE FROM memberships$$, '42501', NULL, 'nor delete them');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
