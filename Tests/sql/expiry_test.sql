-- Memberships that expire: from the instant of expiry they grant nothing, through every way of holding a role
-- and every predicate. now() is the transaction's start, fixed for the whole file, so "an instant before" is
-- expires_at = now() + 1 microsecond and "the instant of expiry" is expires_at = now().
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia', 'vera', 'ivy']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'paul:partner');
INSERT INTO webhook_endpoints (url, secret_box) VALUES ('https://hooks.example.com/all', '\x00');

-- Granting with an expiry.
SELECT is((grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'planner', now() + interval '90 days')).expires_at,
          now() + interval '90 days', 'a grant sets the expiry');
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'viewer', now())$$, 'RBINV',
                 NULL, 'an expiry that is not in the future is refused');
-- A refusal shows an instant in UTC, to the second, whatever the session's time zone.
SET LOCAL timezone = 'America/New_York';
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'viewer',
                                     '2001-02-03 04:05:06.789+00')$$,
                 'RBINV', 'the expiry 2001-02-03 04:05:06 UTC is not in the future',
                 'the refused expiry is shown in UTC, to the second');
RESET timezone;
SELECT throws_ok($$SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'), 'owner', now() + interval '1 day')$$,
                 'RBINV', 'an owner''s membership cannot expire; give another role an expiry, or none',
                 'an owner''s membership cannot expire');
SELECT throws_ok($$UPDATE memberships SET expires_at = now() + interval '1 day' WHERE user_id = pg_temp.id('olivia')$$,
                 '23514', NULL, 'not even by raw SQL');
SELECT is((SELECT count(*)::int FROM memberships WHERE expires_at IS NOT NULL), 1, 'the refusals changed nothing');

-- The boundary, for a role of the policy.
CREATE FUNCTION pg_temp.pia_at(p_expires_at timestamptz) RETURNS void LANGUAGE sql AS $$
    UPDATE memberships SET expires_at = p_expires_at WHERE user_id = pg_temp.id('pia')
$$;
SELECT pg_temp.pia_at(now() + interval '1 microsecond');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'budget.edit'), 'an instant before expiry, the role grants');
SELECT is(user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('pia')) @> '{budget.edit}', true, 'user_permissions agrees');
SELECT is((SELECT role FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('pia')])), 'planner',
          'what caches load names the role');
SELECT is((SELECT expires_at FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('pia')])),
          now() + interval '1 microsecond', 'with the instant the set stops holding');
SELECT pg_temp.pia_at(now());
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'budget.edit'), 'at the instant of expiry, nothing');
SELECT is(user_permissions(pg_temp.id('Olivia & Paul'), pg_temp.id('pia')), '{}'::text[], 'user_permissions agrees');
SELECT is((SELECT role FROM user_roles(ARRAY[pg_temp.id('Olivia & Paul')], ARRAY[pg_temp.id('pia')])), NULL,
          'caches load no role');
SELECT results_eq($$SELECT status, expires_at FROM couple_members(pg_temp.id('Olivia & Paul')) WHERE user_id = pg_temp.id('pia')$$,
                  $$VALUES ('expired'::text, now())$$, 'the listing shows the expiry and the status expired');
SELECT results_eq($$SELECT status FROM user_couples(pg_temp.id('pia'))$$, $$VALUES ('expired'::text)$$,
                  'so does the member''s own list of couples');

-- Acting: an expired member can do nothing an active one could.
SELECT pg_temp.act_as('pia');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('late'), 'viewer')$$, 'RBDEN', NULL,
                 'an expired planner cannot invite');
SELECT throws_ok($$SELECT couple_members(pg_temp.id('Olivia & Paul'))$$, 'RBDEN', NULL, 'nor list the members');
SELECT pg_temp.act_as_operator();

-- Row-level security, an instant before and at expiry.
SELECT pg_temp.pia_at(now() + interval '1 microsecond');
SET LOCAL ROLE rbac_app;
SELECT pg_temp.act_as('pia');
SELECT is((SELECT count(*)::int FROM couples), 1, 'before expiry, row-level security shows the couple');
SELECT is((SELECT count(*)::int FROM memberships), 3, 'and its members');
RESET ROLE;
SELECT pg_temp.act_as_operator();
SELECT pg_temp.pia_at(now());
SET LOCAL ROLE rbac_app;
SELECT pg_temp.act_as('pia');
SELECT is_empty($$SELECT 1 FROM couples$$, 'at expiry, no couple');
SELECT is_empty($$SELECT 1 FROM memberships$$, 'no members');
SELECT is_empty($$SELECT 1 FROM users WHERE id <> pg_temp.id('pia')$$, 'and no one else''s user row');
RESET ROLE;
SELECT pg_temp.act_as_operator();

-- Renewing is a membership change like any other: revision, audit, event.
CREATE TEMPORARY TABLE before_renewal AS SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul');
SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'planner');
SELECT is((SELECT revision FROM couples WHERE id = pg_temp.id('Olivia & Paul')),
          (SELECT revision + 1 FROM before_renewal), 'a grant without an expiry advances the revision');
SELECT ok(user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'), 'budget.edit'), 'makes the membership hold again');
SELECT is((SELECT expires_at FROM memberships WHERE user_id = pg_temp.id('pia')), NULL, 'for good');
SELECT ok(EXISTS (SELECT 1 FROM audit_log WHERE action = 'membership.update' AND before ->> 'expires_at' IS NOT NULL
                  AND after ->> 'expires_at' IS NULL), 'the audit log records the removed expiry');
SELECT ok(EXISTS (SELECT 1 FROM outbox WHERE event_type = 'membership.updated' AND payload ->> 'user_id' = pg_temp.id('pia')::text
                  AND payload -> 'expires_at' = 'null'::jsonb), 'and so does the outbox');

-- Through an invitation: the membership expires as the invitation said.
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('ivy'), 'viewer', NULL, interval '7 days',
                         now() + interval '30 days');
SELECT throws_ok($$SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('own'), 'owner', NULL,
                                            interval '7 days', now() + interval '30 days')$$, 'RBINV', NULL,
                 'an invitation to ownership cannot carry an expiry');
SELECT is((accept_invitation(pg_temp.hash('ivy'), pg_temp.id('ivy'))).role, 'viewer', 'the invitation is accepted');
SELECT is((SELECT expires_at FROM memberships WHERE user_id = pg_temp.id('ivy')), now() + interval '30 days',
          'and the membership expires when the invitation said');
UPDATE memberships SET expires_at = now() WHERE user_id = pg_temp.id('ivy');
SELECT ok(NOT user_has_permission(pg_temp.id('Olivia & Paul'), pg_temp.id('ivy'), 'budget.view'), 'and from that instant grants nothing');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('stale'), 'viewer', NULL, interval '7 days',
                         now() + interval '1 day');
UPDATE invitations SET membership_expires_at = now() WHERE token_hash = pg_temp.hash('stale');
SELECT throws_ok($$SELECT accept_invitation(pg_temp.hash('stale'), pg_temp.id('vera'))$$, 'RBEXP',
                 'the access this invitation offers ended at '
                     || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC',
                 'an invitation whose access already ended is not accepted');

-- The last-owner rule: ownership moves only to a membership in force, and the new owner's expiry goes.
SELECT grant_role(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'), 'viewer', now() + interval '1 day');
SELECT is((transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('vera'))).expires_at, NULL,
          'the new owner''s membership no longer expires');
UPDATE memberships SET expires_at = now() WHERE user_id = pg_temp.id('pia');
SELECT throws_ok($$SELECT transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('pia'))$$, 'RBINV', NULL,
                 'ownership does not go to an expired membership');

-- The sweeper records each expiry once, in the audit log and the outbox.
UPDATE memberships SET expires_at = now() - interval '1 hour' WHERE user_id = pg_temp.id('ivy');
UPDATE invitations SET expires_at = now() - interval '1 minute', created_at = now() - interval '8 days'
WHERE token_hash = pg_temp.hash('late') OR token_hash = pg_temp.hash('stale');
INSERT INTO outbox (event_type, couple_id, payload, channel, token_box)
SELECT 'invitation.created', couple_id, jsonb_build_object('invitation_id', id), 'email', '\x01'
FROM invitations WHERE token_hash = pg_temp.hash('stale');
SELECT results_eq($$SELECT * FROM sweep_expired(1)$$, $$VALUES (1, 1, 0, '{}'::text[])$$,
                  'a sweep records at most its limit of each kind, the oldest first');
SELECT ok(EXISTS (SELECT 1 FROM expiries_recorded WHERE subject_id = pg_temp.id('ivy')),
          'the membership that expired an hour ago');
\if :distributed
\else
-- A row written in a subtransaction carries that subtransaction's id.
SELECT is((SELECT count(DISTINCT xmin::text)::int FROM expiries_recorded), 1,
          'on plain PostgreSQL a sweep opens no subtransaction for each expiry');
\endif
SELECT results_eq($$SELECT * FROM sweep_expired()$$, $$VALUES (1, 0, 0, '{}'::text[])$$, 'the next records the other');
SELECT results_eq($$SELECT * FROM sweep_expired()$$, $$VALUES (0, 0, 0, '{}'::text[])$$, 'the next records nothing again');
SELECT is((SELECT count(*)::int FROM audit_log WHERE action = 'membership.expired'), 2, 'membership.expired is in the audit log');
SELECT is((SELECT count(*)::int FROM audit_log WHERE action = 'invitation.expired'), 1, 'and invitation.expired');
SELECT is((SELECT actor_label FROM audit_log WHERE action = 'invitation.expired'), 'system:expiry', 'recorded by no one');
SELECT ok((SELECT NOT after ? 'email' FROM audit_log WHERE action = 'invitation.expired'),
          'without the address the invitation names, as every invitation''s entry');
SELECT is((SELECT count(*)::int FROM outbox WHERE event_type = 'membership.expired'), 2, 'the events go through the outbox');
SELECT is((SELECT count(*)::int FROM outbox WHERE event_type = 'invitation.expired'), 1, 'both kinds');
SELECT ok((SELECT payload ? 'email' FROM outbox WHERE event_type = 'invitation.expired'),
          'which, for webhook receivers, have it');
SELECT is((SELECT count(*)::int FROM outbox WHERE token_box IS NOT NULL), 0, 'the expired invitation''s sealed token is erased');
UPDATE memberships SET expires_at = now() - interval '1 minute' WHERE user_id = pg_temp.id('ivy');
SELECT results_eq($$SELECT * FROM sweep_expired()$$, $$VALUES (1, 0, 0, '{}'::text[])$$,
                  'a membership given another expiry that passes is recorded again');
SELECT pg_temp.act_as('olivia');
SELECT throws_ok($$SELECT sweep_expired()$$, 'RBDEN', NULL, 'only the operator sweeps');
SELECT pg_temp.act_as_operator();

SELECT * FROM finish();
ROLLBACK;
