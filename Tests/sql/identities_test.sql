-- Identities: users found by (iss, sub), made on a first sign-in, linked by a verified address only; SQL callers
-- resolved the same way; an invitation bound to an address accepted only through a verified one.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT set_config('rbac.actor_label', 'sign-in', true);
CREATE TEMPORARY TABLE seen AS SELECT coalesce(max(id), 0) AS id FROM operator_audit_log;
GRANT SELECT ON seen TO PUBLIC;
SELECT pg_temp.new_user('olivia');
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia');

-- A first sign-in makes the user and the identity; the next finds them.
CREATE TEMPORARY TABLE first AS
    SELECT * FROM sign_in('https://tenant.auth0.com/', 'auth0|64f1c', 'Paul@Example.com', true, '  Paul  ');
GRANT SELECT ON first TO PUBLIC;
SELECT is((SELECT created FROM first), true, 'a first sign-in creates the user');
SELECT is((SELECT email || ' ' || display_name FROM users WHERE id = (SELECT user_id FROM first)),
          'Paul@Example.com Paul', 'with the token''s address and name');
SELECT is((SELECT row(s.user_id, s.created)::text FROM sign_in('https://tenant.auth0.com/', 'auth0|64f1c',
                                                               'paul@example.com', false, NULL) s),
          row((SELECT user_id FROM first), false)::text, 'the next sign-in finds the same user');
SELECT is((SELECT email || ' ' || email_verified FROM user_identities WHERE subject = 'auth0|64f1c'),
          'paul@example.com false', 'and the identity keeps what the latest token said of the address');
SELECT is((SELECT array_agg(action ORDER BY id) FROM operator_audit_log WHERE id > (SELECT id FROM seen)
           AND action IN ('user.insert', 'identity.insert', 'identity.update')),
          ARRAY['user.insert', 'user.insert', 'identity.insert', 'identity.update'],
          'users and identities are in the operator''s log');
SELECT is((SELECT DISTINCT actor_label FROM operator_audit_log WHERE id > (SELECT id FROM seen)
           AND action LIKE 'identity.%'), 'operator:sign-in', 'under the label of the service that signed in');

-- Linking to an existing user needs a verified address.
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', 'user_2abc', 'OLIVIA@example.com', false, NULL)$$,
                 'RBDUP', 'a user with this email address exists; sign in with a provider that verified it',
                 'an unverified address that is taken is refused');
SELECT is((SELECT count(*)::int FROM user_identities WHERE subject = 'user_2abc'), 0, 'and makes nothing');
SELECT is((SELECT row(s.user_id, s.created)::text
           FROM sign_in('https://clerk.test', 'user_2abc', 'OLIVIA@example.com', true, NULL) s),
          row(pg_temp.id('olivia'), false)::text, 'a verified one links the identity to the user');
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', 'user_new', NULL, true, NULL)$$, 'RBINV',
                 'the identity provider gave no usable email address, which a new user needs');
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', 'user_new', 'not an address', true, NULL)$$, 'RBINV',
                 'the identity provider gave no usable email address, which a new user needs: it holds a space');
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', '', 'x@example.com', true, NULL)$$, 'RBINV',
                 'an identity needs an issuer (at most 500 characters) and a subject (1 to 255)');
-- Names a provider gives: kept but for control characters, bidirectional overrides and blank ones. Signed in by a
-- statement of their own: a query's snapshot does not see the users its own subquery makes.
CREATE TEMPORARY TABLE named AS
    SELECT subject, (sign_in('https://clerk.test', subject, subject || '@example.com', true, name)).user_id
    FROM (VALUES ('ctl', E'Evil\x1b[2J'), ('bidi', E'Eve\u202E nimda'), ('rtl', E'\u05E9\u05E8\u05D4\u200F'),
                 ('blank', E'\u200B\u3164'))
         AS t(subject, name);
GRANT SELECT ON named TO PUBLIC;
SELECT results_eq($$SELECT n.subject, u.display_name FROM named n JOIN users u ON u.id = n.user_id ORDER BY 1$$,
                  $$VALUES ('bidi', NULL), ('blank', NULL), ('ctl', NULL), ('rtl', E'\u05E9\u05E8\u05D4\u200F')$$,
                  'a name with a control character or a bidirectional override, or one that shows nothing, is '
                  'dropped; one written right to left, with its direction mark, is kept');

-- Development tokens (no issuer, a UUID subject) name the user by id.
SELECT is((SELECT row(s.user_id, s.created)::text FROM sign_in('', pg_temp.id('olivia')::text, NULL, false, NULL) s),
          row(pg_temp.id('olivia'), false)::text, 'a development token names a user by id');
SELECT is((SELECT created FROM sign_in('', '0b4e7c3e-7a8f-4c1e-9a55-0d7e3c1f2a90', 'dev@example.com', false, NULL)),
          true, 'and makes that user when it is new');
SELECT ok(EXISTS (SELECT 1 FROM users WHERE id = '0b4e7c3e-7a8f-4c1e-9a55-0d7e3c1f2a90'), 'with that id');

-- SQL callers: request.jwt.claims with sub and iss resolve through the identity.
INSERT INTO memberships (couple_id, user_id, role)
VALUES (pg_temp.id('Olivia & Paul'), (SELECT user_id FROM first), 'viewer');
SET LOCAL ROLE rbac_app;
SELECT set_config('request.jwt.claims', '{"iss": "https://tenant.auth0.com/", "sub": "auth0|64f1c"}', true);
SELECT is(rbac.jwt_user_id(), (SELECT user_id FROM first), 'iss and sub name the identity''s user');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), 'budget.view'), 'a Supabase-style RPC answers for them');
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), 'budget.edit'), 'with their role''s permissions');
SELECT set_config('request.jwt.claims', '{"iss": "https://evil.test/", "sub": "auth0|64f1c"}', true);
SELECT is(rbac.jwt_user_id(), NULL, 'the same subject at another issuer is no one');
SELECT set_config('request.jwt.claims', format('{"iss": "https://evil.test/", "sub": "%s"}', pg_temp.id('olivia')), true);
SELECT is(rbac.jwt_user_id(), NULL, 'nor is a UUID subject from an issuer: only development tokens name ids');
SELECT throws_ok($$SELECT * FROM sign_in('https://x.test', 'y', 'y@example.com', true, NULL)$$, '42501', NULL,
                 'the application role cannot sign anyone in');
RESET ROLE;
SELECT throws_ok($$SELECT * FROM sign_in('https://x.test', 'y', 'y@example.com', true, NULL)$$, 'RBDEN',
                 'only the operator signs users in', 'nor can an end user''s session');
SELECT pg_temp.act_as_operator();

-- An invitation bound to an address, accepted through an identity: only with that address, verified.
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_bound'), 'planner', 'pia@example.com');
SELECT * FROM sign_in('https://clerk.test', 'user_pia', 'PIA@example.com', false, 'Pia');
SELECT set_config('request.jwt.claims', '{"iss": "https://clerk.test", "sub": "user_pia"}', true);
SELECT throws_ok($$SELECT * FROM accept_invitation(pg_temp.hash('inv_bound'))$$, 'RBEML',
                 'this invitation is for another email address (one your identity provider verified)',
                 'an unverified address does not prove the invitee');
SELECT pg_temp.act_as_operator();
SELECT * FROM sign_in('https://clerk.test', 'user_pia', 'PIA@example.com', true, 'Pia');
SELECT set_config('request.jwt.claims', '{"iss": "https://clerk.test", "sub": "user_pia"}', true);
SELECT is((SELECT role FROM accept_invitation(pg_temp.hash('inv_bound'))), 'planner',
          'a verified one does, whatever its case');

-- A provider's address in decomposed form (ë as e and a combining diaeresis) is the composed user's.
SELECT pg_temp.act_as_operator();
SELECT pg_temp.new_user(U&'zo\00EB');
SELECT is((SELECT row(s.user_id, s.created)::text
           FROM sign_in('https://clerk.test', 'user_zoe', U&'zoe\0308@example.com', true, NULL) s),
          row(pg_temp.id(U&'zo\00EB'), false)::text, 'a decomposed verified address links to the composed user');
SELECT is((SELECT email FROM user_identities WHERE subject = 'user_zoe'), U&'zo\00EB@example.com',
          'and the identity keeps it composed');

-- One address in two spellings (IDNA): stored with its domain in letters, whichever spelling came in.
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_idn'), 'viewer', 'ann@xn--bcher-kva.example');
SELECT is((SELECT email FROM invitations WHERE token_hash = pg_temp.hash('inv_idn')), U&'ann@b\00FCcher.example',
          'an invitation to an address in IDNA''s ASCII spelling keeps it in letters');
SELECT * FROM sign_in('https://clerk.test', 'user_ann', U&'ann@B\00FCcher.example', true, 'Ann');
SELECT is((SELECT row(s.user_id, s.created)::text
           FROM sign_in('https://other.test', 'ann', 'ann@XN--BCHER-KVA.example', true, NULL) s),
          (SELECT row(user_id, false)::text FROM user_identities WHERE subject = 'user_ann'),
          'a verified address in the other spelling is the same user');
SELECT set_config('request.jwt.claims', '{"iss": "https://other.test", "sub": "ann"}', true);
SELECT is((SELECT role FROM accept_invitation(pg_temp.hash('inv_idn'))), 'viewer',
          'and accepts the invitation bound to it');
SELECT pg_temp.act_as_operator();
SELECT is((SELECT row(s.user_id, s.created)::text
           FROM sign_in('https://third.test', 'ann', E'ann@\uFF42\u00FC\u00ADcher\u3002example', true, NULL) s),
          (SELECT row(user_id, false)::text FROM user_identities WHERE subject = 'user_ann'),
          'so is one typed with compatibility forms, another full stop or a character IDNA ignores');
SELECT is((SELECT email FROM user_identities WHERE issuer = 'https://third.test'), E'ann@b\u00FCcher.example',
          'and the identity keeps it mapped');
SELECT throws_ok($$INSERT INTO users (email) VALUES (E'bob@\uFF42\u00FCcher.example')$$, '23514',
                 'new row for relation "users" violates check constraint "users_email_domain_mapped"',
                 'a direct write of a domain IDNA maps to another is refused');
SELECT is(rbac.stored_email('a@xn--cher-zra77610b.example'), NULL,
          'a label written xn--… for letters IDNA maps to others is no address: DNS knows those by another name');
SELECT is(array[rbac.stored_email('a@xn--zz.example'), rbac.stored_email('a@xn--xn--ab-8ya.example'),
                rbac.stored_email('a@b.c@xn--bcher-kva.example')], array[NULL, NULL, NULL]::text[],
          'a label written xn--… that is not Punycode, or stands for another written so, is no address');

-- One rule for an address, the Swift side's: a dot in the domain, no whitespace or control characters.
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', 'user_new', 'ann@localhost', true, NULL)$$, 'RBINV',
                 'the identity provider gave no usable email address, which a new user needs: it needs a name '
                 'before its @ and a dot inside its domain (name@example.com)');
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', 'user_new', U&'ann\0007@example.com', true, NULL)$$,
                 'RBINV', 'the identity provider gave no usable email address, which a new user needs: it holds a '
                 'control character or a bidirectional override');
SELECT is(array_agg(rbac.is_email_address(a) ORDER BY n),
          ARRAY[true, true, true, false, false, false, false, false, false, false, false, false, false, false, false],
          'rbac.is_email_address takes what EmailAddress takes')
FROM unnest(ARRAY['a@b.c', U&'zo\00EB@example.com', 'a.b+c@d.e.f', 'a@b', 'a@.', '@b.c', 'a@b.c@d.e', U&'a\00A0b@c.d',
                  U&'a\0085@b.c', U&'a@b\3000.c', 'a@b.c' || repeat('c', 316), 'a..b@c.d', 'a@b.c.', 'a>,<b@c.d',
                  'a@[1.2.3.4]']) WITH ORDINALITY AS t(a, n);
SELECT throws_ok($$INSERT INTO users (email) VALUES ('ann@localhost')$$, '23514',
                 'new row for relation "users" violates check constraint "users_email_check"',
                 'a direct write is held to the same rule');
SELECT throws_ok($$INSERT INTO users (email) VALUES (U&'ann\001B]0;x\0007@example.com')$$, '23514',
                 'new row for relation "users" violates check constraint "users_email_check"',
                 'control characters included');
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', 'user_new', U&'ann\200B@example.com', true, NULL)$$,
                 'RBINV', 'the identity provider gave no usable email address, which a new user needs: it holds an '
                 'invisible character (a zero-width space or joiner, a direction mark, ...)');
SELECT throws_ok($$UPDATE invitations SET email = U&'ann\200D@example.com' WHERE token_hash = pg_temp.hash('inv_idn')$$,
                 '23514',
                 'new row for relation "invitations" violates check constraint "invitations_email_visible"',
                 'and an address that reads as another: a zero-width joiner before its @');
SELECT throws_ok($$INSERT INTO users (email) VALUES ('ann>,<bob@example.com')$$, '23514',
                 'new row for relation "users" violates check constraint "users_email_unquoted"',
                 'and one that a mail header reads as two recipients');
SELECT throws_ok($$SELECT * FROM sign_in('https://clerk.test', 'user_new', '.ann@example.com', true, NULL)$$,
                 'RBINV', 'the identity provider gave no usable email address, which a new user needs: a dot cannot '
                 'begin or end its name or its domain, nor follow another dot');
SELECT throws_ok($$INSERT INTO users (email) VALUES ('bob@mail.XN--bcher-kva.example')$$, '23514',
                 'new row for relation "users" violates check constraint "users_email_domain_letters"',
                 'and a domain in IDNA''s ASCII spelling');
SELECT throws_ok($$UPDATE user_identities SET email = 'ann@localhost' WHERE subject = 'user_zoe'$$, '23514',
                 'new row for relation "user_identities" violates check constraint "user_identities_email_check"',
                 'an identity''s address too');

-- The user a verified address links to deleted by the time the identity is inserted, as when a deletion gets past
-- the lock on their row: the sign-in looks again, as it would a moment later. The deletion here is the attempt's
-- own and goes with it, so the next attempt finds the user again; the sequence counts the attempts.
SELECT pg_temp.new_user('quentin');
CREATE TEMPORARY SEQUENCE attempts;
CREATE FUNCTION pg_temp.delete_linked_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('attempts') = 1 THEN
        DELETE FROM users WHERE id = NEW.user_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER delete_linked_user BEFORE INSERT ON user_identities
    FOR EACH ROW EXECUTE FUNCTION pg_temp.delete_linked_user();
SELECT is((SELECT row(s.user_id, s.created)::text
           FROM sign_in('https://clerk.test', 'user_quentin', 'quentin@example.com', true, NULL) s),
          row(pg_temp.id('quentin'), false)::text, 'a user deleted as the identity is linked: the sign-in looks again');
SELECT is(currval('attempts'), 2::bigint, 'in a second attempt');
DROP TRIGGER delete_linked_user ON user_identities;

SELECT * FROM finish();
ROLLBACK;
