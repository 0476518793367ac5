-- The operator's audit log: one row per change to the policy, the service keys, the row limits or the users,
-- with the operator's label, before and after; never a key hash; append-only; not for the application role.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT set_config('rbac.actor_label', 'admin-alice', true);
CREATE TEMPORARY TABLE seen AS SELECT coalesce(max(id), 0) AS id FROM operator_audit_log;
-- The entries written since `seen`, in order.
CREATE FUNCTION pg_temp.new_entries() RETURNS SETOF operator_audit_log LANGUAGE sql AS $$
    SELECT * FROM operator_audit_log WHERE id > (SELECT id FROM pg_temp.seen) ORDER BY id
$$;
CREATE FUNCTION pg_temp.mark_seen() RETURNS void LANGUAGE sql AS $$
    UPDATE pg_temp.seen SET id = (SELECT coalesce(max(id), 0) FROM operator_audit_log)
$$;

INSERT INTO service_keys (name, key_hash) VALUES ('billing', pg_temp.hash('rbk_secret'));
UPDATE service_keys SET revoked_at = now() WHERE name = 'billing';
SELECT results_eq(
    $$SELECT action, actor_label, before ->> 'name', after ->> 'name', after ->> 'revoked_at' IS NOT NULL
      FROM pg_temp.new_entries()$$,
    $$VALUES ('service_key.insert', 'operator:admin-alice', NULL, 'billing', false),
             ('service_key.update', 'operator:admin-alice', 'billing', 'billing', true)$$,
    'creating and revoking a service key are recorded with the operator''s label');
SELECT is_empty(
    $$SELECT 1 FROM operator_audit_log WHERE before ? 'key_hash' OR after ? 'key_hash'$$,
    'key hashes stay out of the log');
SELECT pg_temp.mark_seen();
INSERT INTO service_key_use (key_id, last_used_at) SELECT id, now() FROM service_keys WHERE name = 'billing';
SELECT is_empty($$SELECT 1 FROM pg_temp.new_entries()$$, 'a key''s use recorded is no change the log keeps');
SELECT ok(NOT has_table_privilege('rbac_app', 'service_key_use', 'SELECT'), 'nor one the application role reads');
INSERT INTO idempotent_requests (key_id, idempotency_key, fingerprint, claim, claimed_until)
SELECT id, 'pay-1', sha256('POST /v1'), gen_random_uuid(), now() + interval '30 seconds' FROM service_keys
WHERE name = 'billing';
SELECT is_empty($$SELECT 1 FROM pg_temp.new_entries()$$, 'nor is a request kept for its Idempotency-Key');
SELECT ok(NOT has_table_privilege('rbac_app', 'idempotent_requests', 'SELECT'), 'which the application role reads not');

UPDATE budget_row_limits SET max_rows = 1234 WHERE table_name = 'expenses';
UPDATE budget_row_limits SET max_rows = max_rows;
SELECT results_eq(
    $$SELECT action, before ->> 'table_name', (before ->> 'max_rows')::int, (after ->> 'max_rows')::int
      FROM pg_temp.new_entries()$$,
    $$VALUES ('row_limit.update', 'expenses', 100000, 1234)$$,
    'a changed row limit is recorded, before and after; rewriting the same values records nothing');
SELECT pg_temp.mark_seen();

INSERT INTO users (email) VALUES ('rita@example.com');
UPDATE users SET display_name = 'Rita' WHERE email = 'rita@example.com';
SELECT results_eq(
    $$SELECT action, actor_label, before ->> 'display_name', after ->> 'email', after ->> 'display_name'
      FROM pg_temp.new_entries()$$,
    $$VALUES ('user.insert', 'operator:admin-alice', NULL, 'rita@example.com', NULL),
             ('user.update', 'operator:admin-alice', NULL, 'rita@example.com', 'Rita')$$,
    'adding a user and naming them are recorded with the operator''s label');
SELECT pg_temp.mark_seen();

CREATE TEMPORARY TABLE base AS SELECT pg_temp.policy_in_force() AS policy;
SELECT apply_policy((SELECT policy FROM base));
SELECT is_empty('SELECT * FROM pg_temp.new_entries()', 'applying the policy in force again records nothing');

SELECT apply_policy(jsonb_set(
    jsonb_set((SELECT policy FROM base), '{permissions,seating.view}', '"See the seating plan"'),
    '{roles,viewer,permissions}', (SELECT policy #> '{roles,viewer,permissions}' FROM base) || '["seating.view"]'));
SELECT results_eq(
    $$SELECT action, coalesce(after ->> 'name', after ->> 'role'), after ->> 'permission' FROM pg_temp.new_entries()$$,
    $$VALUES ('permission.insert', 'seating.view', NULL), ('role_permission.insert', 'viewer', 'seating.view')$$,
    'a policy change is recorded row by row: the new permission, and the role that now grants it');
SELECT pg_temp.mark_seen();
SELECT apply_policy((SELECT policy FROM base));
SELECT results_eq(
    $$SELECT action, coalesce(before ->> 'name', before ->> 'role'), before ->> 'permission' FROM pg_temp.new_entries()$$,
    $$VALUES ('role_permission.delete', 'viewer', 'seating.view'), ('permission.delete', 'seating.view', NULL)$$,
    'and so is taking it back');

SELECT throws_ok('UPDATE operator_audit_log SET action = action', 'RBDEN', NULL, 'the log refuses UPDATE');
SELECT throws_ok('DELETE FROM operator_audit_log', 'RBDEN', NULL, 'the log refuses DELETE');
SELECT throws_ok('TRUNCATE operator_audit_log', 'RBDEN', NULL, 'the log refuses TRUNCATE');

SET LOCAL ROLE rbac_app;
SELECT throws_ok('SELECT * FROM operator_audit_log', '42501', NULL, 'the application role cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
