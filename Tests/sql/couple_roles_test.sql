-- Roles a couple defines: authoring, no escalation (authoring, granting, inviting, editing a held role),
-- deleting with reassignment, the limit on how many, expiry, row-level security, and the policy's names kept
-- apart.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia', 'vera', 'ivy', 'xena']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'paul:partner', 'pia:planner');
SELECT pg_temp.new_couple('Xena & Co', 'xena');
CREATE FUNCTION pg_temp.can(p_user text, p_permission text) RETURNS boolean LANGUAGE sql AS $$
    SELECT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id(p_user), p_permission)
$$;

-- Authoring.
SELECT pg_temp.act_as('olivia');
SELECT results_eq($$SELECT name, permissions, couple_defined FROM create_couple_role(pg_temp.id('Olivia & Paul'), 'mom',
                      'May view the guests and the budget', ARRAY['guests.view', 'budget.view', 'guests.view'])$$,
                  $$VALUES ('mom'::text, ARRAY['budget.view', 'guests.view'], true)$$, 'an owner creates a role');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'mom', 'again', '{}')$$, 'RBDUP', NULL,
                 'a name is unique in the couple');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'viewer', 'mine', '{}')$$, 'RBDUP', NULL,
                 'and differs from every role of the policy');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'Best man', 'x', '{}')$$, 'RBINV', NULL,
                 'a name is lower-case letters and underscores');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'helper', 'x', ARRAY['budget.fly'])$$, 'RBINV',
                 NULL, 'permissions come from the registry');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'helper', E'two\nlines', '{}')$$, 'RBINV',
                 NULL, 'a description is one line');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'helper', E'May \u202Eedit', '{}')$$,
                 'RBINV', NULL, 'and holds no bidirectional override');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'helper', E'\u2800', '{}')$$,
                 'RBINV', NULL, 'and shows something');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'helper', 'x', ARRAY['budget.view'])$$, 'RBDEN',
                 NULL, 'a planner (no roles.manage) cannot author roles');
SELECT pg_temp.act_as('paul');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'heir', 'x', ARRAY['couple.delete'])$$,
                 'RBESC', NULL, 'a partner cannot author a role with a permission they lack');
SELECT pg_temp.act_as_operator();
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'heir', 'x', ARRAY['couple.transfer'])$$,
                 'RBINV', 'couple.transfer goes with ownership: a couple''s role cannot grant it',
                 'no one authors a role granting couple.transfer, which hands over nothing one does not own');
SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'heir', 'May delete the couple', ARRAY['couple.delete']);
SELECT is((SELECT count(*)::int FROM couple_roles WHERE couple_id = pg_temp.id('Olivia & Paul')), 2,
          'refusals created nothing; the operator authors anything');
SELECT results_eq($$SELECT name, couple_defined FROM couple_roles(pg_temp.id('Olivia & Paul'))$$,
                  $$VALUES ('owner'::text, false), ('partner', false), ('planner', false), ('viewer', false),
                           ('heir', true), ('mom', true)$$, 'the couple''s roles list after the policy''s');

-- Granting and inviting.
SELECT pg_temp.act_as('paul');
SELECT is((grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'mom')).role, 'mom',
          'a partner (roles.assign, holding every permission of the role) grants it');
SELECT ok(pg_temp.can('vera', 'guests.view') AND pg_temp.can('vera', 'budget.view'), 'the role grants its permissions');
SELECT ok(NOT pg_temp.can('vera', 'budget.edit') AND NOT pg_temp.can('vera', 'expenses.view'), 'and nothing else');
SELECT results_eq($$SELECT role, couple_role_permissions FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('vera')])$$,
                  $$VALUES ('mom'::text, 'budget.view guests.view'::text)$$,
                  'what caches load carries the couple''s role with its permissions');
SELECT is((SELECT couple_role_permissions FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('paul')])),
          NULL, 'and a policy role without them');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('ivy'), 'heir')$$, 'RBESC', NULL,
                 'a partner cannot grant a role with a permission they lack');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('heir'), 'heir')$$, 'RBESC', NULL,
                 'nor invite to it');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('mom'), 'mom')$$, 'RBESC', NULL,
                 'a planner (no roles.assign) cannot invite to a couple''s role');
SELECT pg_temp.act_as('paul');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('mom'), 'mom');
SELECT results_eq($$SELECT role, role_description FROM invitation_preview(pg_temp.hash('mom'))$$,
                  $$VALUES ('mom'::text, 'May view the guests and the budget'::text)$$,
                  'the invitation page learns the role''s description');
SELECT pg_temp.act_as_operator();
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Xena & Co'), pg_temp.id('ivy'), 'mom')$$, 'RBINV', NULL,
                 'a role belongs to its couple alone');
SELECT throws_ok($$INSERT INTO memberships (couple_id, user_id, role) VALUES (pg_temp.id('Xena & Co'), pg_temp.id('ivy'), 'mom')$$,
                 'RBINV', NULL, 'raw SQL cannot name another couple''s role either');

-- Editing.
SELECT pg_temp.act_as('paul');
CREATE TEMPORARY TABLE before_edit AS SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul');
SELECT throws_ok($$SELECT edit_couple_role(pg_temp.id('Olivia & Paul'), 'mom', NULL, ARRAY['budget.view', 'couple.delete'])$$,
                 'RBESC', NULL, 'an editor cannot make a held role grant what they lack');
SELECT ok(NOT pg_temp.can('vera', 'couple.delete'), 'and the holder gained nothing');
SELECT pg_temp.act_as('olivia');
SELECT throws_ok($$SELECT edit_couple_role(pg_temp.id('Olivia & Paul'), 'mom', NULL, ARRAY['budget.view', 'couple.transfer'])$$,
                 'RBINV', NULL, 'nor can an owner make a role grant couple.transfer');
SELECT throws_ok($$INSERT INTO couple_role_permissions (couple_id, role, permission)
                   VALUES (pg_temp.id('Olivia & Paul'), 'mom', 'couple.transfer')$$,
                 '23514', NULL, 'nor raw SQL');
SELECT ok(NOT pg_temp.can('vera', 'couple.transfer'), 'and the holder gained nothing');
SELECT pg_temp.act_as('paul');
SELECT results_eq($$SELECT permissions FROM edit_couple_role(pg_temp.id('Olivia & Paul'), 'mom', NULL,
                                                            ARRAY['budget.view', 'guests.view', 'guests.edit'])$$,
                  $$VALUES (ARRAY['budget.view', 'guests.edit', 'guests.view'])$$, 'a partner edits it within their own');
SELECT ok(pg_temp.can('vera', 'guests.edit'), 'the holder has the new permission at the next check');
SELECT ok((SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul')) > (SELECT revision FROM before_edit),
          'the couple''s revision advanced, so caches drop its sets');
SELECT pg_temp.act_as_operator();
SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'role_author', 'Authors roles',
                          ARRAY['roles.manage', 'guests.view', 'guests.edit', 'budget.view', 'collaborators.view']);
SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('ivy'), 'role_author');
SELECT pg_temp.act_as('ivy');
SELECT throws_ok($$SELECT edit_couple_role(pg_temp.id('Olivia & Paul'), 'mom', NULL, ARRAY['guests.view'])$$, 'RBESC',
                 NULL, 'changing what a held role grants needs roles.assign');
SELECT lives_ok($$SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'usher', 'Sees the guests', ARRAY['guests.view'])$$,
                'roles.manage alone authors a role within its permissions');
SELECT lives_ok($$SELECT edit_couple_role(pg_temp.id('Olivia & Paul'), 'usher', 'Sees the guest list')$$,
                'and edits one nobody holds');
SELECT pg_temp.act_as_operator();

-- Expiry through a couple's role, at the boundary.
UPDATE memberships SET expires_at = now() + interval '1 microsecond' WHERE user_id = pg_temp.id('vera');
SELECT ok(pg_temp.can('vera', 'guests.view'), 'an instant before expiry, the couple''s role grants');
UPDATE memberships SET expires_at = now() WHERE user_id = pg_temp.id('vera');
SELECT ok(NOT pg_temp.can('vera', 'guests.view'), 'at the instant of expiry, nothing');
UPDATE memberships SET expires_at = NULL WHERE user_id = pg_temp.id('vera');

-- Row-level security with a couple's role.
SET LOCAL ROLE rbac_app;
SELECT pg_temp.act_as('vera');
SELECT is((SELECT count(*)::int FROM couple_roles), 4, 'a member sees the couple''s roles');
SELECT is((SELECT count(*)::int FROM couples), 1, 'and the couple, through the couple''s role');
SELECT is_empty($$SELECT 1 FROM invitations$$, 'but not the pending invitation: mom lacks collaborators.invite');
SELECT pg_temp.act_as('xena');
SELECT is_empty($$SELECT 1 FROM couple_roles$$, 'another couple''s member sees none of them');
RESET ROLE;
SELECT pg_temp.act_as_operator();

-- Deleting.
SELECT pg_temp.act_as('paul');
SELECT throws_ok($$SELECT delete_couple_role(pg_temp.id('Olivia & Paul'), 'mom')$$, 'RBHLD', NULL,
                 'a held role is not deleted');
SELECT throws_ok($$SELECT delete_couple_role(pg_temp.id('Olivia & Paul'), 'mom', 'owner')$$, 'RBINV', NULL,
                 'its members do not move to owner');
SELECT throws_ok($$SELECT delete_couple_role(pg_temp.id('Olivia & Paul'), 'mom', 'mom')$$, 'RBINV',
                 'members of mom cannot move to the role being deleted', 'nor to the role being deleted');
SELECT lives_ok($$SELECT delete_couple_role(pg_temp.id('Olivia & Paul'), 'mom', 'viewer')$$,
                'with --reassign, its members move in the same transaction');
SELECT is((SELECT role FROM memberships WHERE user_id = pg_temp.id('vera')), 'viewer', 'the member holds the new role');
SELECT is((SELECT role FROM invitations WHERE token_hash = pg_temp.hash('mom')), 'viewer', 'and so does the pending invitation');
SELECT ok(NOT EXISTS (SELECT 1 FROM couple_roles WHERE name = 'mom'), 'the role is gone');
SELECT pg_temp.act_as_operator();
SELECT ok(EXISTS (SELECT 1 FROM audit_log WHERE action = 'couple_role.delete'
                  AND couple_id = (SELECT pg_temp.id('Olivia & Paul'))), 'the couple''s audit log records it');

-- A couple defines at most 100 roles, through the functions or by raw SQL; deleting one makes room.
SELECT pg_temp.act_as_operator();
INSERT INTO couple_roles (couple_id, name, description)
SELECT pg_temp.id('Xena & Co'), 'r_' || chr(97 + n / 26) || chr(97 + n % 26), 'Helper' FROM generate_series(0, 98) n;
SELECT lives_ok($$SELECT create_couple_role(pg_temp.id('Xena & Co'), 'last', 'The hundredth', '{}')$$,
                'a couple defines up to 100 roles');
SELECT throws_ok($$SELECT create_couple_role(pg_temp.id('Xena & Co'), 'one_more', 'x', '{}')$$, 'RBQTA',
                 NULL, 'and no more through the functions');
SELECT throws_ok($$INSERT INTO couple_roles (couple_id, name, description) VALUES (pg_temp.id('Xena & Co'), 'raw', 'x')$$,
                 'RBQTA', NULL, 'nor by raw SQL');
SELECT is((SELECT count(*)::int FROM couple_roles WHERE couple_id = pg_temp.id('Xena & Co')), 100,
          'the refusals added nothing');
SELECT lives_ok($$SELECT delete_couple_role(pg_temp.id('Xena & Co'), 'last')$$, 'one goes');
SELECT lives_ok($$SELECT create_couple_role(pg_temp.id('Xena & Co'), 'one_more', 'x', '{}')$$, 'and another fits');

-- The policy cannot take a couple's role name: a conflict with what the couples hold, not a bad document.
SELECT throws_ok($$SELECT apply_policy(jsonb_set(pg_temp.policy_in_force(), '{roles,usher}',
                                                 '{"rank": 5, "description": "x", "permissions": []}'))$$,
                 'RBHLD', 'policy not applied: role "usher" is the name of a role 1 couple(s) defined',
                 'a policy role named like a couple''s role is refused');

-- What checks read of a couple's roles (couple_role_sets) is what the roles' rows say, however they change.
CREATE FUNCTION pg_temp.sets_agree() RETURNS boolean LANGUAGE sql AS $$
    SELECT NOT EXISTS (
        (SELECT couple_id, role, string_agg(permission, ' ' ORDER BY permission) FROM couple_role_permissions
         GROUP BY couple_id, role
         EXCEPT SELECT couple_id, role, permissions FROM couple_role_sets)
        UNION ALL
        (SELECT couple_id, role, permissions FROM couple_role_sets
         EXCEPT SELECT couple_id, role, string_agg(permission, ' ' ORDER BY permission) FROM couple_role_permissions
         GROUP BY couple_id, role))
$$;
CREATE FUNCTION pg_temp.set_of(p_role text) RETURNS text LANGUAGE sql AS $$
    SELECT permissions FROM couple_role_sets WHERE couple_id = pg_temp.id('Olivia & Paul') AND role = p_role
$$;
SELECT ok(pg_temp.sets_agree() AND (SELECT count(*) FROM couple_role_sets) > 0,
          'after the functions created, edited and deleted roles');
SELECT is(pg_temp.set_of('usher'), 'guests.view', 'a role''s set is its permissions, sorted and space-separated');
SELECT ok(NOT EXISTS (SELECT 1 FROM couple_role_sets WHERE role IN ('one_more', 'r_aa')),
          'a role that grants nothing has none');
INSERT INTO couple_role_permissions (couple_id, role, permission)
VALUES (pg_temp.id('Olivia & Paul'), 'usher', 'budget.view'), (pg_temp.id('Olivia & Paul'), 'usher', 'vendors.view');
SELECT is(pg_temp.set_of('usher'), 'budget.view guests.view vendors.view', 'rows added by raw SQL count');
UPDATE couple_role_permissions SET permission = 'expenses.view'
WHERE couple_id = pg_temp.id('Olivia & Paul') AND role = 'usher' AND permission = 'budget.view';
SELECT is(pg_temp.set_of('usher'), 'expenses.view guests.view vendors.view', 'and rows changed by it');
UPDATE couple_role_permissions SET role = 'role_author'
WHERE couple_id = pg_temp.id('Olivia & Paul') AND role = 'usher' AND permission = 'expenses.view';
SELECT ok(pg_temp.set_of('usher') = 'guests.view vendors.view' AND pg_temp.sets_agree(),
          'a row moved to another role leaves one set and joins the other');
DELETE FROM permissions WHERE name = 'vendors.view';
SELECT ok(pg_temp.set_of('usher') = 'guests.view' AND pg_temp.sets_agree(),
          'a permission gone from the registry leaves every set');
DELETE FROM couple_role_permissions WHERE couple_id = pg_temp.id('Olivia & Paul') AND role = 'usher';
SELECT is(pg_temp.set_of('usher'), NULL, 'a role whose rows are all deleted grants nothing');
SELECT delete_couple(pg_temp.id('Olivia & Paul'));
SELECT ok(NOT EXISTS (SELECT 1 FROM couple_role_sets WHERE couple_id = pg_temp.id('Olivia & Paul'))
          AND pg_temp.sets_agree(), 'a deleted couple''s sets go with it');

SELECT * FROM finish();
ROLLBACK;
