-- The limit on the couples a user makes for themselves (sql/0027_couple_limits.sql): reached, it refuses the
-- next and writes nothing; the operator is not held to it; changes to it are the operator's and recorded.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'paul:owner');
SELECT pg_temp.new_couple('Pia''s', 'pia', 'olivia:planner');
SELECT is((SELECT owned_per_user FROM couple_settings), 20, 'a user may own 20 couples unless the operator says');
UPDATE couple_settings SET owned_per_user = 2;

SELECT pg_temp.act_as('olivia');
SELECT lives_ok($$SELECT create_couple('Second', pg_temp.id('olivia'))$$,
                'with one couple owned and one where she plans, Olivia creates a second');
CREATE TEMPORARY TABLE before AS
    SELECT (SELECT count(*) FROM couples) AS couples, (SELECT count(*) FROM audit_log) AS logged,
           (SELECT count(*) FROM outbox) AS announced;
SELECT throws_ok($$SELECT create_couple('Third', pg_temp.id('olivia'))$$, 'RBQTA',
                 format('user %s owns 2 couples, and a user creates couples only while owning fewer than 2',
                        pg_temp.id('olivia')),
                 'owning two, she is refused a third');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM couples), (SELECT count(*) FROM audit_log), (SELECT count(*) FROM outbox)$$,
    $$SELECT couples, logged, announced FROM pg_temp.before$$, 'the refusal writes nothing, and announces nothing');
SELECT pg_temp.act_as('paul');
SELECT lives_ok($$SELECT create_couple('Paul''s', pg_temp.id('paul'))$$,
                'Paul, a co-owner of the same first couple, owns one: his limit is his own');
SELECT pg_temp.act_as('olivia');

-- Ownership handed on leaves room; a suspended ownership still counts.
INSERT INTO pg_temp.fixture SELECT name, id FROM couples WHERE name = 'Second';
SELECT grant_role(pg_temp.id('Second'), pg_temp.id('paul'), 'partner');
SELECT transfer_ownership(pg_temp.id('Second'), pg_temp.id('paul'), 'partner');
SELECT lives_ok($$SELECT create_couple('Third', pg_temp.id('olivia'))$$,
                'having handed one couple to Paul, she may create another');
SELECT pg_temp.act_as_operator();
INSERT INTO pg_temp.fixture SELECT name, id FROM couples WHERE name = 'Third';
SELECT pg_temp.add_member('Third', 'paul', 'owner');
UPDATE memberships SET status = 'suspended' WHERE couple_id = pg_temp.id('Third') AND user_id = pg_temp.id('olivia');
SELECT pg_temp.act_as('olivia');
SELECT throws_ok($$SELECT create_couple('Fourth', pg_temp.id('olivia'))$$, 'RBQTA', NULL,
                 'an ownership suspended counts as owned');

SELECT pg_temp.act_as_operator();
SELECT lives_ok($$SELECT create_couple('Imported', pg_temp.id('olivia'))$$,
                'the operator creates couples for her past the limit');
SELECT is((SELECT count(*)::int FROM memberships WHERE user_id = pg_temp.id('olivia') AND role = 'owner'), 3,
          'she owns three now');
SELECT pg_temp.act_as('olivia');
SELECT throws_ok($$SELECT create_couple('Fifth', pg_temp.id('olivia'))$$, 'RBQTA',
                 format('user %s owns 3 couples, and a user creates couples only while owning fewer than 2',
                        pg_temp.id('olivia')),
                 'the refusal counts what she owns, past the limit too');
SELECT pg_temp.act_as_operator();

SELECT set_config('rbac.actor_label', 'admin-alice', true);
UPDATE couple_settings SET owned_per_user = 5;
SELECT results_eq(
    $$SELECT action, actor_label, (before ->> 'owned_per_user')::int, (after ->> 'owned_per_user')::int
      FROM operator_audit_log ORDER BY id DESC LIMIT 1$$,
    $$VALUES ('couple_setting.update', 'operator:admin-alice', 2, 5)$$,
    'a change of the limit is recorded in the operator''s log');
SELECT throws_ok('UPDATE couple_settings SET owned_per_user = 0', '23514', NULL, 'a limit under 1 is refused');
SELECT throws_ok('INSERT INTO couple_settings VALUES (false, 3)', '23514', NULL, 'there is one setting only');
SELECT throws_ok('DELETE FROM ' || t, 'RBDEN', 'the one row of ' || t || ' stays: change its values with UPDATE',
                 'the row of ' || t || ' is not deleted, which would lift its limit')
FROM unnest(ARRAY['couple_settings', 'invitation_settings']) AS t;
SELECT throws_ok('TRUNCATE ' || t, 'RBDEN', NULL, 'nor truncated: ' || t)
FROM unnest(ARRAY['couple_settings', 'invitation_settings']) AS t;

SET LOCAL ROLE rbac_app;
SELECT throws_ok('UPDATE couple_settings SET owned_per_user = 100000', '42501', NULL,
                 'the application role cannot change it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
