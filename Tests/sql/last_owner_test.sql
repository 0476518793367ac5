-- No sequence of operations leaves a couple without an active owner; ownership moves atomically.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia', 'oscar']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'paul:partner', 'pia:planner');

SELECT throws_ok($$SELECT leave_couple(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'))$$, 'RBLST',
                 'couple "Olivia & Paul" must keep at least one owner', 'the sole owner cannot leave');
SELECT throws_ok($$SELECT remove_member(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'))$$, 'RBLST', NULL, 'the sole owner cannot be removed');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), 'partner')$$, 'RBLST', NULL, 'the sole owner cannot be demoted');
SELECT throws_ok($$SELECT suspend_member(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'))$$, 'RBLST', NULL, 'the sole owner cannot be suspended');
SELECT throws_ok($$DELETE FROM users WHERE id = pg_temp.id('olivia')$$, 'RBLST', NULL, 'the sole owner''s user cannot be deleted');
SELECT throws_ok($$UPDATE memberships SET role = 'viewer' WHERE user_id = pg_temp.id('olivia')$$, 'RBLST', NULL, 'a raw UPDATE cannot demote the sole owner');
SELECT throws_ok($$UPDATE memberships SET status = 'suspended' WHERE couple_id = pg_temp.id('Olivia & Paul')$$, 'RBLST', NULL,
                 'a raw UPDATE cannot suspend everyone');
SELECT throws_ok($$DELETE FROM memberships WHERE couple_id = pg_temp.id('Olivia & Paul')$$, 'RBLST', NULL, 'a raw DELETE cannot remove everyone');
SELECT is((SELECT count(*)::int FROM memberships WHERE couple_id = pg_temp.id('Olivia & Paul')), 3, 'every refusal changed nothing');
SELECT pg_temp.act_as('olivia');
SELECT ok(NOT can_leave_collaboration(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia')), 'can_leave_collaboration agrees');
SELECT pg_temp.act_as_operator();

-- Transfer: the new owner holds the role before the old one loses it.
SELECT pg_temp.act_as('paul');
SELECT throws_ok($$SELECT transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'))$$, 'RBDEN', NULL,
                 'a partner cannot take ownership');
-- couple.transfer given to another role hands over nothing: its holder owns nothing to hand over. Neither a
-- policy (policy_test) nor a couple's own role (couple_roles_test) gives it so; raw SQL can.
SELECT pg_temp.act_as_operator();
INSERT INTO role_permissions (role, permission) VALUES ('planner', 'couple.transfer');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'))$$, 'RBDEN',
                 'permission denied: only an owner hands over couple ' || pg_temp.id('Olivia & Paul'),
                 'a member who holds couple.transfer but owns nothing makes nobody an owner');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('paul')), 'partner', 'and the partner stays one');
SELECT pg_temp.act_as_operator();
DELETE FROM role_permissions WHERE role = 'planner' AND permission = 'couple.transfer';
SELECT pg_temp.act_as('olivia');
SELECT throws_ok($$SELECT transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('oscar'))$$, 'RBNFD', NULL,
                 'ownership goes only to a member');
SELECT is((transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'))).role, 'owner', 'the owner hands ownership to the partner');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia')), 'partner', 'the previous owner is now a partner');
SELECT pg_temp.act_as_operator();
SELECT is((transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'viewer')).role, 'owner', 'the operator hands ownership to the planner');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('paul')), 'viewer', 'every other owner gets the role the operator named');

-- With two owners, one may go.
SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), 'owner');
SELECT lives_ok($$SELECT leave_couple(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'))$$, 'one of two owners leaves');
SELECT throws_ok($$SELECT leave_couple(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'))$$, 'RBLST', NULL, 'but not the second');

-- A suspended owner does not count.
SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'), 'owner');
SELECT suspend_member(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'));
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), 'viewer')$$, 'RBLST', NULL,
                 'a suspended owner does not keep the couple owned');

-- Deleting the couple itself removes all its members.
SELECT lives_ok($$DELETE FROM couples WHERE id = pg_temp.id('Olivia & Paul')$$, 'a couple can be deleted with its owner');
SELECT is((SELECT count(*)::int FROM memberships WHERE couple_id = pg_temp.id('Olivia & Paul')), 0, 'and its memberships are gone');

-- Every membership write advances the couple's revision.
SELECT pg_temp.new_couple('Revisions', 'oscar');
SELECT is((SELECT revision FROM couples WHERE id = pg_temp.id('Revisions')), 1::bigint, 'the first member is revision 1');
SELECT grant_role(pg_temp.id('Revisions'), pg_temp.id('pia'), 'viewer');
SELECT is((SELECT revision FROM couples WHERE id = pg_temp.id('Revisions')), 2::bigint, 'a grant advances the revision');

SELECT * FROM finish();
ROLLBACK;
