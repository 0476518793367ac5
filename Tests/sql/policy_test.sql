-- apply_policy: validation that names what is wrong and changes nothing, idempotence, and effect.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

CREATE TEMPORARY TABLE base AS SELECT pg_temp.policy_in_force() AS policy;
GRANT SELECT ON base TO PUBLIC;
CREATE TEMPORARY TABLE before AS SELECT role, permission FROM role_permissions;

SELECT lives_ok($$SELECT apply_policy((SELECT policy FROM base))$$, 'the current policy, flattened, applies again');
SELECT set_eq($$SELECT role, permission FROM role_permissions$$, $$SELECT role, permission FROM before$$,
              'and applying it changes nothing');

SELECT throws_like(
    $$SELECT apply_policy(jsonb_set((SELECT policy FROM base), '{roles,viewer,permissions}', '["budget.view", "budget.veiw"]'))$$,
    '%role "viewer" lists unknown permission "budget.veiw"%', 'an unknown permission is named');
SELECT throws_ok(
    $$SELECT apply_policy(jsonb_set((SELECT policy FROM base), '{roles,viewer,permissions}', '["budget.veiw"]'))$$,
    'RBPOL', NULL, 'an invalid policy is RBPOL');
SELECT throws_like(
    $$SELECT apply_policy(jsonb_set((SELECT policy FROM base), '{roles,planner,grants}', '["viewer", "intern"]'))$$,
    '%role "planner" grants unknown role "intern"%', 'an unknown granted role is named');
SELECT throws_like(
    $$SELECT apply_policy(jsonb_set(jsonb_set((SELECT policy FROM base), '{roles,viewer,inherits}', '["planner"]'),
                                    '{roles,planner,inherits}', '["viewer"]'))$$,
    '%roles inherit from themselves: planner, viewer%', 'an inheritance cycle is named');
-- couple.transfer goes with ownership: transfer_ownership refuses anyone else, whom a check would tell "allowed".
SELECT throws_like(
    $$SELECT apply_policy(jsonb_insert((SELECT policy FROM base), '{roles,partner,permissions,0}', '"couple.transfer"'))$$,
    '%couple.transfer goes with ownership, and only "owner" may hold it, not: partner%',
    'a role but the owner given couple.transfer is named');
SELECT throws_like(
    $$SELECT apply_policy(jsonb_set((SELECT policy FROM base), '{roles,viewer,inherits}', '["owner"]'))$$,
    '%only "owner" may hold it, not: viewer%', 'and so is one that inherits it');
SELECT throws_like(
    $$SELECT apply_policy((SELECT policy FROM base) #- '{roles,owner}')$$,
    '%must define the "owner" role%', 'the owner role is required');
SELECT throws_like($$SELECT apply_policy('{"roles": []}')$$, '%"permissions" and "roles" objects%', 'the shape is checked');
-- A rank is an integer as the roles table keeps it; written 4.0, it is one.
SELECT throws_like(
    format($$SELECT apply_policy(jsonb_set((SELECT policy FROM base), '{roles,viewer,rank}', %L))$$, rank),
    '%role "viewer" needs a "description" string and an integer "rank" from -2147483648 to 2147483647%',
    'a rank of ' || rank || ' is refused, named')
FROM unnest(ARRAY['4.5', '3000000000', '-2147483649', '"4"', 'null']) AS rank;
-- A key nothing reads is named: "inherit" for "inherits" would leave the role without its ancestors' permissions.
SELECT throws_like(
    $$SELECT apply_policy(jsonb_set((SELECT policy FROM base), '{roles,planner,inherit}', '["viewer"]'))$$,
    '%role "planner" names "inherit", which a role does not take; it takes description, grants, inherits, permissions, rank%',
    'a key a role does not take is named');
SELECT throws_like(
    $$SELECT apply_policy((SELECT policy FROM base) || '{"role": {}}')$$,
    '%the policy names "role", which it does not take; it takes permissions, roles%',
    'a key the policy does not take is named');

SELECT pg_temp.new_user('olivia');
SELECT pg_temp.new_user('pia');
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'pia:planner');
CREATE TEMPORARY TABLE without_planner AS
    SELECT policy #- '{roles,planner}' #- '{roles,partner,grants}' #- '{roles,owner,grants}' AS policy FROM base;
GRANT SELECT ON without_planner TO PUBLIC;
-- Sound in itself, such a policy is refused for what the couples hold: a conflict (RBHLD), not a bad document.
SELECT throws_ok($$SELECT apply_policy((SELECT policy FROM without_planner))$$, 'RBHLD',
    'policy not applied: role "planner" is held by 1 membership(s) or invitation(s) but is not in the policy',
    'a role still held cannot go');
SELECT throws_ok(
    $$SELECT apply_policy(jsonb_set((SELECT policy FROM without_planner), '{roles,viewer,permissions}', '["budget.veiw"]'))$$,
    'RBPOL', 'invalid policy: role "viewer" lists unknown permission "budget.veiw"; role "planner" is held by 1 '
             'membership(s) or invitation(s) but is not in the policy',
    'a document wrong as well is an invalid policy, naming both at once');
SELECT set_eq($$SELECT role, permission FROM role_permissions$$, $$SELECT role, permission FROM before$$,
              'every refused policy changed nothing');

-- Inheritance is transitive, and a change takes effect at once.
SELECT lives_ok(
    $$SELECT apply_policy(jsonb_set(jsonb_set((SELECT policy FROM base), '{roles,viewer,permissions}', '["budget.view", "gifts.edit"]'),
                                    '{roles,planner,inherits}', '["viewer"]'))$$,
    'a policy giving viewers gifts.edit applies');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'gifts.edit'),
          'a planner inherits it from viewer at once');

SELECT lives_ok($$SELECT apply_policy(jsonb_set((SELECT policy FROM base), '{roles,viewer,rank}', '70e-1'))$$,
                'a rank written 70e-1 applies');
SELECT is((SELECT rank FROM roles WHERE name = 'viewer'), 7, 'as 7');

SELECT pg_temp.act_as('olivia');
SELECT throws_ok($$SELECT apply_policy((SELECT policy FROM base))$$, 'RBDEN', NULL, 'only the operator may change the policy');

SELECT * FROM finish();
ROLLBACK;
