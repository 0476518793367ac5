-- user_has_permission and the other permission questions.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia', 'vera', 'sam', 'xena']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'paul:partner', 'pia:planner', 'vera:viewer', 'sam:planner');
UPDATE memberships SET status = 'suspended' WHERE user_id = pg_temp.id('sam');
SELECT pg_temp.new_couple('Xena & Co', 'xena');

SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'budget.edit'), 'a planner may edit the budget');
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'budget.edit'), 'a viewer may not edit the budget');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'budget.view'), 'a viewer may see the budget');
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'collaborators.invite'), 'a viewer may not invite');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), 'couple.delete'), 'an owner may delete the couple');
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'), 'couple.delete'), 'a partner may not delete the couple');
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('sam'), 'budget.view'), 'a suspended member may do nothing');

SELECT is(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'budget.frobnicate'), false, 'an unknown permission is false, not NULL');
SELECT is(user_has_permission(gen_random_uuid(), pg_temp.id('pia'), 'budget.view'), false, 'an unknown couple is false');
SELECT is(user_has_permission(pg_temp.id('Olivia & Paul'), gen_random_uuid(), 'budget.view'), false, 'an unknown user is false');
SELECT is(user_has_permission(NULL, NULL, NULL), false, 'NULL arguments are false, not NULL');
SELECT is(user_has_permission(pg_temp.id('Xena & Co'), pg_temp.id('olivia'), 'budget.view'), false, 'an owner of one couple has nothing in another');

-- The two-argument form reads the caller from request.jwt.claims, as on Supabase.
SELECT is(user_has_permission(pg_temp.id('Olivia & Paul'), 'budget.edit'), false, 'without claims the caller may do nothing');
SELECT pg_temp.act_as('pia');
SELECT is(user_has_permission(pg_temp.id('Olivia & Paul'), 'budget.edit'), true, 'the JWT caller (a planner) may edit the budget');
SELECT is(user_has_permission(pg_temp.id('Olivia & Paul'), 'couple.delete'), false, 'the JWT caller (a planner) may not delete the couple');
SELECT set_config('request.jwt.claims', '{"sub": "not-a-uuid"}', true);
SELECT is(user_has_permission(pg_temp.id('Olivia & Paul'), 'budget.view'), false, 'a sub that is not a UUID may do nothing');
SELECT pg_temp.act_as_operator();

SELECT is(user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('vera')),
          ARRAY['budget.view', 'collaborators.view', 'couple.view', 'expenses.view', 'gifts.view', 'guests.view', 'vendors.view'],
          'a viewer''s permissions, sorted');
SELECT is(user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('xena')), '{}'::text[], 'a non-member has no permissions');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('pia')), 'planner', 'user_role names the role');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('sam')), 'planner', 'user_role of a suspended member still names the role');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('xena')), NULL, 'user_role of a non-member is NULL');
SELECT throws_ok($$SELECT user_role(gen_random_uuid(), pg_temp.id('xena'))$$, 'RBNFD', NULL, 'user_role of an unknown couple is RBNFD');

SELECT ok(NOT can_leave_collaboration(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia')), 'the only owner cannot leave');
SELECT ok(can_leave_collaboration(pg_temp.id('Olivia & Paul'), pg_temp.id('paul')), 'a partner can leave');
SELECT ok(NOT can_leave_collaboration(pg_temp.id('Olivia & Paul'), pg_temp.id('xena')), 'a non-member cannot leave');

-- Members see each other; outsiders see nothing.
SELECT pg_temp.act_as('vera');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia')), 'owner', 'a member may ask another member''s role');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'budget.edit'),
          'and whether another member holds a permission');
SELECT is((SELECT count(*)::int FROM couple_members(pg_temp.id('Olivia & Paul'))), 5, 'a viewer may list the members');
SELECT pg_temp.act_as('xena');
SELECT throws_ok($$SELECT user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'))$$, 'RBDEN', NULL,
                 'an outsider may not ask a member''s permissions');
SELECT throws_ok($$SELECT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), 'couple.delete')$$,
                 'RBDEN', NULL, 'nor whether a member holds one');
SELECT is(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('xena'), 'budget.view'), false,
          'but may ask about themselves');
SELECT throws_ok($$SELECT * FROM couple_members(pg_temp.id('Olivia & Paul'))$$, 'RBDEN', NULL, 'an outsider may not list the members');
SELECT throws_ok($$SELECT * FROM user_couples(pg_temp.id('olivia'))$$, 'RBDEN', NULL, 'a user may not list another user''s couples');
SELECT is((SELECT array_agg(couple_name) FROM user_couples(pg_temp.id('xena'))), ARRAY['Xena & Co'], 'a user lists their own couples');
SELECT pg_temp.act_as_operator();
SELECT set_config('request.jwt.claims', '{"role": "anon"}', true);
SELECT throws_ok($$SELECT * FROM user_couples(pg_temp.id('olivia'))$$, 'RBAUT', NULL, 'claims without a sub are no acting user');
SELECT throws_ok($$SELECT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), 'budget.view')$$,
                 'RBAUT', NULL, 'and may not ask about anyone');
SELECT pg_temp.act_as_operator();
SET LOCAL ROLE rbac_app;
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'budget.edit'),
          'a trusted backend (the application role, no claims) asks about anyone');
RESET ROLE;
SELECT pg_temp.act_as_operator();

-- Pagination: members in the order they joined (then by id), pages of two covering every member exactly once.
SELECT results_eq(
    $$SELECT user_id FROM couple_members(pg_temp.id('Olivia & Paul'))$$,
    $$SELECT user_id FROM memberships WHERE couple_id = pg_temp.id('Olivia & Paul') ORDER BY created_at, user_id$$,
    'members are listed in the order they joined');
SELECT is(
    (SELECT count(*)::int FROM couple_members(pg_temp.id('Olivia & Paul'), 2)), 2, 'a page holds at most the page size');
CREATE FUNCTION pg_temp.all_member_pages(p_couple uuid, p_size integer) RETURNS SETOF uuid LANGUAGE plpgsql AS $$
DECLARE
    v_after uuid;
    v_page uuid[];
BEGIN
    LOOP
        SELECT array_agg(m.user_id ORDER BY m.n) INTO v_page
        FROM couple_members(p_couple, p_size, v_after) WITH ORDINALITY AS m(user_id, email, display_name, role,
                                                                             status, joined_at, expires_at, n);
        EXIT WHEN v_page IS NULL;
        RETURN QUERY SELECT unnest(v_page);
        v_after := v_page[cardinality(v_page)];
    END LOOP;
END $$;
SELECT bag_eq(
    $$SELECT pg_temp.all_member_pages(pg_temp.id('Olivia & Paul'), 2)$$,
    $$SELECT user_id FROM memberships WHERE couple_id = pg_temp.id('Olivia & Paul')$$,
    'following p_after through pages of two lists every member exactly once');
SELECT throws_ok($$SELECT * FROM couple_members(pg_temp.id('Olivia & Paul'), 0)$$, 'RBINV', NULL, 'a page size of 0 is refused');
SELECT throws_ok($$SELECT * FROM couple_members(pg_temp.id('Olivia & Paul'), 2, pg_temp.id('xena'))$$, 'RBNFD', NULL,
                 'a page after someone who is no member, without their place, is refused');
SELECT is((SELECT count(*)::int FROM couple_members(pg_temp.id('Olivia & Paul'), 50, pg_temp.id('xena'), '-infinity')),
          (SELECT count(*)::int FROM memberships WHERE couple_id = pg_temp.id('Olivia & Paul')),
          'with the place the page before read, a page follows it whoever has left');
SELECT throws_ok($$SELECT * FROM user_couples(pg_temp.id('xena'), 2, pg_temp.id('Olivia & Paul'))$$, 'RBNFD', NULL,
                 'a page of a user''s couples after one they are not in, without its place, is refused');

-- user_roles: one row per (couple, user) pair, in the order asked, from one snapshot, with the policy revision.
SELECT results_eq(
    $$SELECT revision IS NOT NULL, role, policy_revision = (SELECT revision FROM policy_revision)
      FROM user_roles(
          ARRAY[pg_temp.id('Olivia & Paul'), pg_temp.id('Olivia & Paul'), pg_temp.id('Olivia & Paul'),
                pg_temp.id('Olivia & Paul'), gen_random_uuid(), pg_temp.id('Olivia & Paul')],
          ARRAY[pg_temp.id('vera'), pg_temp.id('pia'), pg_temp.id('sam'), pg_temp.id('xena'), pg_temp.id('pia'),
                pg_temp.id('vera')])$$,
    $$VALUES (true, 'viewer', true), (true, 'planner', true), (true, NULL, true), (true, NULL, true),
             (false, NULL, true), (true, 'viewer', true)$$,
    'user_roles answers each pair in order: viewer, planner, suspended, outsider, unknown couple, viewer again');
SELECT is(
    (SELECT revision FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('vera')])),
    (SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul')), 'a role comes with the couple''s revision');
SELECT is((SELECT count(*)::int FROM user_roles('{}', '{}')), 0, 'no pairs, no rows');
SELECT ok(
    (SELECT 'plan_cache_mode=force_generic_plan' = ANY (proconfig) FROM pg_proc
     WHERE oid = 'public.user_roles(uuid[], uuid[])'::regprocedure),
    'user_roles keeps one generic plan, not a new plan for every call');
SELECT throws_ok(
    $$SELECT * FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('vera'), pg_temp.id('pia')])$$,
    'RBINV', 'user_roles needs one user per couple, not 1 couples and 2 users', 'pairs of unequal length are refused');

-- role_permission_sets: what each role grants, at the policy revision user_roles reports.
SELECT is(
    (SELECT permissions FROM role_permission_sets() WHERE role = 'viewer'),
    user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('vera')), 'a role''s set holds what its members hold');
SELECT is(
    (SELECT array_agg(role ORDER BY role) FROM role_permission_sets()), (SELECT array_agg(name ORDER BY name) FROM roles),
    'role_permission_sets lists every role');
SELECT is(
    (SELECT count(DISTINCT policy_revision)::int FROM role_permission_sets()), 1, 'one policy revision in every row');
CREATE TEMP TABLE before_change AS
    SELECT (SELECT revision FROM policy_revision) AS policy, (SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul')) AS couple;
DELETE FROM role_permissions WHERE role = 'viewer' AND permission = 'budget.view';
SELECT is(
    (SELECT policy_revision FROM role_permission_sets() LIMIT 1), (SELECT policy + 1 FROM before_change),
    'a change to what roles grant advances the policy revision');
SELECT results_eq(
    $$SELECT revision, policy_revision FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('vera')])$$,
    $$SELECT couple, policy + 1 FROM before_change$$,
    'user_roles then reports the new policy revision, and the couple''s revision as it was: no couple is written');
SELECT ok(
    NOT (SELECT permissions FROM role_permission_sets() WHERE role = 'viewer') @> ARRAY['budget.view'],
    'and the role''s set no longer holds the permission taken away');
UPDATE memberships SET role = 'planner' WHERE user_id = pg_temp.id('vera');
SELECT is(
    (SELECT policy_revision FROM role_permission_sets() LIMIT 1), (SELECT policy + 1 FROM before_change),
    'a membership change leaves the policy revision alone');
SELECT is(
    (SELECT count(*)::int FROM policy_revision), 1, 'the policy revision is one row');
SELECT throws_ok($$INSERT INTO policy_revision VALUES (7)$$, '23505', NULL, 'a second policy revision row is refused');

SET LOCAL ROLE rbac_app;
SELECT throws_ok($$SELECT * FROM user_roles(ARRAY[gen_random_uuid()], ARRAY[gen_random_uuid()])$$, '42501', NULL,
                 'the application role may not read members'' roles in batches: they are for trusted backends');
SELECT throws_ok($$SELECT * FROM role_permission_sets()$$, '42501', NULL,
                 'nor the roles'' permission sets');
SELECT throws_ok($$SELECT * FROM policy_revision$$, '42501', NULL, 'nor the policy revision table');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
