-- rbac_operator, the role the CLI and `rbac serve` log in through when not as a superuser: every function, every
-- table past row-level security, the logs read-only; and whatever a later migration adds, without a grant of
-- its own (sql/functions/privileges.sql, policies/rls.sql).
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT ok(NOT rolsuper AND NOT rolbypassrls, 'rbac_operator is neither superuser nor BYPASSRLS')
FROM pg_roles WHERE rolname = 'rbac_operator';
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
    WHERE p.pronamespace IN ('public'::regnamespace, 'rbac'::regnamespace)
      AND NOT EXISTS (SELECT 1 FROM pg_depend d
                      WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
      AND NOT has_function_privilege('rbac_operator', p.oid, 'EXECUTE')
$$, 'rbac_operator may call every function of the product');
SELECT is_empty($$
    SELECT c.relname::text FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v')
      AND NOT EXISTS (SELECT 1 FROM pg_depend d
                      WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
      AND NOT has_table_privilege('rbac_operator', c.oid, 'SELECT')
$$, 'rbac_operator may read every table and view');
SELECT is_empty($$
    SELECT c.relname::text FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relrowsecurity
      AND NOT EXISTS (SELECT 1 FROM pg_policies p
                      WHERE p.tablename = c.relname AND p.schemaname = 'public' AND p.policyname = 'operators_all'
                        AND p.roles = '{rbac_operator}' AND p.cmd = 'ALL' AND p.qual = 'true'
                        AND p.with_check = 'true')
$$, 'every table with row-level security lets rbac_operator past it');

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'xena']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia');
SELECT pg_temp.new_couple('Xena & Co', 'xena');
SELECT create_invitation(pg_temp.id('Xena & Co'), pg_temp.hash('inv_1'), 'viewer');
INSERT INTO budget_scenarios (couple_id, name) VALUES (pg_temp.id('Xena & Co'), 'Xena''s plan');
CREATE TEMPORARY TABLE seen AS
    SELECT (SELECT count(*) FROM couples) AS couples, (SELECT count(*) FROM users) AS users,
           (SELECT count(*) FROM memberships) AS memberships, (SELECT count(*) FROM invitations) AS invitations,
           (SELECT coalesce(max(id), 0) FROM operator_audit_log) AS operator_log;
GRANT SELECT ON seen TO PUBLIC;

-- The role itself, not a superuser that belongs to every role: a superuser would pass every check anyway.
SET LOCAL SESSION AUTHORIZATION rbac_operator;
SELECT set_config('rbac.actor_label', 'ops', true);
SELECT ok(rbac.is_operator(), 'a session of rbac_operator with no claims is the operator');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM couples), (SELECT count(*) FROM users), (SELECT count(*) FROM memberships),
             (SELECT count(*) FROM invitations), (SELECT coalesce(max(id), 0) FROM operator_audit_log)$$,
    $$SELECT couples, users, memberships, invitations, operator_log FROM pg_temp.seen$$,
    'it reads every couple''s rows, as a superuser does');
SELECT lives_ok($$UPDATE invitation_settings SET per_couple_per_hour = 7$$, 'and sets what only the operator sets');
INSERT INTO service_keys (name, key_hash) VALUES ('ops-key', pg_temp.hash('rbk_ops'));
SELECT throws_ok('UPDATE operator_audit_log SET action = action', '42501', NULL,
                 'it cannot change the operator''s log');
SELECT throws_ok('DELETE FROM audit_log', '42501', NULL, 'nor a couple''s');
SELECT throws_ok('DELETE FROM schema_migrations', '42501', NULL, 'nor the record of migrations');
-- On Citus a couple's writes reach the workers, where a role that may not log in (as this one) cannot: the
-- README's walkthrough runs there through a login of this role (Tests/CLITests/ReadmeTests.swift).
\if :distributed
\else
SELECT lives_ok($$SELECT grant_role(pg_temp.id('Xena & Co'), pg_temp.id('olivia'), 'planner')$$,
                'it grants through the API functions');
SELECT results_eq($$SELECT name FROM budget_scenarios$$, $$VALUES ('Xena''s plan')$$,
                  'it reads a couple''s budget');
\endif
RESET SESSION AUTHORIZATION;

SELECT results_eq(
    $$SELECT action, actor_label FROM operator_audit_log WHERE id > (SELECT operator_log FROM pg_temp.seen)
      ORDER BY id$$,
    $$VALUES ('invitation_setting.update', 'operator:ops'), ('service_key.insert', 'operator:ops')$$,
    'its changes are recorded under its label, by the triggers');
\if :distributed
\else
SELECT results_eq(
    $$SELECT role FROM memberships WHERE couple_id = pg_temp.id('Xena & Co') AND user_id = pg_temp.id('olivia')$$,
    $$VALUES ('planner')$$, 'its grant holds');
\endif

SELECT * FROM finish();
ROLLBACK;
