-- The operator's audit log: changes that belong to no couple, each written by trigger with who made it,
-- before and after. audit_log keeps each couple's own history (its couple_id is part of its key); these
-- changes reach every couple at once: the access policy (what roles grant and to whom), the service keys
-- that may ask about any couple, and the budget row limits.
CREATE TABLE operator_audit_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor_label text NOT NULL,
    action text NOT NULL,
    before jsonb,
    after jsonb
);

CREATE FUNCTION rbac.audit_operator_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_before jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END;
    v_after jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END;
BEGIN
    -- Key hashes stay out of the log, as token hashes stay out of audit_log.
    v_before := v_before - 'key_hash';
    v_after := v_after - 'key_hash';
    IF v_before = v_after THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.operator_audit_log (actor_label, action, before, after)
    VALUES (rbac.actor_label(), TG_ARGV[0] || '.' || lower(TG_OP), v_before, v_after);
    RETURN NULL;
END $$;

CREATE TRIGGER permissions_audit AFTER INSERT OR UPDATE OR DELETE ON permissions
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_operator_change('permission');
CREATE TRIGGER roles_audit AFTER INSERT OR UPDATE OR DELETE ON roles
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_operator_change('role');
CREATE TRIGGER role_permissions_audit AFTER INSERT OR UPDATE OR DELETE ON role_permissions
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_operator_change('role_permission');
CREATE TRIGGER role_grants_audit AFTER INSERT OR UPDATE OR DELETE ON role_grants
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_operator_change('role_grant');
CREATE TRIGGER service_keys_audit AFTER INSERT OR UPDATE OR DELETE ON service_keys
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_operator_change('service_key');
CREATE TRIGGER budget_row_limits_audit AFTER INSERT OR UPDATE OR DELETE ON budget_row_limits
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_operator_change('row_limit');

-- Append-only, like audit_log, for everyone (superusers included).
CREATE TRIGGER operator_audit_log_append_only BEFORE UPDATE OR DELETE ON operator_audit_log
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_log_append_only();
CREATE TRIGGER operator_audit_log_no_truncate BEFORE TRUNCATE ON operator_audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION rbac.audit_log_append_only();

-- Operators read it; the application role does not (it is no couple's data).
REVOKE ALL ON operator_audit_log FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION rbac.audit_operator_change() FROM PUBLIC;
GRANT SELECT ON operator_audit_log TO rbac_operator;
