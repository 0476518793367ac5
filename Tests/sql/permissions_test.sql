-- user_has_permission and the other permission questions.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia', 'vera', 'sam', 'xena']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia');
SELECT pg_temp.add_member('Olivia & Paul', 'paul', 'partner');
SELECT pg_temp.add_member('Olivia & Paul', 'pia', 'planner');
SELECT pg_temp.add_member('Olivia & Paul', 'vera', 'viewer');
SELECT pg_temp.add_member('Olivia & Paul', 'sam', 'planner');
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
SELECT is((SELECT count(*)::int FROM couple_members(pg_temp.id('Olivia & Paul'))), 5, 'a viewer may list the members');
SELECT pg_temp.act_as('xena');
SELECT throws_ok($$SELECT user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'))$$, 'RBDEN', NULL,
                 'an outsider may not ask a member''s permissions');
SELECT throws_ok($$SELECT * FROM couple_members(pg_temp.id('Olivia & Paul'))$$, 'RBDEN', NULL, 'an outsider may not list the members');
SELECT throws_ok($$SELECT * FROM user_couples(pg_temp.id('olivia'))$$, 'RBDEN', NULL, 'a user may not list another user''s couples');
SELECT is((SELECT array_agg(couple_name) FROM user_couples(pg_temp.id('xena'))), ARRAY['Xena & Co'], 'a user lists their own couples');
SELECT pg_temp.act_as_operator();
SELECT set_config('request.jwt.claims', '{"role": "anon"}', true);
SELECT throws_ok($$SELECT * FROM user_couples(pg_temp.id('olivia'))$$, 'RBAUT', NULL, 'claims without a sub are no acting user');
SELECT pg_temp.act_as_operator();

-- Pagination: pages of two, by member id, cover every member exactly once.
SELECT is(
    (SELECT count(*)::int FROM couple_members(pg_temp.id('Olivia & Paul'), 2)), 2, 'a page holds at most the page size');
CREATE FUNCTION pg_temp.all_member_pages(p_couple uuid, p_size integer) RETURNS SETOF uuid LANGUAGE plpgsql AS $$
DECLARE
    v_after uuid;
    v_page uuid[];
BEGIN
    LOOP
        SELECT array_agg(user_id ORDER BY user_id) INTO v_page FROM couple_members(p_couple, p_size, v_after);
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

-- user_permission_sets: one row per (couple, user) pair, in the order asked, from one snapshot.
SELECT results_eq(
    $$SELECT revision IS NOT NULL, permissions @> ARRAY['budget.edit'], cardinality(permissions) > 0
      FROM user_permission_sets(
          ARRAY[pg_temp.id('Olivia & Paul'), pg_temp.id('Olivia & Paul'), pg_temp.id('Olivia & Paul'),
                pg_temp.id('Olivia & Paul'), gen_random_uuid(), pg_temp.id('Olivia & Paul')],
          ARRAY[pg_temp.id('vera'), pg_temp.id('pia'), pg_temp.id('sam'), pg_temp.id('xena'), pg_temp.id('pia'),
                pg_temp.id('vera')])$$,
    $$VALUES (true, false, true), (true, true, true), (true, false, false), (true, false, false),
             (false, false, false), (true, false, true)$$,
    'user_permission_sets answers each pair in order: viewer, planner, suspended, outsider, unknown couple, viewer again');
SELECT is(
    (SELECT permissions FROM user_permission_sets(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('vera')])),
    user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('vera')), 'a set holds what user_permissions lists');
SELECT is(
    (SELECT revision FROM user_permission_sets(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('vera')])),
    (SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul')), 'a set carries the couple''s revision');
SELECT is((SELECT count(*)::int FROM user_permission_sets('{}', '{}')), 0, 'no pairs, no rows');
SELECT ok(
    (SELECT 'plan_cache_mode=force_generic_plan' = ANY (proconfig) FROM pg_proc
     WHERE oid = 'public.user_permission_sets(uuid[], uuid[])'::regprocedure),
    'user_permission_sets keeps one generic plan (sql/0015), not a new plan for every call');
SELECT throws_ok(
    $$SELECT * FROM user_permission_sets(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('vera'), pg_temp.id('pia')])$$,
    'RBINV', 'user_permission_sets needs one user per couple, not 1 couples and 2 users',
    'pairs of unequal length are refused');
SET LOCAL ROLE rbac_app;
SELECT throws_ok($$SELECT * FROM user_permission_sets(ARRAY[gen_random_uuid()], ARRAY[gen_random_uuid()])$$, '42501', NULL,
                 'the application role may not read permission sets: they are for trusted backends');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
