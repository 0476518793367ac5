-- Editing and deleting a user: who may, what goes with a deleted user, what stays, and what the logs keep of
-- them.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'pia', 'vera', 'solo']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia', 'paul:partner', 'pia:planner', 'vera:viewer');
SELECT pg_temp.new_couple('Solo', 'solo', 'pia:viewer');
INSERT INTO user_identities (issuer, subject, user_id, email)
VALUES ('https://idp.example', 'pia-subject', pg_temp.id('pia'), 'pia@example.com');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_by_pia'), 'viewer', 'guest@example.com');
UPDATE invitations SET invited_by = pg_temp.id('pia') WHERE couple_id = pg_temp.id('Olivia & Paul');
CREATE TEMP TABLE revisions AS SELECT id, revision FROM couples;
INSERT INTO webhook_endpoints (url, secret_box) VALUES ('https://hooks.example.com/all', '\x00');

-- Who may.
SELECT pg_temp.act_as('pia');
SELECT throws_ok(format('SELECT delete_user(%L)', pg_temp.id('vera')), 'RBDEN',
                 'permission denied: users can delete only themselves', 'a user cannot delete another');
SELECT pg_temp.act_as('solo');
SELECT throws_ok(format('SELECT delete_user(%L)', pg_temp.id('solo')), 'RBLST',
                 'couple "Solo" must keep at least one owner', 'nor themself while the last owner of a couple');
SELECT pg_temp.act_as_operator();
SELECT throws_ok($$SELECT delete_user('00000000-0000-0000-0000-000000000000')$$, 'RBNFD',
                 'user 00000000-0000-0000-0000-000000000000 does not exist', 'an unknown user is RBNFD');
SELECT throws_ok($$SELECT delete_user(NULL)$$, 'RBNFD', 'user (null) does not exist',
                 'no user is RBNFD, named as every function names it');
SELECT results_eq($$SELECT count(*)::int FROM users$$, ARRAY[5], 'the refusals deleted nobody');
SELECT results_eq($$SELECT count(*)::int FROM memberships$$, ARRAY[6], 'and removed no member');

-- Editing: the operator changes addresses and names; a user only their own name.
SELECT pg_temp.act_as('pia');
SELECT throws_ok(format($$SELECT edit_user(%L, NULL, 'Vee')$$, pg_temp.id('vera')), 'RBDEN',
                 'permission denied: users can edit only themselves', 'a user cannot edit another');
SELECT throws_ok(format($$SELECT edit_user(%L, 'pia.berg@example.com', NULL)$$, pg_temp.id('pia')), 'RBDEN',
                 'permission denied: only the operator changes a user''s email address',
                 'nor their own address: sign-ins link to it');
SELECT throws_ok(format($$SELECT edit_user(%L, NULL, %L)$$, pg_temp.id('pia'), repeat('p', 201)), 'RBINV',
                 'a display name must be 1 to 200 characters, none of them control characters',
                 'a name over 200 characters is refused');
SELECT throws_ok(format($$SELECT edit_user(%L, NULL, E'Pia\u202eBerg')$$, pg_temp.id('pia')), 'RBINV', NULL,
                 'as is one with a control character');
SELECT throws_ok(format($$SELECT edit_user(%L, NULL, E'\u200B\uFEFF')$$, pg_temp.id('pia')), 'RBINV',
                 'a display name must show something, not only spaces and invisible characters (zero-width spaces, '
                 'joiners, fillers, ...)', 'and one that shows nothing');
SELECT results_eq(format($$SELECT email, display_name FROM edit_user(%L, NULL, ' Pia Berg ')$$, pg_temp.id('pia')),
                  $$VALUES ('pia@example.com', 'Pia Berg')$$, 'a user changes their own name, trimmed');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_from_pia'), 'viewer', 'friend@example.com');
SELECT is((SELECT count(*)::int FROM outbox WHERE payload::text ~ 'Pia Berg'), 1,
          'the outbox names her in her user.updated alone, not in the email of her invitation');
SELECT pg_temp.act_as_operator();
SELECT throws_ok(format($$SELECT edit_user(%L, 'OLIVIA@example.com', NULL)$$, pg_temp.id('vera')), '23505', NULL,
                 'an address another user has, whatever its case, is refused');
SELECT throws_ok(format($$SELECT edit_user(%L, 'vera@example', NULL)$$, pg_temp.id('vera')), 'RBINV',
                 'the new email address is not one rbac stores: it needs a name before its @ and a dot inside its '
                 'domain (name@example.com)', 'an address rbac does not store is refused, saying why');
SELECT throws_ok($$SELECT edit_user('00000000-0000-0000-0000-000000000000', NULL, 'X')$$, 'RBNFD',
                 'user 00000000-0000-0000-0000-000000000000 does not exist', 'an unknown user is RBNFD');
SELECT results_eq(format($$SELECT email, display_name FROM edit_user(%L, 'vera@xn--bcher-kva.example', '')$$,
                         pg_temp.id('vera')),
                  $$VALUES ('vera@bücher.example', NULL::text)$$,
                  'the operator changes an address, stored as every address is, and removes a name');
CREATE TEMP TABLE log_size AS SELECT count(*) AS entries FROM operator_audit_log;
SELECT edit_user(pg_temp.id('vera'), 'vera@bücher.example', NULL);
SELECT is((SELECT count(*) FROM operator_audit_log), (SELECT entries FROM log_size),
          'a change to what is there writes nothing');
SELECT results_eq($$SELECT before ->> 'email', after ->> 'email' FROM operator_audit_log
                    WHERE action = 'user.update' ORDER BY id DESC LIMIT 1$$,
                  $$VALUES ('vera@example.com', 'vera@bücher.example')$$, 'the operator''s log records a change');
SELECT set_eq($$SELECT payload FROM outbox WHERE event_type = 'user.updated'$$,
              $$VALUES (jsonb_build_object('user_id', pg_temp.id('pia'), 'email', 'pia@example.com',
                                           'display_name', 'Pia Berg')),
                       (jsonb_build_object('user_id', pg_temp.id('vera'), 'email', 'vera@bücher.example',
                                           'display_name', NULL))$$,
              'webhook receivers get a user.updated of each change, with the address and name as they are now');

-- A user deletes themself. (Their invitations' emails, as if sealed links were waiting in them; and answers kept
-- for an Idempotency-Key, one naming them.)
UPDATE outbox SET token_box = '\x00' WHERE channel = 'email';
INSERT INTO service_keys (name, key_hash) VALUES ('app', sha256('rbk_app'));
INSERT INTO idempotent_requests (key_id, idempotency_key, fingerprint, claim, status, body)
SELECT (SELECT id FROM service_keys WHERE name = 'app'), answer.key, sha256(convert_to(answer.key, 'UTF8')),
       gen_random_uuid(), 200, convert_to(answer.body, 'UTF8')
FROM (VALUES ('about-pia', format('{"user":{"id":"%s","email":"pia@example.com"}}', pg_temp.id('pia'))),
             ('about-vera', format('{"user":{"id":"%s"}}', pg_temp.id('vera')))) AS answer (key, body);
SELECT pg_temp.act_as('pia');
SELECT lives_ok(format('SELECT delete_user(%L)', pg_temp.id('pia')), 'a member deletes themself');
SELECT pg_temp.act_as_operator();
SELECT is((SELECT count(*)::int FROM users WHERE id = pg_temp.id('pia'))
          + (SELECT count(*)::int FROM memberships WHERE user_id = pg_temp.id('pia'))
          + (SELECT count(*)::int FROM user_identities WHERE user_id = pg_temp.id('pia')), 0,
          'the user goes, with their memberships and identities');
SELECT results_eq($$SELECT idempotency_key FROM idempotent_requests$$, $$VALUES ('about-vera')$$,
                  'and so does an answer kept for an Idempotency-Key that names them');
SELECT results_eq($$SELECT invited_by, email, rbac.invitation_status(i) FROM invitations i
                    WHERE couple_id = pg_temp.id('Olivia & Paul') ORDER BY email DESC$$,
                  $$VALUES (NULL::uuid, 'guest@example.com'::text, 'revoked'), (NULL, 'friend@example.com', 'revoked')$$,
                  'the invitations they made stay, naming nobody, revoked: they were made on their authority');
SELECT results_eq($$SELECT c.id FROM couples c JOIN revisions r USING (id) WHERE c.revision > r.revision ORDER BY 1$$,
                  $$SELECT unnest(ARRAY[pg_temp.id('Olivia & Paul'), pg_temp.id('Solo')]) ORDER BY 1$$,
                  'each of their couples moves to a new revision, for every cache');
SELECT results_eq($$SELECT couple_id, actor_id FROM audit_log WHERE action = 'membership.delete'
                    AND before ->> 'user_id' = (SELECT pg_temp.id('pia'))::text ORDER BY 1$$,
                  $$SELECT unnest(ARRAY[pg_temp.id('Olivia & Paul'), pg_temp.id('Solo')]), pg_temp.id('pia') ORDER BY 1$$,
                  'each couple''s log records the removal, made by them');
SELECT results_eq($$SELECT couple_id FROM outbox WHERE event_type = 'membership.removed'
                    AND payload ->> 'user_id' = (SELECT pg_temp.id('pia'))::text ORDER BY 1$$,
                  $$SELECT unnest(ARRAY[pg_temp.id('Olivia & Paul'), pg_temp.id('Solo')]) ORDER BY 1$$,
                  'and webhook receivers get a membership.removed from each');
SELECT results_eq($$SELECT couple_id, payload FROM outbox WHERE event_type = 'user.deleted'$$,
                  $$VALUES (NULL::uuid, jsonb_build_object('user_id', pg_temp.id('pia')))$$,
                  'then a user.deleted with their id alone');
SELECT is((SELECT count(*)::int FROM outbox WHERE payload::text ~ 'Pia Berg|pia@example'), 0,
          'and no message in the outbox names them: their user.updated goes');
SELECT results_eq($$SELECT payload ->> 'email', status, token_box FROM outbox WHERE channel = 'email' ORDER BY 1$$,
                  $$VALUES ('friend@example.com', 'dead', NULL::bytea), ('guest@example.com', 'dead', NULL)$$,
                  'and the emails of their invitations are never sent, their links erased');
SELECT is((SELECT count(*)::int FROM outbox WHERE event_type = 'user.updated'), 1, 'another user''s stays');

-- The operator's log keeps what happened to the user, without what named them.
SELECT results_eq($$SELECT action FROM operator_audit_log
                    WHERE (before ->> 'id' = (SELECT pg_temp.id('pia'))::text AND action LIKE 'user.%')
                       OR after ->> 'id' = (SELECT pg_temp.id('pia'))::text AND action LIKE 'user.%'
                       OR (before ->> 'user_id' = (SELECT pg_temp.id('pia'))::text AND action LIKE 'identity.%')
                       OR (after ->> 'user_id' = (SELECT pg_temp.id('pia'))::text AND action LIKE 'identity.%')
                    ORDER BY id$$,
                  $$VALUES ('user.insert'), ('identity.insert'), ('user.update'), ('user.delete'), ('identity.delete')$$,
                  'the operator''s log has their user and identity from added to deleted');
SELECT is((SELECT count(*)::int FROM operator_audit_log
           WHERE concat(before, after) ~ 'pia@example|Pia|Berg|pia-subject'), 0,
          'and none of those entries holds their address, names or subject');
SELECT isnt((SELECT count(*)::int FROM operator_audit_log WHERE concat(before, after) ~ 'vera@example.com'), 0,
            'another user''s entries keep their address');

-- That erasure is the one change the log takes, and only of a deleted user.
SELECT set_config('rbac.erasing', pg_temp.id('olivia')::text, true);
SELECT throws_ok(format($$UPDATE operator_audit_log SET after = after || '{"email": null}'
                          WHERE action = 'user.insert' AND after ->> 'id' = %L$$, pg_temp.id('olivia')),
                 'RBDEN', 'the audit log is append-only: UPDATE is not allowed', 'not of a user who exists');
SELECT set_config('rbac.erasing', pg_temp.id('pia')::text, true);
SELECT throws_ok(format($$UPDATE operator_audit_log SET action = 'user.update'
                          WHERE action = 'user.delete' AND before ->> 'id' = %L$$, pg_temp.id('pia')),
                 'RBDEN', 'the audit log is append-only: UPDATE is not allowed', 'nor anything but the erasure');
SELECT set_config('rbac.erasing', '', true);

-- The operator may delete anyone but a last owner.
SELECT lives_ok(format('SELECT delete_user(%L)', pg_temp.id('vera')), 'the operator deletes a member');
SELECT throws_ok(format('SELECT delete_user(%L)', pg_temp.id('vera')), 'RBNFD', NULL, 'once');
SELECT throws_ok(format('SELECT delete_user(%L)', pg_temp.id('solo')), 'RBLST', NULL,
                 'and not a last owner, even the operator');
SELECT lives_ok(format('SELECT delete_couple(%L)', pg_temp.id('Solo')), 'with the couple deleted');
SELECT lives_ok(format('SELECT delete_user(%L)', pg_temp.id('solo')), 'its owner is deleted');

-- A member added while the user is deleted is refused as for a missing user (RBNFD), not by the foreign key.
SELECT throws_ok(format($$INSERT INTO memberships (couple_id, user_id, role) VALUES (%L, %L, 'viewer')$$,
                        pg_temp.id('Olivia & Paul'), pg_temp.id('vera')),
                 'RBNFD', format('user %s does not exist', pg_temp.id('vera')), 'a deleted user cannot be added');

-- An invitation a user accepted loses the address it was sent to when they are deleted; the couple's log never
-- held it.
SELECT pg_temp.new_user('ivy');
SELECT results_eq($$SELECT payload FROM outbox WHERE event_type = 'user.created'$$,
                  $$VALUES (jsonb_build_object('user_id', pg_temp.id('ivy'), 'email', 'ivy@example.com',
                                               'display_name', 'Ivy'))$$,
                  'a new user reaches webhook receivers as user.created, with their address and name');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_ivy'), 'viewer', 'ivy@example.com');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_ivy_again'), 'viewer', 'ivy@example.com');
SELECT pg_temp.act_as('ivy');
SELECT accept_invitation(pg_temp.hash('inv_ivy'));
SELECT pg_temp.act_as_operator();
SELECT isnt((SELECT count(*)::int FROM outbox WHERE payload ->> 'email' = 'ivy@example.com'), 0,
            'the outbox holds messages to her address');
-- With sequential scans priced out, a statement reads the whole outbox only where no index serves it: the
-- deletion finds the messages about her invitations by their ids.
SET LOCAL enable_seqscan = off;
CREATE TEMP TABLE outbox_scans AS SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'outbox'::regclass;
SELECT lives_ok(format('SELECT delete_user(%L)', pg_temp.id('ivy')), 'she is deleted');
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'outbox'::regclass),
          (SELECT seq_scan FROM outbox_scans), 'without reading every message in the outbox');
RESET enable_seqscan;
SELECT results_eq($$SELECT email, accepted_by FROM invitations WHERE token_hash = pg_temp.hash('inv_ivy')$$,
                  $$VALUES (NULL::text, NULL::uuid)$$, 'the invitation she accepted names neither her nor her address');
SELECT is((SELECT count(*)::int FROM outbox WHERE payload::text ~ 'ivy@example'
             AND payload ->> 'invitation_id' = (SELECT id::text FROM invitations
                                                WHERE token_hash = pg_temp.hash('inv_ivy'))), 0,
          'nor does any message about it');
SELECT is((SELECT count(*)::int FROM audit_log WHERE concat(before, after) ~ 'ivy@example'), 0,
          'nor the couple''s log');
SELECT is((SELECT count(*)::int FROM outbox WHERE payload::text ~ 'ivy@example|Ivy'
             AND event_type IN ('user.created', 'user.updated')), 0,
          'and her user.created goes from the outbox with her');
SELECT is((SELECT email FROM invitations WHERE token_hash = pg_temp.hash('inv_ivy_again')), 'ivy@example.com',
          'a pending invitation to the address keeps it: whoever holds the address may still accept it');

SELECT * FROM finish();
ROLLBACK;
