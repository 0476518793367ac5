-- Granting, changing, suspending and removing members, and who may do it.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia', 'vera', 'newbie', 'other']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'paul:partner', 'pia:planner', 'vera:viewer');

-- The operator may do anything.
SELECT is((grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'viewer')).role, 'viewer', 'the operator grants a role to a new member');
SELECT is((grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'planner')).role, 'planner', 'granting again changes the role');
SELECT throws_like($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'overlord')$$,
                   'unknown role "overlord"; valid roles: owner, partner, planner, viewer', 'an unknown role is refused, naming the valid roles');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'overlord')$$, 'RBINV', NULL, 'an unknown role is RBINV');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), gen_random_uuid(), 'viewer')$$, 'RBNFD', NULL, 'an unknown user is RBNFD');
SELECT throws_ok($$SELECT grant_role(gen_random_uuid(), pg_temp.id('newbie'), 'viewer')$$, 'RBNFD', NULL, 'an unknown couple is RBNFD');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), $x$'); DROP TABLE memberships; --$x$)$$,
                 'RBINV', NULL, 'SQL metacharacters in a role name are just an unknown role');
SELECT has_table('memberships', 'and the table is still there');

-- A couple's name is text for people: no control characters, no bidirectional overrides.
SELECT is((create_couple('  Dana & Lee  ', pg_temp.id('other'))).name, 'Dana & Lee', 'a couple is created, its name trimmed');
SELECT throws_ok(format('SELECT create_couple(%L, %L)', name, pg_temp.id('other')), 'RBINV',
                 'a couple''s name must not contain control characters (NUL, escape, line breaks, tabs, '
                 'bidirectional overrides, ...)', format('a couple''s name holding %s is refused', label))
FROM (VALUES (E'Evil\x1b[2J', 'an escape'), (E'Ann\u202Eeel & Dan', 'a right-to-left override'),
             (E'Ann\u2066 & Dan', 'an isolate'), (E'A\u0085B', 'a next-line')) AS t(name, label);
SELECT is((SELECT count(*)::int FROM couples WHERE name LIKE 'Ann%' OR name LIKE 'Evil%'), 0, 'and none is made');
-- Nor one that shows nothing: listed, it would look like no name at all.
SELECT throws_ok(format('SELECT create_couple(%L, %L)', name, pg_temp.id('other')), 'RBINV',
                 'a couple''s name must show something, not only spaces and invisible characters (zero-width '
                 'spaces, joiners, fillers, ...)', format('a couple''s name of %s is refused', label))
FROM (VALUES (E'\u200B', 'a zero-width space'), (E' \uFEFF\u2060 ', 'a byte-order mark and a word joiner'),
             (E'\u3164', 'a Hangul filler'), (E'\u3000', 'an ideographic space'),
             (E'\u2800', 'the blank Braille pattern')) AS t(name, label);

-- A partner may give partner, planner and viewer, but not owner; and may not touch an owner.
SELECT pg_temp.act_as('paul');
SELECT is((grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'viewer')).role, 'viewer', 'a partner demotes a planner to viewer');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'owner')$$, 'RBESC',
                 'a member with the partner role cannot give the owner role', 'a partner cannot make an owner');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), 'viewer')$$, 'RBESC', NULL, 'a partner cannot demote an owner');
SELECT throws_ok($$SELECT suspend_member(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'))$$, 'RBESC', NULL, 'a partner cannot suspend an owner');
SELECT is((suspend_member(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'))).status, 'suspended', 'a partner suspends a viewer');
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'budget.view'), 'the suspended viewer may do nothing');
SELECT is((reactivate_member(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'))).status, 'active', 'a partner reactivates the viewer');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'budget.view'), 'the reactivated viewer may see the budget again');
-- Changing nothing writes nothing: no revision, no audit entry, no webhook message.
CREATE TEMP TABLE written AS
    SELECT (SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul')) AS revision,
           (SELECT count(*) FROM audit_log) AS audited, (SELECT count(*) FROM outbox) AS messages;
SELECT is((reactivate_member(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'))).status, 'active', 'reactivating an active member');
SELECT is((grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'viewer')).role, 'viewer', 'granting the role held');
UPDATE memberships SET status = status WHERE couple_id = pg_temp.id('Olivia & Paul');
SELECT results_eq($$SELECT (SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul')),
                           (SELECT count(*) FROM audit_log), (SELECT count(*) FROM outbox)$$,
                  'SELECT * FROM written', 'and neither they nor a raw update that changes nothing writes anything');

-- A planner has no roles.assign; a viewer has nothing to manage with.
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'viewer')$$, 'RBDEN', NULL, 'a planner cannot assign roles');
SELECT throws_ok($$SELECT remove_member(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'))$$, 'RBDEN', NULL, 'a planner cannot remove members');
SELECT pg_temp.act_as('vera');
SELECT throws_ok($$SELECT suspend_member(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'))$$, 'RBDEN', NULL, 'a viewer cannot suspend members');
SELECT pg_temp.act_as('other');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('other'), 'owner')$$, 'RBDEN', NULL, 'an outsider cannot grant themself a role');

-- Removing and leaving.
SELECT pg_temp.act_as('olivia');
SELECT is((remove_member(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'))).user_id, pg_temp.id('newbie'), 'an owner removes a member');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie')), NULL, 'the removed member has no role');
SELECT throws_ok($$SELECT remove_member(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'))$$, 'RBNFD', NULL, 'removing a non-member is RBNFD');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT leave_couple(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'))$$, 'RBDEN', NULL, 'a member cannot make another leave');
SELECT is((leave_couple(pg_temp.id('Olivia & Paul'))).user_id, pg_temp.id('pia'), 'a planner leaves');
SELECT pg_temp.act_as_operator();
SELECT throws_ok($$SELECT leave_couple(pg_temp.id('Olivia & Paul'))$$, 'RBINV', NULL, 'the operator must name who leaves');
SELECT is((leave_couple(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'))).user_id, pg_temp.id('vera'), 'the operator makes a viewer leave');

-- The couple itself: renamed by a member holding couple.edit, deleted with all of it by one holding couple.delete.
SELECT pg_temp.new_couple('Doomed', 'olivia', 'paul:partner', 'pia:planner');
INSERT INTO budget_scenarios (couple_id, name) VALUES (pg_temp.id('Doomed'), 'Main');
SELECT create_invitation(pg_temp.id('Doomed'), pg_temp.hash('inv_doomed'), 'viewer', 'guest@example.com');
UPDATE outbox SET token_box = '\x01' WHERE channel = 'email' AND couple_id = pg_temp.id('Doomed');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT rename_couple(pg_temp.id('Doomed'), 'Ours')$$, 'RBDEN', NULL,
                 'a planner cannot rename the couple');
SELECT pg_temp.act_as('paul');
SELECT is((rename_couple(pg_temp.id('Doomed'), '  Olivia & Paul II ')).name, 'Olivia & Paul II',
          'a partner renames it, the name trimmed');
SELECT throws_ok($$SELECT rename_couple(pg_temp.id('Doomed'), E'a\u202Eb')$$, 'RBINV', NULL,
                 'a name with a bidirectional override is refused');
SELECT throws_ok($$SELECT rename_couple(pg_temp.id('Doomed'), E'\u200B\u200D')$$, 'RBINV', NULL,
                 'as is one that shows nothing');
SELECT throws_ok($$SELECT rename_couple(gen_random_uuid(), 'x')$$, 'RBNFD', NULL, 'an unknown couple is RBNFD');
SELECT throws_ok($$SELECT delete_couple(pg_temp.id('Doomed'))$$, 'RBDEN', NULL, 'a partner cannot delete it');
SELECT pg_temp.act_as('olivia');
SELECT lives_ok($$SELECT delete_couple(pg_temp.id('Doomed'))$$, 'its owner deletes it');
SELECT pg_temp.act_as_operator();
SELECT is((SELECT count(*)::int FROM couples WHERE id = pg_temp.id('Doomed'))
          + (SELECT count(*)::int FROM memberships WHERE couple_id = pg_temp.id('Doomed'))
          + (SELECT count(*)::int FROM invitations WHERE couple_id = pg_temp.id('Doomed'))
          + (SELECT count(*)::int FROM budget_scenarios WHERE couple_id = (SELECT pg_temp.id('Doomed'))), 0,
          'and its memberships, invitations and budget go with it');
SELECT results_eq($$SELECT token_box IS NULL, status, last_error FROM outbox
                    WHERE couple_id = pg_temp.id('Doomed') AND channel = 'email'$$,
                  $$VALUES (true, 'dead', 'not sent: the invitation was accepted, revoked, expired or deleted first')$$,
                  'the email of its invitation no longer holds the sealed token, and is not sent');
SELECT results_eq($$SELECT action, actor_id FROM audit_log WHERE couple_id = (SELECT pg_temp.id('Doomed'))
                    AND action LIKE 'couple.%' ORDER BY id$$,
                  $$VALUES ('couple.insert', NULL::uuid), ('couple.update', pg_temp.id('paul')),
                           ('couple.delete', pg_temp.id('olivia'))$$,
                  'its audit log stays, recording the deletion and who made it');
SELECT throws_ok($$SELECT delete_couple(pg_temp.id('Doomed'))$$, 'RBNFD', NULL, 'a deleted couple is not found');

-- Outside any JWT and without the operator role, nothing happens.
SET LOCAL SESSION AUTHORIZATION rbac_app;
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('newbie'), 'viewer')$$, 'RBAUT', NULL,
                 'a non-operator session without claims has no acting user');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
