-- The audit logs, written by triggers (so raw SQL is recorded too), with who made each change, before and
-- after. A row that belongs to a couple goes to that couple's log (audit_log); anything else (the policy,
-- service keys, row limits, users) reaches every couple at once and goes to the operator's log. Budget
-- tables are audited in budget.sql, with the list of them.

CREATE OR REPLACE FUNCTION rbac.audit_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    -- Hashes of tokens and keys stay out of the logs.
    v_before jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) - 'token_hash' - 'key_hash' END;
    v_after jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) - 'token_hash' - 'key_hash' END;
    v_couple_id uuid := coalesce(v_after ->> 'couple_id', v_before ->> 'couple_id')::uuid;
    v_action text := TG_ARGV[0] || '.' || lower(TG_OP);
BEGIN
    IF v_before = v_after THEN
        RETURN NULL;
    END IF;
    IF v_couple_id IS NULL THEN
        INSERT INTO public.operator_audit_log (actor_label, action, before, after)
        VALUES (rbac.actor_label(), v_action, v_before, v_after);
    ELSE
        INSERT INTO public.audit_log (couple_id, actor_id, actor_label, action, before, after)
        VALUES (v_couple_id, rbac.jwt_user_id(), rbac.actor_label(), v_action, v_before, v_after);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER memberships_audit AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('membership');
CREATE OR REPLACE TRIGGER invitations_audit AFTER INSERT OR UPDATE OR DELETE ON invitations
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('invitation');
CREATE OR REPLACE TRIGGER users_audit AFTER INSERT OR UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('user');
CREATE OR REPLACE TRIGGER permissions_audit AFTER INSERT OR UPDATE OR DELETE ON permissions
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('permission');
CREATE OR REPLACE TRIGGER roles_audit AFTER INSERT OR UPDATE OR DELETE ON roles
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('role');
CREATE OR REPLACE TRIGGER role_permissions_audit AFTER INSERT OR UPDATE OR DELETE ON role_permissions
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('role_permission');
CREATE OR REPLACE TRIGGER role_grants_audit AFTER INSERT OR UPDATE OR DELETE ON role_grants
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('role_grant');
CREATE OR REPLACE TRIGGER service_keys_audit AFTER INSERT OR UPDATE OR DELETE ON service_keys
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('service_key');
CREATE OR REPLACE TRIGGER budget_row_limits_audit AFTER INSERT OR UPDATE OR DELETE ON budget_row_limits
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('row_limit');

-- Both logs are append-only, for everyone (superusers included).
CREATE OR REPLACE FUNCTION rbac.audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % is not allowed', TG_OP USING ERRCODE = 'RBDEN';
END $$;

CREATE OR REPLACE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_log_append_only();
CREATE OR REPLACE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION rbac.audit_log_append_only();
CREATE OR REPLACE TRIGGER operator_audit_log_append_only BEFORE UPDATE OR DELETE ON operator_audit_log
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_log_append_only();
CREATE OR REPLACE TRIGGER operator_audit_log_no_truncate BEFORE TRUNCATE ON operator_audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION rbac.audit_log_append_only();
