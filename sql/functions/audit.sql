-- The audit logs, written by triggers (so raw SQL is recorded too), with who made each change, before and
-- after. A row that belongs to a couple goes to that couple's log (audit_log); anything else (the policy,
-- service keys, row limits, users) reaches every couple at once and goes to the operator's log. Budget
-- tables are audited in budget.sql, with the list of them.

-- TG_ARGV: the table's name in the actions (membership.insert, ...), then the column that holds the couple's
-- id when it is not couple_id (couples' own id).
CREATE OR REPLACE FUNCTION rbac.audit_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    -- Hashes of tokens and keys, and sealed secrets, stay out of the logs. So does the address an invitation
    -- names: a couple's log names people by id only, and would keep it past the person's deletion.
    v_hidden text[] := ARRAY['token_hash', 'key_hash', 'secret_box', 'previous_secret_box', 'check_box']
        || CASE WHEN TG_ARGV[0] = 'invitation' THEN ARRAY['email'] ELSE '{}' END;
    v_before jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) - v_hidden END;
    v_after jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) - v_hidden END;
    v_couple_column text := coalesce(TG_ARGV[1], 'couple_id');
    v_couple_id uuid := coalesce(v_after ->> v_couple_column, v_before ->> v_couple_column)::uuid;
    v_action text := TG_ARGV[0] || '.' || lower(TG_OP);
    -- Read here, where the trigger runs (a Citus worker for a budget row; SET LOCAL reaches it there).
    v_actor_id uuid := rbac.jwt_user_id();
    v_actor_label text := rbac.actor_label();
BEGIN
    IF v_before = v_after THEN
        RETURN NULL;
    END IF;
    IF v_couple_id IS NULL THEN
        -- On Citus the row limits are a reference table, changed on a copy on every node; the coordinator's
        -- copy records the change, and the workers have no operator's log.
        IF to_regclass('public.operator_audit_log') IS NOT NULL THEN
            INSERT INTO public.operator_audit_log (actor_label, action, before, after)
            VALUES (v_actor_label, v_action, v_before, v_after);
        END IF;
    ELSE
        INSERT INTO public.audit_log (couple_id, actor_id, actor_label, action, before, after)
        VALUES (v_couple_id, v_actor_id, v_actor_label, v_action, v_before, v_after);
    END IF;
    RETURN NULL;
END $$;

-- Each audited table and its name in the logs' actions (membership.insert, ...).
DO $$
DECLARE
    v_table text;
    v_name text;
BEGIN
    FOR v_table, v_name IN VALUES
        ('memberships', 'membership'), ('invitations', 'invitation'), ('users', 'user'),
        ('permissions', 'permission'), ('roles', 'role'), ('role_permissions', 'role_permission'),
        ('role_grants', 'role_grant'), ('service_keys', 'service_key'), ('budget_row_limits', 'row_limit'),
        ('user_identities', 'identity'), ('webhook_endpoints', 'webhook'),
        ('invitation_settings', 'invitation_setting'), ('couple_roles', 'couple_role'),
        ('couple_role_permissions', 'couple_role_permission'), ('couple_settings', 'couple_setting'),
        ('delivery_key_check', 'delivery_key')
    LOOP
        -- A table a later migration makes: the run that applies it applies this file again.
        CONTINUE WHEN to_regclass(format('public.%I', v_table)) IS NULL;
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_audit AFTER INSERT OR UPDATE OR DELETE ON %1$I '
                       'FOR EACH ROW EXECUTE FUNCTION rbac.audit_change(%2$L)', v_table, v_name);
    END LOOP;
END $$;

-- A couple's own row, in its log: its creation, its name and the domains it may invite (a refusal of
-- invitations rests on them), and its deletion; not the revision, which every membership write advances.
CREATE OR REPLACE TRIGGER couples_audit AFTER INSERT OR UPDATE OF name, invite_domains OR DELETE ON couples
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('couple', 'id');

-- An entry of the operator's log without what named user p_user_id, when it is an entry of that user or of one
-- of their identities: their address and name, the identity's subject and address become null.
CREATE OR REPLACE FUNCTION rbac.erased(p_entry operator_audit_log, p_user_id uuid) RETURNS operator_audit_log
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_fields jsonb := CASE split_part(p_entry.action, '.', 1)
        WHEN 'user' THEN '{"email": null, "display_name": null}'
        WHEN 'identity' THEN '{"subject": null, "email": null}' END;
    v_key text := CASE split_part(p_entry.action, '.', 1) WHEN 'user' THEN 'id' ELSE 'user_id' END;
BEGIN
    IF v_fields IS NOT NULL AND p_user_id::text IN (p_entry.before ->> v_key, p_entry.after ->> v_key) THEN
        p_entry.before := p_entry.before || v_fields;
        p_entry.after := p_entry.after || v_fields;
    END IF;
    RETURN p_entry;
END $$;

-- Both logs are append-only, for everyone (superusers included). The one change allowed is delete_user's
-- erasure of a deleted user from the operator's log (rbac.erasing names that user for the transaction).
CREATE OR REPLACE FUNCTION rbac.audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_erasing uuid := nullif(current_setting('rbac.erasing', true), '')::uuid;
BEGIN
    -- Nested: the inner condition takes an operator's log entry, and is planned only when it has one.
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'operator_audit_log' AND v_erasing IS NOT NULL THEN
        IF NOT EXISTS (SELECT FROM public.users WHERE id = v_erasing)
           AND to_jsonb(NEW) = to_jsonb(rbac.erased(OLD, v_erasing)) THEN
            RETURN NEW;
        END IF;
    END IF;
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
