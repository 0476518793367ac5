-- The outbox: every change to couples, their roles, invitations, memberships and users, and every ownership
-- transfer, becomes one message per enabled endpoint that wants it, in the same transaction, whoever makes the
-- change.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

INSERT INTO webhook_endpoints (url, secret_box) VALUES ('https://all.example.com/hooks', '\x00');
INSERT INTO webhook_endpoints (url, event_types, secret_box)
VALUES ('https://members.example.com/hooks', '{membership.created}', '\x00');
INSERT INTO webhook_endpoints (url, secret_box, disabled_at) VALUES ('https://gone.example.com/hooks', '\x00', now());

SELECT pg_temp.new_user(name) FROM unnest(ARRAY['olivia', 'paul', 'vera']) AS name;
SELECT pg_temp.new_couple('Olivia & Paul', 'olivia');
SELECT results_eq(
    $$SELECT e.url, o.event_type FROM outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id
      ORDER BY e.url, o.event_type$$,
    $$VALUES ('https://all.example.com/hooks', 'couple.created'),
             ('https://all.example.com/hooks', 'membership.created'),
             ('https://all.example.com/hooks', 'user.created'),
             ('https://all.example.com/hooks', 'user.created'),
             ('https://all.example.com/hooks', 'user.created'),
             ('https://members.example.com/hooks', 'membership.created')$$,
    'users, a couple and its member inserted by raw SQL: one message per endpoint that wants it, none for a '
    'disabled one');
SELECT is((SELECT payload FROM outbox WHERE event_type = 'couple.created'),
          jsonb_build_object('couple_id', pg_temp.id('Olivia & Paul'), 'name', 'Olivia & Paul', 'previous_name', NULL),
          'couple.created names the couple');
DELETE FROM outbox;

SELECT pg_temp.add_member('Olivia & Paul', 'paul', 'partner');
SELECT transfer_ownership(pg_temp.id('Olivia & Paul'), pg_temp.id('paul'));
SELECT bag_eq(
    $$SELECT event_type, payload ->> 'role' AS role, payload ->> 'previous_role' AS previous_role FROM outbox
      WHERE endpoint_id = (SELECT id FROM webhook_endpoints WHERE url LIKE 'https://all.%')$$,
    $$VALUES ('membership.created', 'partner', NULL), ('membership.updated', 'owner', 'partner'),
             ('membership.updated', 'partner', 'owner'), ('ownership.transferred', NULL, NULL)$$,
    'an ownership transfer: both role changes and the transfer itself');
DELETE FROM outbox;

SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_1'), 'viewer', 'vera@example.com');
-- With sequential scans priced out, a statement reads the whole outbox only where no index serves it.
SET LOCAL enable_seqscan = off;
CREATE TEMP TABLE outbox_scans AS SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'outbox'::regclass;
SELECT pg_temp.act_as('vera');
SELECT * FROM accept_invitation(pg_temp.hash('inv_1'));
SELECT pg_temp.act_as_operator();
RESET enable_seqscan;
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'outbox'::regclass),
          (SELECT seq_scan FROM outbox_scans),
          'an acceptance finds the messages that hold its link by the invitation''s id, not by reading them all');
SELECT create_invitation(pg_temp.id('Olivia & Paul'), pg_temp.hash('inv_2'), 'viewer');
SELECT revoke_invitation(pg_temp.id('Olivia & Paul'), (SELECT id FROM invitations WHERE token_hash = pg_temp.hash('inv_2')));
SELECT bag_eq(
    $$SELECT event_type FROM outbox WHERE endpoint_id = (SELECT id FROM webhook_endpoints WHERE url LIKE 'https://all.%')$$,
    $$VALUES ('invitation.created'), ('invitation.accepted'), ('membership.created'), ('invitation.created'),
             ('invitation.revoked')$$,
    'invitations created, accepted and revoked');
SELECT is((SELECT count(*)::int FROM outbox
           WHERE position('inv_' in payload::text) > 0 OR payload ? 'token_hash'
              OR position(encode(pg_temp.hash('inv_1'), 'hex') in payload::text) > 0), 0,
          'no message carries a token or its hash');
SELECT ok((SELECT bool_and(status = 'pending' AND attempts = 0) FROM outbox), 'every message waits for a worker');

UPDATE memberships SET updated_at = now() WHERE user_id = pg_temp.id('vera');
SELECT is((SELECT count(*)::int FROM outbox WHERE event_type = 'membership.updated'), 0,
          'an update that changes neither role nor status tells nothing');

DELETE FROM outbox;
SELECT rename_couple(pg_temp.id('Olivia & Paul'), 'Olivia & Paul Smith');
UPDATE couples SET name = 'Olivia & Paul Smith', invite_domains = '{example.com}';
SELECT results_eq(
    $$SELECT event_type, payload ->> 'name', payload ->> 'previous_name' FROM outbox
      WHERE endpoint_id = (SELECT id FROM webhook_endpoints WHERE url LIKE 'https://all.%')$$,
    $$VALUES ('couple.renamed', 'Olivia & Paul Smith', 'Olivia & Paul')$$,
    'a rename: couple.renamed with the name before; an update that keeps the name tells nothing');
DELETE FROM outbox;

-- A couple's own roles, as each is when the transaction commits: their triggers wait for it, and SET CONSTRAINTS
-- ALL IMMEDIATE brings that moment here.
CREATE TEMPORARY TABLE outbox_writes AS
SELECT n_tup_ins AS inserted, n_tup_del AS deleted FROM pg_stat_xact_user_tables WHERE relname = 'outbox';
SELECT pg_temp.act_as('paul');
SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'mom', 'Mom', ARRAY['guests.view', 'budget.view']);
SELECT edit_couple_role(pg_temp.id('Olivia & Paul'), 'mom', 'Mother');
SET CONSTRAINTS ALL IMMEDIATE;
SELECT results_eq(
    $$SELECT event_type, payload FROM outbox$$,
    format($$VALUES ('role.created', jsonb_build_object('couple_id', %L::uuid, 'role', 'mom', 'description', 'Mother',
                                                         'permissions', ARRAY['budget.view', 'guests.view']))$$,
           pg_temp.id('Olivia & Paul')),
    'a role made, then changed: one role.created, as the role is at the commit, with what it grants');
SELECT pg_temp.act_as_operator();
SELECT results_eq(
    $$SELECT s.n_tup_ins - w.inserted, s.n_tup_del - w.deleted
      FROM pg_stat_xact_user_tables s, outbox_writes w WHERE s.relname = 'outbox'$$,
    $$VALUES (1::bigint, 0::bigint)$$,
    'its four firings (role, two permissions, edit) wrote the message once: the later three found it told');
SET CONSTRAINTS ALL DEFERRED;
DELETE FROM outbox;

SELECT edit_couple_role(pg_temp.id('Olivia & Paul'), 'mom', 'Mother', ARRAY['budget.view', 'guests.view']);
SELECT pg_temp.act_as_operator();
UPDATE couple_roles SET description = 'Mother', updated_at = now() - interval '1 day';
UPDATE couple_role_permissions SET permission = permission;
SET CONSTRAINTS ALL IMMEDIATE;
SELECT is((SELECT count(*)::int FROM outbox), 0, 'edits that change nothing a role is and grants tell nothing');
SET CONSTRAINTS ALL DEFERRED;

DELETE FROM couple_role_permissions WHERE role = 'mom' AND permission = 'guests.view';
SET CONSTRAINTS ALL IMMEDIATE;
SELECT results_eq(
    $$SELECT event_type, payload -> 'permissions' FROM outbox$$,
    $$VALUES ('role.updated', '["budget.view"]'::jsonb)$$,
    'what it grants changed by raw SQL: role.updated');
SET CONSTRAINTS ALL DEFERRED;
DELETE FROM outbox;

SELECT pg_temp.act_as('paul');
SELECT delete_couple_role(pg_temp.id('Olivia & Paul'), 'mom');
SELECT create_couple_role(pg_temp.id('Olivia & Paul'), 'aunt', 'Aunt', ARRAY['guests.view']);
SELECT pg_temp.act_as_operator();
SET CONSTRAINTS ALL IMMEDIATE;
SELECT results_eq(
    $$SELECT event_type, payload FROM outbox ORDER BY event_type$$,
    format($$VALUES ('role.created', jsonb_build_object('couple_id', %1$L::uuid, 'role', 'aunt', 'description', 'Aunt',
                                                         'permissions', ARRAY['guests.view'])),
                    ('role.deleted', jsonb_build_object('couple_id', %1$L::uuid, 'role', 'mom'))$$,
           pg_temp.id('Olivia & Paul')),
    'a role deleted: role.deleted with its couple and name; another made in the same transaction: role.created');
SET CONSTRAINTS ALL DEFERRED;
DELETE FROM outbox;

SELECT pg_temp.act_as('paul');
SELECT delete_couple(pg_temp.id('Olivia & Paul'));
SELECT pg_temp.act_as_operator();
SET CONSTRAINTS ALL IMMEDIATE;
SELECT bag_eq(
    $$SELECT event_type, payload ->> 'couple_id', coalesce(payload ->> 'name', payload ->> 'user_id', payload ->> 'role')
      FROM outbox WHERE endpoint_id = (SELECT id FROM webhook_endpoints WHERE url LIKE 'https://all.%')$$,
    format($$VALUES ('couple.deleted', %1$L, 'Olivia & Paul Smith'), ('membership.removed', %1$L, %2$L),
                    ('membership.removed', %1$L, %3$L), ('membership.removed', %1$L, %4$L),
                    ('role.deleted', %1$L, 'aunt')$$,
           pg_temp.id('Olivia & Paul'), pg_temp.id('olivia'), pg_temp.id('paul'), pg_temp.id('vera')),
    'a deletion: couple.deleted, membership.removed for each member and role.deleted for each of its own roles');
SET CONSTRAINTS ALL DEFERRED;

-- A rotated secret that still signs has a time it stops; one without a secret has none.
SELECT throws_ok($$UPDATE webhook_endpoints SET previous_secret_box = '\x00' WHERE url LIKE 'https://all.%'$$,
                 '23514', NULL, 'an old secret without the time it stops signing is refused');
SELECT throws_ok($$UPDATE webhook_endpoints SET previous_secret_until = now() WHERE url LIKE 'https://all.%'$$,
                 '23514', NULL, 'a time without an old secret is refused');

-- The check of the database's delivery key stays once written: without it, any key would become the database's.
INSERT INTO delivery_key_check (check_box) VALUES ('\x00');
SELECT throws_ok('DELETE FROM delivery_key_check', 'RBDEN',
                 'the one row of delivery_key_check stays: rbac delivery-key rotate changes the database''s key, '
                 'and reset replaces one that is lost', 'the delivery key''s check is not deleted');
SELECT throws_ok('TRUNCATE delivery_key_check', 'RBDEN', NULL, 'nor truncated');
SELECT is((SELECT count(*)::int FROM delivery_key_check), 1, 'and is still there');

-- The URL as `rbac webhooks add` admits it, whoever writes it: no password to list and audit, nothing a request
-- could not send or no server could answer.
SELECT throws_ok(format('INSERT INTO webhook_endpoints (url, secret_box) VALUES (%L, ''\x00'')', url), '23514', NULL,
                 'refused: ' || why)
FROM (VALUES ('https://hooks:pa55word@example.com/', 'a user and password'),
             ('https://hooks@example.com/', 'a user'),
             ('https://hooks.example.com/#top', 'a fragment'),
             ('https://bücher.example/', 'text beyond ASCII'),
             ('https://hooks.example.com/a' || chr(160) || 'b', 'a no-break space'),
             ('https:///hooks', 'no host'),
             ('https://:8443/hooks', 'a port without a host'),
             ('https://hooks.example.com:0/', 'port 0'),
             ('https://hooks.example.com:65536/', 'a port past 65535'),
             ('https://hooks.example.com:99999999999999999999/', 'a port past any integer'),
             ('https://[::1]:80a/', 'a port that is no number'),
             ('https://hooks.example.com:1:2/', 'two ports'),
             ('HTTPS://hooks.example.com/', 'the scheme not in lower case'),
             ('https://hooks..example.com/', 'an empty label'),
             ('https://.example.com/', 'a host that begins with a dot'),
             ('https://hooks%2E%2Eexample.com/', 'a % escape in the host, where libcurl decodes it'),
             ('https://hooks.example.com/a%zz', 'a % without two hexadecimal digits'),
             ('https://hooks.example.com/?a=%4', 'a % with one')) AS refused (url, why);
SELECT lives_ok(format('INSERT INTO webhook_endpoints (url, secret_box) VALUES (%L, ''\x00'')', url), 'kept: ' || url)
FROM (VALUES ('https://[::1]:8443/hooks?team=a'), ('https://hooks.example.com/users/@me'),
             ('https://hooks.example.com:065535?a=b:c'), ('https://hooks.example.com:/'), ('https://[::1]/hooks'),
             ('https://xn--bcher-kva.example/a%20b'),
             ('https://hooks.example.com./a%2e%2E?b=%C3%BC..')) AS kept (url);

SELECT * FROM finish();
ROLLBACK;
