-- Budget row limits (budget_row_limits): each couple's counts follow every insert, delete and cascade; a statement
-- that would pass a limit adds nothing; rows cannot move between couples.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'sam']) AS name;
SELECT pg_temp.new_couple('Olivia', 'olivia');
SELECT pg_temp.new_couple('Sam', 'sam');

-- The count of p_table's rows that the couple p_couple holds, as budget_row_counts keeps it (0 if none).
-- (PL/pgSQL: Citus cannot plan a SQL function's parameters.)
CREATE FUNCTION pg_temp.counted(p_couple text, p_table text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_couple_id uuid := pg_temp.id(p_couple);
BEGIN
    RETURN coalesce((SELECT row_count FROM budget_row_counts
                     WHERE couple_id = v_couple_id AND table_name = p_table), 0);
END $$;

-- Every budget_row_counts row that differs from a count of the table itself, and every couple's rows that
-- have no count.
CREATE FUNCTION pg_temp.miscounted() RETURNS TABLE (couple_id uuid, table_name text, kept integer, actual bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_table text;
BEGIN
    FOR v_table IN SELECT l.table_name FROM budget_row_limits l LOOP
        RETURN QUERY EXECUTE format(
            'SELECT couple_id, %1$L, coalesce(k.row_count, 0), coalesce(t.n, 0)
             FROM (SELECT couple_id, row_count FROM budget_row_counts WHERE table_name = %1$L) k
             FULL JOIN (SELECT couple_id, count(*) AS n FROM %1$I GROUP BY couple_id) t USING (couple_id)
             WHERE coalesce(k.row_count, 0) <> coalesce(t.n, 0)', v_table);
    END LOOP;
END $$;

SELECT set_eq(
    $$SELECT table_name FROM budget_row_limits$$,
    ARRAY['budget_scenarios', 'budget_folders', 'budget_items', 'expenses', 'expense_payments',
          'expense_allocations', 'gifts_and_owed'],
    'every budget table has a limit');

INSERT INTO budget_scenarios (couple_id, id, name) VALUES
    (pg_temp.id('Olivia'), '00000000-0000-0000-0000-00000000000a', 'Main'),
    (pg_temp.id('Sam'), '00000000-0000-0000-0000-00000000000b', 'Main');
INSERT INTO budget_folders (couple_id, id, scenario_id, name)
    VALUES (pg_temp.id('Olivia'), '00000000-0000-0000-0000-0000000000f1', '00000000-0000-0000-0000-00000000000a', 'Party');
INSERT INTO budget_items (couple_id, scenario_id, folder_id, name, budgeted)
    SELECT pg_temp.id('Olivia'), '00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-0000000000f1',
           'item ' || n, 10
    FROM generate_series(1, 3) AS n;
INSERT INTO expenses (couple_id, name, amount) VALUES (pg_temp.id('Olivia'), 'Hall', 30), (pg_temp.id('Sam'), 'Band', 5);
INSERT INTO expense_allocations (couple_id, scenario_id, expense_id, budget_item_id, amount)
    SELECT i.couple_id, i.scenario_id, e.id, i.id, 10 FROM budget_items i JOIN expenses e ON e.couple_id = i.couple_id;
INSERT INTO expense_payments (couple_id, expense_id, amount, paid_at)
    SELECT couple_id, id, 5, '2026-01-01' FROM expenses;
INSERT INTO gifts_and_owed (couple_id, from_name, amount, budget_item_id)
    SELECT couple_id, 'Aunt May', 50, id FROM budget_items WHERE name = 'item 1';
SELECT is(pg_temp.counted('Olivia', 'budget_items'), 3, 'a multi-row insert counts every row');
SELECT is(pg_temp.counted('Sam', 'budget_scenarios'), 1, 'each couple is counted on its own');
SELECT is_empty($$SELECT * FROM pg_temp.miscounted()$$, 'every count matches its table after inserts');

-- A full couple: a limit of 4 items, with 3 held.
UPDATE budget_row_limits SET max_rows = 4 WHERE table_name = 'budget_items';
SELECT throws_ok(
    $$INSERT INTO budget_items (couple_id, scenario_id, name, budgeted)
      SELECT s.couple_id, s.id, 'more ' || n, 1 FROM budget_scenarios s, generate_series(1, 2) n
      WHERE s.couple_id = (SELECT pg_temp.id('Olivia')) AND s.id = '00000000-0000-0000-0000-00000000000a'$$,
    'RBQTA', 'this would pass the couple''s limit of budget items (4)',
    'a statement that would pass the limit is refused, naming it');
SELECT is((SELECT count(*)::int FROM budget_items WHERE couple_id = (SELECT pg_temp.id('Olivia'))), 3,
    'and adds no row');
SELECT is(pg_temp.counted('Olivia', 'budget_items'), 3, 'nor counts one');
SELECT lives_ok(
    $$INSERT INTO budget_items (couple_id, scenario_id, name, budgeted)
      VALUES (pg_temp.id('Olivia'), '00000000-0000-0000-0000-00000000000a', 'the fourth', 1)$$,
    'up to the limit, rows are added');
SELECT throws_ok(
    $$SELECT clone_budget_scenario(pg_temp.id('Olivia'), '00000000-0000-0000-0000-00000000000a', 'Copy')$$,
    'RBQTA', NULL, 'a clone that would pass a limit is refused');
SELECT is((SELECT count(*)::int FROM budget_scenarios WHERE couple_id = (SELECT pg_temp.id('Olivia'))), 1,
    'and leaves no part of the copy behind');
SELECT lives_ok(
    $$INSERT INTO budget_items (couple_id, scenario_id, name, budgeted)
      SELECT pg_temp.id('Sam'), '00000000-0000-0000-0000-00000000000b', 'sam ' || n, 1 FROM generate_series(1, 4) n$$,
    'another couple has limits of its own');

-- A lowered limit: the rows stay, deleting goes on, adding waits for room.
UPDATE budget_row_limits SET max_rows = 2 WHERE table_name = 'budget_items';
SELECT lives_ok(
    $$DELETE FROM budget_items WHERE couple_id = (SELECT pg_temp.id('Olivia')) AND name = 'the fourth'$$,
    'a couple past a lowered limit may delete');
SELECT throws_ok(
    $$INSERT INTO budget_items (couple_id, scenario_id, name, budgeted)
      VALUES (pg_temp.id('Olivia'), '00000000-0000-0000-0000-00000000000a', 'again', 1)$$,
    'RBQTA', NULL, 'but not add while still past it');
SELECT is(pg_temp.counted('Olivia', 'budget_items'), 3, 'a delete counts down');

INSERT INTO expenses (couple_id, name, amount) VALUES (pg_temp.id('Olivia'), 'Solo', 1);
\if :distributed
SELECT throws_ok(
    $$UPDATE expenses SET couple_id = (SELECT pg_temp.id('Sam')) WHERE name = 'Solo'$$,
    '0A000', NULL, 'no budget row moves to another couple (Citus refuses to change the distribution column)');
\else
SELECT throws_ok(
    $$UPDATE expenses SET couple_id = pg_temp.id('Sam') WHERE name = 'Solo'$$,
    'RBINV', 'a budget row cannot move to another couple',
    'no budget row moves to another couple (the counts would go wrong)');
\endif
SELECT lives_ok($$UPDATE expenses SET vendor = 'Castle' WHERE name = 'Solo'$$, 'other updates go through');

-- Cascades: a folder's items stay (unfiled), a scenario takes its folders, items and allocations along, an
-- item its gifts' link, an expense its payments.
INSERT INTO gifts_and_owed (couple_id, from_name, amount, budget_item_id)
    SELECT couple_id, 'Uncle Tom', 20, id FROM budget_items WHERE couple_id = (SELECT pg_temp.id('Olivia')) AND name = 'item 1';
DELETE FROM budget_folders WHERE couple_id = (SELECT pg_temp.id('Olivia'));
SELECT results_eq($$SELECT count(*)::int, count(folder_id)::int FROM budget_items WHERE couple_id = (SELECT pg_temp.id('Olivia'))$$,
                  $$VALUES (3, 0)$$, 'a deleted folder leaves its items, unfiled');
DELETE FROM budget_items WHERE couple_id = (SELECT pg_temp.id('Olivia')) AND name = 'item 1';
SELECT results_eq($$SELECT budget_item_id FROM gifts_and_owed WHERE from_name = 'Uncle Tom'$$,
                  $$VALUES (NULL::uuid)$$, 'a deleted item leaves its gifts, unlinked');
DELETE FROM expenses WHERE couple_id = (SELECT pg_temp.id('Olivia')) AND name = 'Hall';
SELECT is_empty($$SELECT * FROM pg_temp.miscounted()$$, 'every count matches after cascading deletes');
DELETE FROM budget_scenarios WHERE couple_id = (SELECT pg_temp.id('Olivia'));
SELECT is(pg_temp.counted('Olivia', 'budget_items'), 0, 'a deleted scenario takes its items'' count along');
SELECT is_empty($$SELECT * FROM pg_temp.miscounted()$$, 'every count matches after deleting a scenario');

-- Reading a count takes what reading its table takes: a member who may see the budget but not the gifts
-- learns nothing about the gifts.
INSERT INTO gifts_and_owed (couple_id, from_name, amount) VALUES (pg_temp.id('Sam'), 'Uncle', 5);
INSERT INTO roles (name, description, rank) VALUES ('budgeter', 'the budget alone', 90);
INSERT INTO role_permissions (role, permission) VALUES ('budgeter', 'budget.view');
SELECT pg_temp.new_user('bea');
SELECT pg_temp.add_member('Sam', 'bea', 'budgeter');
SET LOCAL ROLE rbac_app;
SELECT pg_temp.act_as('sam');
\if :distributed
SELECT throws_ok($$SELECT table_name FROM budget_row_counts$$, '42501', NULL,
    'on Citus the counts are refused to direct clients, owners included');
\else
SELECT set_eq($$SELECT table_name FROM budget_row_counts$$,
    ARRAY['budget_scenarios', 'budget_items', 'expenses', 'expense_payments', 'gifts_and_owed'],
    'an owner reads them all, of their own couple only');
SELECT pg_temp.act_as('bea');
SELECT set_eq($$SELECT table_name FROM budget_row_counts$$, ARRAY['budget_scenarios', 'budget_items'],
    'a member reads the counts of the tables they may read (budget.view: not expenses, payments or gifts)');
\endif
RESET ROLE;
SELECT pg_temp.act_as_operator();

DELETE FROM couples WHERE id = pg_temp.id('Sam');
SELECT is_empty($$SELECT 1 FROM budget_row_counts WHERE couple_id = (SELECT pg_temp.id('Sam'))$$,
    'a deleted couple''s counts go with it');

SELECT * FROM finish();
ROLLBACK;
