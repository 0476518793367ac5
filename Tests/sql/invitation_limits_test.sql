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
-- It names when the next may be made: once enough have left the hour to bring the couple under the limit.
CREATE FUNCTION pg_temp.refusal() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_refused'), 'viewer');
    RETURN NULL;
EXCEPTION WHEN SQLSTATE 'RBRAT' THEN
    DECLARE v_message text; v_detail text;
    BEGIN
        GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
        RETURN v_message || ' | ' || v_detail;
    END;
END $$;
CREATE FUNCTION pg_temp.utc(p_at timestamptz, p_format text) RETURNS text LANGUAGE sql AS $$
    SELECT to_char(to_timestamp(ceil(extract(epoch FROM p_at))) AT TIME ZONE 'UTC', p_format)
$$;
UPDATE invitations SET created_at = now() - (interval '10 minutes' * (2 + n))
FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM invitations WHERE couple_id = pg_temp.id('Olivia & Paul')) o
WHERE invitations.id = o.id;
SELECT is(pg_temp.refusal(),
          format('couple %s has made 3 invitations in the last hour, the most allowed; the next may be made at %s | %s',
                 pg_temp.id('Olivia & Paul'), pg_temp.utc(now() + interval '10 minutes', 'YYYY-MM-DD HH24:MI:SS "UTC"'),
                 pg_temp.utc(now() + interval '10 minutes', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
          'at the limit, when the oldest of the hour leaves it (to the second, rounded up)');
UPDATE invitation_settings SET per_couple_per_hour = 2;
SELECT matches(pg_temp.refusal(), ' \| ' || pg_temp.utc(now() + interval '20 minutes', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '$',
               'past it, when the second oldest does');
UPDATE invitation_settings SET per_couple_per_hour = 3;
UPDATE invitations SET created_at = now() WHERE couple_id = pg_temp.id('Olivia & Paul');
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
SELECT throws_ok($$SELECT set_invite_domains(pg_temp.id('Other'), ARRAY['example.com', 'not a domain'])$$, 'RBINV',
                 'not a domain: ''not a domain''');
SELECT throws_ok($$SELECT set_invite_domains(pg_temp.id('Other'), ARRAY[U&'exa\2061mple.com'])$$, 'RBINV',
                 U&'not a domain: ''exa\2061mple.com'', which holds an invisible character (a zero-width joiner, a '
                 'direction mark, ...)');
SELECT throws_ok(format('SELECT set_invite_domains(%L, %L)', pg_temp.id('Other'), ARRAY[domain]), 'RBINV',
                 format('not a domain: %L, %s', domain, says), format('%s is refused, saying what to give', domain))
FROM (VALUES ('https://shop.example.com:8443/', 'a URL: give its domain alone (shop.example.com)'),
             ('@example.com', 'which holds an @: give what follows it alone (example.com)'),
             ('pia@example.com', 'which holds an @: give what follows it alone (example.com)'),
             ('*.example.com', 'a pattern: name each domain, since each is matched exactly'),
             ('example.com.', 'which ends in a dot: give it without (example.com)')) AS t(domain, says);
SELECT throws_ok(format('SELECT set_invite_domains(%L, %L)', pg_temp.id('Other'), domains), 'RBINV', NULL,
                 format('%s is refused', label))
FROM (VALUES (ARRAY['example..com'], 'an empty label'), (ARRAY[repeat('a', 64) || '.com'], 'a label of 64'),
             (ARRAY[repeat('a.', 126) || 'aa'], 'a domain of 254'), (ARRAY['example.com', NULL], 'a NULL'),
             (ARRAY['localhost'], 'a name without a dot'), (ARRAY['https://'], 'a scheme alone'),
             (ARRAY['example.com@'], 'nothing after an @')) AS t(domains, label);
SELECT throws_ok(format('SELECT set_invite_domains(%L, %L)', pg_temp.id('Other'),
                        ARRAY(SELECT 'd' || n || '.example' FROM generate_series(1, 101) n)),
                 'RBINV', 'a couple may name at most 100 domains to invite, not 101');
SELECT is((SELECT invite_domains FROM couples WHERE id = pg_temp.id('Other')), ARRAY['example.com', 'wedding.test'],
          'and nothing changes');
SELECT is(cardinality(set_invite_domains(pg_temp.id('Other'),
                                         ARRAY(SELECT 'd' || n % 100 || '.example' FROM generate_series(1, 150) n))),
          100, 'a hundred, some named twice, are taken');

-- Domains beyond ASCII (IDNA): the list and an address compare in the form DNS knows, however each is written.
SELECT is(array[rbac.punycode(sample), rbac.punycode_decode(expected)], array[expected, sample],
          format('Punycode of RFC 3492''s sample %s, both ways', name))
FROM (VALUES ('A', E'\u0644\u064A\u0647\u0645\u0627\u0628\u062A\u0643\u0644\u0645\u0648\u0634\u0639\u0631\u0628\u064A\u061F',
              'egbpdaj6bu4bxfgehfvwxn'),
             ('B', E'\u4ED6\u4EEC\u4E3A\u4EC0\u4E48\u4E0D\u8BF4\u4E2D\u6587', 'ihqwcrb4cv8a8dqg056pqjye'),
             ('D', E'Pro\u010Dprost\u011Bnemluv\u00ED\u010Desky', 'Proprostnemluvesky-uyb24dma41a'),
             ('G', E'\u306A\u305C\u307F\u3093\u306A\u65E5\u672C\u8A9E\u3092\u8A71\u3057\u3066\u304F\u308C\u306A\u3044\u306E\u304B',
              'n8jok5ay5dzabd5bym9f0cm5685rrjetr6pdxa'),
             ('L', E'3\u5E74B\u7D44\u91D1\u516B\u5148\u751F', '3B-ww4c5e180e575a65lsy2b'),
             ('R', E'\u3072\u3068\u3064\u5C4B\u6839\u306E\u4E0B2', '2-u9tlzr9756bt3uc0v')) AS t(name, sample, expected);
SELECT is(set_invite_domains(pg_temp.id('Other'), ARRAY[E'B\u00FCcher.Example', 'XN--MNCHEN-3YA.example',
                                                       E'zoe\u0308.example']),
          ARRAY['xn--bcher-kva.example', 'xn--mnchen-3ya.example', 'xn--zo-ija.example'],
          'a domain beyond ASCII is kept as DNS knows it: lower case, composed, in Punycode');
SELECT is(rbac.ascii_domain(E'\uFF22\u00FC\u00ADcher\u3002\uFF45xample'), 'xn--bcher-kva.example',
          'and mapped as IDNA maps it: compatibility forms, other full stops and ignored characters');
-- Out of the hour's limit.
UPDATE invitation_settings SET per_couple_per_hour = 10;
SELECT lives_ok(format($$SELECT create_invitation(pg_temp.id('Other'), pg_temp.hash(%L), 'viewer', %L)$$,
                       'inv_idn_' || n, address), format('an address at %s is taken', address))
FROM unnest(ARRAY[E'ann@b\u00FCcher.example', 'ann@xn--bcher-kva.example', E'ann@M\u00FCnchen.example',
                  E'ann@zo\u00EB.example', E'ann@\uFF42\u00FCcher\uFF61example']) WITH ORDINALITY AS t(address, n);
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Other'), pg_temp.hash('inv_idn_x'), 'viewer',
                                            E'ann@bucher.example')$$, 'RBINV',
                 'couple ' || pg_temp.id('Other') || E' invites only addresses at b\u00FCcher.example '
                 '(xn--bcher-kva.example), m\u00FCnchen.example (xn--mnchen-3ya.example), zo\u00EB.example '
                 '(xn--zo-ija.example); name one',
                 'an address at a domain that only looks alike is refused, each domain named as people type it');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT set_invite_domains(pg_temp.id('Other'), '{}')$$, 'RBDEN',
                 'only the operator sets the domains a couple may invite');
SELECT pg_temp.act_as_operator();
SELECT is(set_invite_domains(pg_temp.id('Other'), '{}'), '{}'::text[], 'an empty list allows any address again');

SELECT * FROM finish();
ROLLBACK;
