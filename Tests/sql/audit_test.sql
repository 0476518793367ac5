-- The audit log: one row per membership, invitation or budget change, with actor, before and after; append-only.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'guest']) AS name;
SET LOCAL rbac.actor_label = 'admin-alice';  -- as the CLI names its operator
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia');
SELECT results_eq(
    $$SELECT action, actor_id, actor_label, coalesce(after ->> 'role', after ->> 'name') FROM audit_log
      WHERE couple_id = (SELECT pg_temp.id('Olivia & Paul')) ORDER BY at, id$$,
    $$VALUES ('couple.insert', NULL::uuid, 'operator:admin-alice', 'Olivia & Paul'),
             ('membership.insert', NULL::uuid, 'operator:admin-alice', 'owner')$$,
    'an operator''s changes are recorded with the operator''s label, the couple''s creation first');

SELECT pg_temp.act_as('olivia');
SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'), 'planner');
SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'), 'partner');
SELECT results_eq(
    $$SELECT actor_id, before ->> 'role', after ->> 'role' FROM audit_log
      WHERE couple_id = (SELECT pg_temp.id('Olivia & Paul')) AND action = 'membership.update'$$,
    $$VALUES (pg_temp.id('olivia'), 'planner', 'partner')$$,
    'a role change is recorded with the acting user, before and after');

SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_secret'), 'viewer', 'guest@example.com');
SELECT pg_temp.act_as('guest');
SELECT accept_invitation(pg_temp.hash('inv_secret'));
SELECT results_eq(
    $$SELECT action, actor_id FROM audit_log WHERE couple_id = (SELECT pg_temp.id('Olivia & Paul')) AND action LIKE 'invitation.%' ORDER BY id$$,
    $$VALUES ('invitation.insert', pg_temp.id('olivia')), ('invitation.update', pg_temp.id('guest'))$$,
    'creating and accepting an invitation are recorded');
SELECT is_empty(
    $$SELECT 1 FROM audit_log WHERE before ? 'token_hash' OR after ? 'token_hash'$$,
    'token hashes stay out of the audit log');
SELECT is_empty(
    $$SELECT 1 FROM audit_log WHERE concat(before, after) ~ 'guest@example'$$,
    'so does the address an invitation names: a couple''s log names people by id');

SELECT pg_temp.act_as('olivia');
SELECT transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'));
SELECT leave_couple(pg_temp.id('Olivia & Paul'));
SELECT pg_temp.act_as('paul');
SELECT remove_member(pg_temp.id('Olivia & Paul'), pg_temp.id('guest'));
SELECT results_eq(
    $$SELECT actor_id, before ->> 'user_id', before ->> 'role', after FROM audit_log
      WHERE couple_id = (SELECT pg_temp.id('Olivia & Paul')) AND action = 'membership.delete' ORDER BY id$$,
    $$VALUES (pg_temp.id('olivia'), pg_temp.id('olivia')::text, 'partner', NULL::jsonb),
             (pg_temp.id('paul'), pg_temp.id('guest')::text, 'viewer', NULL::jsonb)$$,
    'leaving and removal are recorded with the member as it was');
SELECT pg_temp.act_as_operator();

SELECT throws_ok($$UPDATE audit_log SET action = 'nothing'$$, 'RBDEN', NULL, 'audit rows cannot be updated, even by a superuser');
SELECT throws_ok($$DELETE FROM audit_log$$, 'RBDEN', NULL, 'audit rows cannot be deleted');
SELECT throws_ok($$TRUNCATE audit_log$$, 'RBDEN', NULL, 'the audit log cannot be truncated');
SELECT is((SELECT count(*)::int FROM audit_log WHERE couple_id = (SELECT pg_temp.id('Olivia & Paul'))), 11, 'all eleven rows are still there');

-- The couple's own row: its name and the domains it may invite, not the revision every membership write advances.
SELECT set_invite_domains(pg_temp.id('Olivia & Paul'), ARRAY['example.com']);
UPDATE couples SET name = 'Olivia & Paul Smith' WHERE id = pg_temp.id('Olivia & Paul');
SELECT pg_temp.add_member('Olivia & Paul', 'olivia', 'viewer');
SELECT results_eq(
    $$SELECT before -> 'invite_domains', after -> 'invite_domains', before ->> 'name', after ->> 'name' FROM audit_log
      WHERE couple_id = (SELECT pg_temp.id('Olivia & Paul')) AND action = 'couple.update' ORDER BY at, id$$,
    $$VALUES ('[]'::jsonb, '["example.com"]'::jsonb, 'Olivia & Paul', 'Olivia & Paul'),
             ('["example.com"]'::jsonb, '["example.com"]'::jsonb, 'Olivia & Paul', 'Olivia & Paul Smith')$$,
    'the domains a couple may invite and its name are recorded when they change, and nothing else of its row');

-- Budget changes: one row per changed row, allocations included, with whoever the transaction names.
SELECT pg_temp.new_couple('Budget', 'olivia');
SELECT pg_temp.act_as('olivia');
INSERT INTO budget_scenarios (couple_id, name) VALUES (pg_temp.id('Budget'), 'Main');
INSERT INTO budget_items (couple_id, scenario_id, name, budgeted)
    SELECT couple_id, id, 'Venue', 500 FROM budget_scenarios WHERE couple_id = (SELECT pg_temp.id('Budget'));
INSERT INTO expenses (couple_id, name, amount) VALUES (pg_temp.id('Budget'), 'Deposit', 120);
INSERT INTO expense_allocations (couple_id, scenario_id, expense_id, budget_item_id, amount)
    SELECT i.couple_id, i.scenario_id, e.id, i.id, 120
    FROM budget_items i JOIN expenses e ON e.couple_id = i.couple_id WHERE i.couple_id = (SELECT pg_temp.id('Budget'));
UPDATE budget_items SET budgeted = 600 WHERE couple_id = (SELECT pg_temp.id('Budget'));
SELECT pg_temp.act_as_operator();
DELETE FROM expense_allocations WHERE couple_id = (SELECT pg_temp.id('Budget'));
SELECT results_eq(
    $$SELECT action, actor_id, actor_label FROM audit_log
      WHERE couple_id = (SELECT pg_temp.id('Budget')) AND action NOT LIKE 'membership.%' AND action <> 'couple.insert'
      ORDER BY id$$,
    $$VALUES ('budget_scenario.insert', pg_temp.id('olivia'), 'user:' || pg_temp.id('olivia')),
             ('budget_item.insert', pg_temp.id('olivia'), 'user:' || pg_temp.id('olivia')),
             ('expense.insert', pg_temp.id('olivia'), 'user:' || pg_temp.id('olivia')),
             ('allocation.insert', pg_temp.id('olivia'), 'user:' || pg_temp.id('olivia')),
             ('budget_item.update', pg_temp.id('olivia'), 'user:' || pg_temp.id('olivia')),
             ('allocation.delete', NULL::uuid, 'operator:admin-alice')$$,
    'budget changes are recorded, each with who made it');
SELECT results_eq(
    $$SELECT before ->> 'budgeted', after ->> 'budgeted' FROM audit_log
      WHERE couple_id = (SELECT pg_temp.id('Budget')) AND action = 'budget_item.update'$$,
    $$VALUES ('500.00', '600.00')$$,
    'a budget change keeps the row before and after');

SELECT * FROM finish();
ROLLBACK;
