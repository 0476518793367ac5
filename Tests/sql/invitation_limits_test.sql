-- Limits on invitations: a couple's invitations per hour, and the email domains a couple may invite; a refused
-- invitation writes nothing.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'pia']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia');
SELECT pg_temp.new_couple('Other', 'pia');
UPDATE invitation_settings SET per_couple_per_hour = 3;

SELECT lives_ok(format($$SELECT create_invitation(%L, pg_temp.hash('inv_%s'), 'viewer')$$,
                       pg_temp.id('Olivia & Paul'), n))
FROM generate_series(1, 3) n;
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_4'), 'viewer')$$,
                 'RBRAT', NULL, 'the fourth invitation of the hour is refused');
SELECT is((SELECT count(*)::int FROM invitations WHERE couple_id = pg_temp.id('Olivia & Paul')), 3,
          'and written nowhere');
SELECT lives_ok($$SELECT create_invitation(pg_temp.id('Other'), pg_temp.hash('inv_o'), 'viewer')$$,
                'another couple is counted apart');
UPDATE invitations SET created_at = now() - interval '61 minutes' WHERE couple_id = pg_temp.id('Olivia & Paul');
SELECT lives_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_5'), 'viewer')$$,
                'an hour later, inviting works again');

SELECT is(set_invite_domains(pg_temp.id('Other'), ARRAY['Example.COM', 'example.com', 'wedding.test']),
          ARRAY['example.com', 'wedding.test'], 'domains are kept lower case, once each');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Other'), pg_temp.hash('inv_d1'), 'viewer', 'a@gmail.com')$$,
                 'RBINV', 'couple ' || pg_temp.id('Other') || ' invites only addresses at example.com, wedding.test; name one',
                 'an address elsewhere is refused');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Other'), pg_temp.hash('inv_d2'), 'viewer')$$, 'RBINV', NULL,
                 'so is a link for anyone');
SELECT lives_ok($$SELECT create_invitation(pg_temp.id('Other'), pg_temp.hash('inv_d3'), 'viewer', 'b@EXAMPLE.com')$$,
                'an address at an allowed domain is taken, whatever its case');
SELECT throws_ok($$SELECT set_invite_domains(pg_temp.id('Other'), ARRAY['not a domain'])$$, 'RBINV',
                 'not a domain: not a domain');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT set_invite_domains(pg_temp.id('Other'), '{}')$$, 'RBDEN',
                 'only the operator sets the domains a couple may invite');
SELECT pg_temp.act_as_operator();
SELECT is(set_invite_domains(pg_temp.id('Other'), '{}'), '{}'::text[], 'an empty list allows any address again');

SELECT * FROM finish();
ROLLBACK;
