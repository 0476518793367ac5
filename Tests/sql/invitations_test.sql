-- Invitations: creation, preview, acceptance exactly once, expiry, revocation, email binding, escalation.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'pia', 'vera', 'guest', 'second', 'bound']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'pia:planner', 'vera:viewer');

-- Who may invite to what.
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_a'), 'owner')$$, 'RBESC', NULL,
                 'a planner cannot invite an owner');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_a'), 'partner')$$, 'RBESC', NULL,
                 'a planner cannot invite a partner');
SELECT lives_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_viewer'), 'viewer')$$,
                'a planner invites a viewer');
SELECT is((SELECT invited_by FROM invitations WHERE token_hash = pg_temp.hash('inv_viewer')), pg_temp.id('pia'),
          'the invitation is from the planner');
SELECT pg_temp.act_as('vera');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_b'), 'viewer')$$, 'RBDEN', NULL,
                 'a viewer cannot invite');
SELECT pg_temp.act_as('olivia');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), decode('abcd', 'hex'), 'viewer')$$, 'RBINV', NULL,
                 'a token hash must be 32 bytes');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_c'), 'viewer', 'not an email')$$,
                 'RBINV', NULL, 'a bound email must look like one');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_c'), 'viewer', 'ann@localhost')$$,
                 'RBINV', 'the address to invite is not an email address: it needs a name before its @ and a dot '
                 'inside its domain (name@example.com)', 'with a dot in its domain, which the refusal names');
SELECT throws_ok($$UPDATE invitations SET email = 'ann@localhost'$$, '23514',
                 'new row for relation "invitations" violates check constraint "invitations_email_check"',
                 'as a direct write must');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_c'), 'viewer', NULL, interval '0')$$,
                 'RBINV', NULL, 'an invitation must not expire at once');
SELECT lives_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_partner'), 'partner')$$,
                'an owner invites a partner');
SELECT is((SELECT expires_at - created_at FROM invitations WHERE token_hash = pg_temp.hash('inv_partner')), interval '7 days',
          'invitations expire after 7 days by default');

-- Preview never consumes.
SELECT pg_temp.act_as('guest');
SELECT results_eq(
    $$SELECT couple_name, role, inviter, status FROM invitation_preview(pg_temp.hash('inv_partner'))$$,
    $$VALUES ('Olivia & Paul', 'partner', 'Olivia', 'pending')$$,
    'the preview shows couple, role, inviter and status');
SELECT results_eq(
    $$SELECT status FROM invitation_preview(pg_temp.hash('inv_partner'))$$, $$VALUES ('pending')$$,
    'looking twice leaves it pending');
SELECT is_empty($$SELECT * FROM invitation_preview(pg_temp.hash('inv_unknown'))$$, 'an unknown token previews nothing');

-- Accept exactly once.
SELECT results_eq(
    $$SELECT role FROM accept_invitation(pg_temp.hash('inv_partner'))$$, $$VALUES ('partner')$$, 'the guest accepts');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('guest')), 'partner', 'and is a partner');
SELECT pg_temp.act_as('second');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_partner'))$$, 'RBUSD', 'this invitation was already accepted',
                 'a used token cannot be accepted again');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_unknown'))$$, 'RBNFD', NULL, 'an unknown token is not found');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_viewer'), pg_temp.id('guest'))$$, 'RBDEN', NULL,
                 'a user cannot accept for someone else');

-- Expired and revoked.
SELECT pg_temp.act_as_operator();
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_old'), 'viewer');
SELECT is((SELECT inviter FROM invitation_preview(pg_temp.hash('inv_old'))), 'The couple''s administrator',
          'an invitation the operator made is from the couple''s administrator, not the operator''s label');
UPDATE invitations SET created_at = now() - interval '8 days', expires_at = now() - interval '1 day'
WHERE token_hash = pg_temp.hash('inv_old');
SELECT pg_temp.act_as('second');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_old'))$$, 'RBEXP',
                 'this invitation expired at '
                     || to_char((now() - interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC',
                 'an expired token is refused, saying when it expired');
SELECT pg_temp.act_as('olivia');
SELECT lives_ok(
    $$SELECT revoke_invitation(pg_temp.id('Olivia & Paul'), (SELECT id FROM invitations WHERE token_hash = pg_temp.hash('inv_viewer')))$$,
    'the owner revokes the planner''s invitation');
SELECT throws_ok(
    $$SELECT revoke_invitation(pg_temp.id('Olivia & Paul'), (SELECT id FROM invitations WHERE token_hash = pg_temp.hash('inv_viewer')))$$,
    'RBREV', NULL, 'revoking twice says it is revoked');
SELECT pg_temp.act_as('second');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_viewer'))$$, 'RBREV', NULL, 'a revoked token is refused');
SELECT is(user_role(pg_temp.id('Olivia & Paul'), pg_temp.id('second')), NULL, 'and no membership came of any refusal');

-- Email binding.
SELECT pg_temp.act_as('olivia');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_bound'), 'viewer', 'BOUND@example.com');
SELECT pg_temp.act_as('second');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_bound'))$$, 'RBEML', NULL,
                 'an invitation bound to an email refuses another user');
SELECT results_eq($$SELECT status FROM invitation_preview(pg_temp.hash('inv_bound'))$$, $$VALUES ('pending')$$,
                  'and stays pending');
SELECT pg_temp.act_as('bound');
SELECT lives_ok($$SELECT accept_invitation(pg_temp.hash('inv_bound'))$$, 'the bound user accepts (email case does not matter)');

-- An existing member cannot take a second membership.
SELECT pg_temp.act_as('olivia');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_again'), 'viewer');
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_again'))$$, 'RBDUP', NULL, 'a member cannot accept another invitation');
SELECT results_eq($$SELECT status FROM invitation_preview(pg_temp.hash('inv_again'))$$, $$VALUES ('pending')$$,
                  'and the invitation stays pending');
SELECT pg_temp.act_as('olivia');
CREATE TEMP TABLE invitations_before AS SELECT count(*) AS n FROM invitations;
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_member'), 'viewer',
                                           'PIA@example.com')$$,
                 'RBDUP', 'PIA@example.com is already a member of this couple',
                 'nor be invited by their address, whatever its case: the link could only fail them');
SELECT is((SELECT count(*) FROM invitations), (SELECT n FROM invitations_before), 'and no invitation is made');

-- Listing.
SELECT pg_temp.act_as('olivia');
SELECT set_eq(
    $$SELECT status, count(*)::int FROM couple_invitations(pg_temp.id('Olivia & Paul')) GROUP BY status$$,
    $$VALUES ('accepted', 2), ('revoked', 1), ('expired', 1), ('pending', 1)$$,
    'the list shows each invitation''s status');
SELECT is((SELECT count(*)::int FROM couple_invitations(pg_temp.id('Olivia & Paul'), 'pending')), 1, 'filtering by status');
SELECT throws_ok($$SELECT * FROM couple_invitations(pg_temp.id('Olivia & Paul'), 'lost')$$, 'RBINV', NULL, 'an unknown status is refused');
SELECT results_eq(
    $$SELECT invitation_id FROM couple_invitations(pg_temp.id('Olivia & Paul'))$$,
    $$SELECT id FROM invitations WHERE couple_id = pg_temp.id('Olivia & Paul') ORDER BY created_at, id$$,
    'invitations are listed oldest first');
SELECT results_eq(
    $$SELECT invitation_id FROM couple_invitations(pg_temp.id('Olivia & Paul'), NULL, 50,
        (SELECT id FROM invitations WHERE couple_id = pg_temp.id('Olivia & Paul') ORDER BY created_at, id LIMIT 1))$$,
    $$SELECT id FROM invitations WHERE couple_id = pg_temp.id('Olivia & Paul') ORDER BY created_at, id OFFSET 1$$,
    'a page after one follows it in that order');
SELECT throws_ok($$SELECT * FROM couple_invitations(pg_temp.id('Olivia & Paul'), NULL, 50, gen_random_uuid())$$, 'RBNFD',
                 NULL, 'a page after an invitation the couple does not have, without its place, is refused');
SELECT pg_temp.act_as('vera');
SELECT throws_ok($$SELECT * FROM couple_invitations(pg_temp.id('Olivia & Paul'))$$, 'RBDEN', NULL, 'a viewer cannot list invitations');

-- Resending: one transaction that revokes and reissues, or changes nothing.
SELECT pg_temp.act_as('olivia');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_resend'), 'partner', 'resend@example.com');
SELECT pg_temp.act_as('pia');
SELECT throws_ok(
    $$SELECT resend_invitation(pg_temp.id('Olivia & Paul'),
        (SELECT id FROM invitations WHERE token_hash = pg_temp.hash('inv_resend')), pg_temp.hash('inv_resent'))$$,
    'RBESC', NULL, 'a planner cannot resend a partner invitation');
SELECT results_eq($$SELECT status FROM invitation_preview(pg_temp.hash('inv_resend'))$$, $$VALUES ('pending')$$,
                  'and the invitation stays pending');
SELECT is((SELECT count(*)::int FROM invitations WHERE token_hash = pg_temp.hash('inv_resent')), 0,
          'and no new token exists');
SELECT pg_temp.act_as('olivia');
SELECT is((SELECT count(*)::int FROM resend_invitation(pg_temp.id('Olivia & Paul'),
              (SELECT id FROM invitations WHERE token_hash = pg_temp.hash('inv_resend')), pg_temp.hash('inv_resent'),
              interval '2 days')), 1,
          'an owner resends it');
SELECT results_eq($$SELECT status FROM invitation_preview(pg_temp.hash('inv_resend'))$$, $$VALUES ('revoked')$$,
                  'the old token is revoked');
SELECT results_eq(
    $$SELECT role, email, expires_at - created_at FROM invitations WHERE token_hash = pg_temp.hash('inv_resent')$$,
    $$VALUES ('partner', 'resend@example.com', interval '2 days')$$,
    'the new token has the same role and email and the new expiry');
SELECT throws_ok(
    $$SELECT resend_invitation(pg_temp.id('Olivia & Paul'),
        (SELECT id FROM invitations WHERE token_hash = pg_temp.hash('inv_resend')), pg_temp.hash('inv_thrice'))$$,
    'RBREV', NULL, 'a revoked invitation cannot be resent');

-- Reading one invitation.
SELECT results_eq(
    $$SELECT role, email, status FROM couple_invitation(pg_temp.id('Olivia & Paul'),
        (SELECT id FROM invitations WHERE token_hash = pg_temp.hash('inv_resent')))$$,
    $$VALUES ('partner', 'resend@example.com', 'pending')$$,
    'one invitation, as the list shows it');
SELECT is_empty($$SELECT * FROM couple_invitation(pg_temp.id('Olivia & Paul'), gen_random_uuid())$$,
                'no row for an unknown invitation');
SELECT pg_temp.act_as('vera');
SELECT throws_ok($$SELECT * FROM couple_invitation(pg_temp.id('Olivia & Paul'), gen_random_uuid())$$, 'RBDEN', NULL,
                 'a viewer cannot read invitations');

-- Becoming a member revokes one's pending invitations to the couple, which could only fail them now, however
-- one becomes a member; not those to others, nor those without an address, nor another couple's.
SELECT pg_temp.new_user(name) FROM unnest(ARRAY['joiner', 'granted']) AS name;
SELECT pg_temp.new_couple('Joiners', 'olivia');
SELECT pg_temp.new_couple('Elsewhere', 'olivia');
SELECT pg_temp.act_as('olivia');
SELECT create_invitation(pg_temp.id(couple), pg_temp.hash(token), 'viewer', email)
FROM (VALUES ('Joiners', 'inv_join_a', 'joiner@example.com'), ('Joiners', 'inv_join_b', 'JOINER@example.com'),
             ('Joiners', 'inv_join_open', NULL), ('Joiners', 'inv_join_other', 'other@example.com'),
             ('Elsewhere', 'inv_join_elsewhere', 'joiner@example.com'), ('Joiners', 'inv_granted', 'granted@example.com'),
             ('Joiners', 'inv_granted_expired', 'granted@example.com')) AS i (couple, token, email);
UPDATE invitations SET created_at = now() - interval '8 days', expires_at = now() - interval '1 day'
WHERE token_hash = pg_temp.hash('inv_granted_expired');
SELECT pg_temp.act_as('joiner');
SELECT lives_ok($$SELECT accept_invitation(pg_temp.hash('inv_join_a'))$$, 'the joiner accepts one invitation');
SELECT results_eq(
    $$SELECT token, rbac.invitation_status(i)
      FROM unnest(ARRAY['inv_join_a', 'inv_join_b', 'inv_join_open', 'inv_join_other', 'inv_join_elsewhere']) AS token
      JOIN invitations i ON i.token_hash = pg_temp.hash(token) ORDER BY token$$,
    $$VALUES ('inv_join_a', 'accepted'), ('inv_join_b', 'revoked'), ('inv_join_elsewhere', 'pending'),
             ('inv_join_open', 'pending'), ('inv_join_other', 'pending')$$,
    'the other invitation to their address is revoked, whatever its case; the rest stay pending');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_join_b'))$$, 'RBREV', NULL,
                 'so its link says it was revoked');
SELECT results_eq(
    $$SELECT actor_id, after ->> 'id' FROM audit_log
      WHERE couple_id = (SELECT pg_temp.id('Joiners')) AND action = 'invitation.update'
        AND after ->> 'revoked_at' IS NOT NULL$$,
    $$VALUES (pg_temp.id('joiner'), (SELECT id::text FROM invitations WHERE token_hash = pg_temp.hash('inv_join_b')))$$,
    'the revocation is in the couple''s log, made by the joiner''s acceptance (and announced as any revocation)');
SELECT pg_temp.act_as('olivia');
SELECT lives_ok($$SELECT grant_role(pg_temp.id('Joiners'), pg_temp.id('granted'), 'planner')$$,
                'the owner grants a role to someone invited');
SELECT results_eq(
    $$SELECT token, rbac.invitation_status(i) FROM unnest(ARRAY['inv_granted', 'inv_granted_expired']) AS token
      JOIN invitations i ON i.token_hash = pg_temp.hash(token) ORDER BY token$$,
    $$VALUES ('inv_granted', 'revoked'), ('inv_granted_expired', 'expired')$$,
    'their pending invitation is revoked; an expired one stays expired');
SELECT create_invitation(pg_temp.id(couple), pg_temp.hash(token), 'viewer', email)
FROM (VALUES ('Joiners', 'inv_moved', 'moved@example.com'), ('Elsewhere', 'inv_moved_elsewhere', 'moved@example.com'),
             ('Joiners', 'inv_raw', 'raw@example.com')) AS i (couple, token, email);
SELECT pg_temp.act_as_operator();
SELECT edit_user(pg_temp.id('joiner'), 'Moved@example.com', NULL);
UPDATE users SET email = 'raw@example.com' WHERE id = pg_temp.id('granted');
SELECT results_eq(
    $$SELECT token, rbac.invitation_status(i)
      FROM unnest(ARRAY['inv_moved', 'inv_moved_elsewhere', 'inv_raw', 'inv_join_open']) AS token
      JOIN invitations i ON i.token_hash = pg_temp.hash(token) ORDER BY token$$,
    $$VALUES ('inv_join_open', 'pending'), ('inv_moved', 'revoked'), ('inv_moved_elsewhere', 'pending'),
             ('inv_raw', 'revoked')$$,
    'a member''s address changed (by edit_user or raw SQL) to one their couple invited: revoked, not elsewhere');

-- An address is kept composed however a caller spells it: ë written as e and a combining diaeresis is still
-- zoë's address, not a second one.
SELECT pg_temp.new_user(U&'zo\00EB');
SELECT pg_temp.act_as('olivia');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_decomposed'), 'viewer',
                         U&'zoe\0308@example.com');
SELECT is((SELECT email FROM invitations WHERE token_hash = pg_temp.hash('inv_decomposed')),
          U&'zo\00EB@example.com', 'a bound address is stored composed');
SELECT pg_temp.act_as(U&'zo\00EB');
SELECT lives_ok($$SELECT accept_invitation(pg_temp.hash('inv_decomposed'))$$, 'so its user accepts the invitation');
SELECT throws_ok($$INSERT INTO users (email) VALUES (U&'zoe\0308@example.org')$$, '23514', NULL,
                 'and no address is stored decomposed');

-- An invitation is made on its inviter's authority. It lets no one in once its inviter could not make it: while
-- they are suspended (and again once reactivated), past their membership's expiry, or holding a role that no
-- longer invites or gives what it offers. A member who goes (removed, leaving, deleted) revokes the pending ones
-- they made.
SELECT pg_temp.new_user(name) FROM unnest(ARRAY['owen', 'pam', 'pete', 'newcomer']) AS name;
SELECT pg_temp.new_couple('Authority', 'owen', 'pam:partner', 'pete:planner');
INSERT INTO webhook_endpoints (url, secret_box) VALUES ('https://hooks.example.com/all', '\x00');
SELECT pg_temp.act_as('pam');
SELECT create_invitation(pg_temp.id('Authority'), pg_temp.hash('inv_pam_' || n), 'viewer')
FROM generate_series(1, 3) n;
SELECT create_invitation(pg_temp.id('Authority'), pg_temp.hash('inv_pam_partner'), 'partner');
SELECT pg_temp.act_as('pete');
SELECT create_invitation(pg_temp.id('Authority'), pg_temp.hash('inv_pete'), 'viewer');
SELECT pg_temp.act_as_operator();
SELECT create_invitation(pg_temp.id('Authority'), pg_temp.hash('inv_operator'), 'viewer');
SELECT suspend_member(pg_temp.id('Authority'), pg_temp.id('pam'));
SELECT pg_temp.act_as('newcomer');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_pam_1'))$$, 'RBREV',
                 'this invitation no longer holds: the member who made it may no longer give the viewer role',
                 'an invitation from a suspended member lets no one in');
SELECT is(user_role(pg_temp.id('Authority'), pg_temp.id('newcomer')), NULL, 'and the refusal made no member');
SELECT results_eq(
    $$SELECT token, status FROM unnest(ARRAY['inv_pam_1', 'inv_pete', 'inv_operator']) AS token,
             LATERAL invitation_preview(pg_temp.hash(token))$$,
    $$VALUES ('inv_pam_1', 'revoked'), ('inv_pete', 'pending'), ('inv_operator', 'pending')$$,
    'its page says so before anyone signs in; others'' invitations and the operator''s show pending');
SELECT pg_temp.act_as_operator();
SELECT reactivate_member(pg_temp.id('Authority'), pg_temp.id('pam'));
SELECT results_eq($$SELECT status FROM invitation_preview(pg_temp.hash('inv_pam_1'))$$, $$VALUES ('pending')$$,
                  'reactivated, its page shows it pending again');
SELECT pg_temp.act_as('newcomer');
SELECT lives_ok($$SELECT accept_invitation(pg_temp.hash('inv_pam_1'))$$, 'it holds again once they are reactivated');
SELECT pg_temp.act_as_operator();
SELECT remove_member(pg_temp.id('Authority'), pg_temp.id('newcomer'));
UPDATE memberships SET expires_at = now() - interval '1 second'
WHERE couple_id = pg_temp.id('Authority') AND user_id = pg_temp.id('pam');
SELECT pg_temp.act_as('newcomer');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_pam_2'))$$, 'RBREV', NULL,
                 'nor one from a member whose membership expired');
SELECT pg_temp.act_as_operator();
UPDATE memberships SET expires_at = NULL, role = 'planner'
WHERE couple_id = pg_temp.id('Authority') AND user_id = pg_temp.id('pam');
SELECT pg_temp.act_as('newcomer');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_pam_partner'))$$, 'RBREV',
                 'this invitation no longer holds: the member who made it may no longer give the partner role',
                 'nor one for a role the inviter''s new role does not give');
SELECT lives_ok($$SELECT accept_invitation(pg_temp.hash('inv_pam_2'))$$, 'while one for a role it gives holds');
SELECT pg_temp.act_as_operator();
SELECT remove_member(pg_temp.id('Authority'), pg_temp.id('newcomer'));
UPDATE memberships SET role = 'viewer' WHERE couple_id = pg_temp.id('Authority') AND user_id = pg_temp.id('pam');
SELECT pg_temp.act_as('newcomer');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_pam_3'))$$, 'RBREV', NULL,
                 'nor one from a member whose role no longer invites');
SELECT results_eq($$SELECT rbac.invitation_status(i) FROM invitations i WHERE token_hash = pg_temp.hash('inv_pam_3')$$,
                  $$VALUES ('pending')$$, 'a refused acceptance leaves the invitation pending');
SELECT results_eq($$SELECT status FROM invitation_preview(pg_temp.hash('inv_pam_3'))$$, $$VALUES ('revoked')$$,
                  'while its page shows it unusable, as accepting answers');
SELECT pg_temp.act_as_operator();
CREATE TEMP TABLE revoked_before AS SELECT count(*) AS n FROM outbox WHERE event_type = 'invitation.revoked';
SELECT lives_ok(format('SELECT remove_member(%L, %L)', pg_temp.id('Authority'), pg_temp.id('pam')),
                'the member who made them is removed');
SELECT results_eq(
    $$SELECT t.token, rbac.invitation_status(i) FROM unnest(ARRAY['inv_pam_1', 'inv_pam_2', 'inv_pam_3',
        'inv_pam_partner', 'inv_pete', 'inv_operator']) t(token)
      JOIN invitations i ON i.token_hash = pg_temp.hash(t.token) ORDER BY 1$$,
    $$VALUES ('inv_operator', 'pending'), ('inv_pam_1', 'accepted'), ('inv_pam_2', 'accepted'),
             ('inv_pam_3', 'revoked'), ('inv_pam_partner', 'revoked'), ('inv_pete', 'pending')$$,
    'their pending invitations are revoked; those accepted, another member''s and the operator''s stay');
SELECT is((SELECT count(*) - (SELECT n FROM revoked_before) FROM outbox WHERE event_type = 'invitation.revoked'),
          2::bigint, 'each announced as any revocation');
SELECT is((SELECT count(*) FROM audit_log WHERE couple_id = (SELECT pg_temp.id('Authority'))
             AND action = 'invitation.update' AND after ->> 'revoked_at' IS NOT NULL), 2::bigint,
          'and recorded in the couple''s log');
SELECT pg_temp.act_as('newcomer');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('inv_pam_3'))$$, 'RBREV', 'this invitation was revoked',
                 'so their links let no one in');
SELECT lives_ok($$SELECT accept_invitation(pg_temp.hash('inv_operator'))$$, 'the operator''s invitation still does');
SELECT pg_temp.act_as('pete');
SELECT create_invitation(pg_temp.id('Authority'), pg_temp.hash('inv_pete_2'), 'viewer');
SELECT lives_ok(format('SELECT leave_couple(%L)', pg_temp.id('Authority')), 'another member who made some leaves');
SELECT pg_temp.act_as_operator();
SELECT results_eq($$SELECT rbac.invitation_status(i) FROM invitations i
                    WHERE token_hash IN (pg_temp.hash('inv_pete'), pg_temp.hash('inv_pete_2'))$$,
                  $$VALUES ('revoked'), ('revoked')$$, 'leaving revokes theirs too');

-- The inviter gone by the time the invitation is inserted, as when a deletion gets past the lock on their row:
-- not found, as when they were gone before; any other key the insert misses is its own error.
SELECT pg_temp.new_user('vanishing');
SELECT pg_temp.new_couple('Vanishing', 'olivia', 'vanishing:partner');
CREATE FUNCTION pg_temp.delete_inviter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memberships WHERE user_id = NEW.invited_by;
    DELETE FROM users WHERE id = NEW.invited_by;
    RETURN NEW;
END $$;
CREATE TRIGGER delete_inviter BEFORE INSERT ON invitations FOR EACH ROW EXECUTE FUNCTION pg_temp.delete_inviter();
SELECT pg_temp.act_as('vanishing');
SELECT throws_ok(format('SELECT create_invitation(%L, %L, %L)', pg_temp.id('Vanishing'), pg_temp.hash('inv_gone'), 'viewer'),
                 'RBNFD', format('user %s does not exist', pg_temp.id('vanishing')), 'an inviter deleted meanwhile');
DROP TRIGGER delete_inviter ON invitations;
CREATE FUNCTION pg_temp.misdirect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.couple_id := gen_random_uuid();
    RETURN NEW;
END $$;
CREATE TRIGGER misdirect BEFORE INSERT ON invitations FOR EACH ROW EXECUTE FUNCTION pg_temp.misdirect();
SELECT pg_temp.act_as('olivia');
SELECT throws_ok(format('SELECT create_invitation(%L, %L, %L)', pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_lost'), 'viewer'),
                 '23503', NULL, 'a couple missing at the insert stays a foreign key''s error');
DROP TRIGGER misdirect ON invitations;

-- The advisory locks invitations take are named per couple and per person, millions of names: each name is its
-- own lock, even two that a 32-bit hash gives one key.
SELECT is(hashtext('newcomers 13876'), hashtext('newcomers 183523'), 'these two names share a 32-bit hash');
CREATE TEMP TABLE held AS SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT rbac.advisory_lock('newcomers 13876', false), rbac.advisory_lock('newcomers 183523', false);
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) - (SELECT n FROM held),
          2::bigint, 'and are two locks');

SELECT * FROM finish();
ROLLBACK;
