-- What permission caches need: a notification, at commit, of every change that could make a cached answer
-- wrong. Channel rbac_changes; payloads:
--   couple <couple id> <revision>       a membership of the couple changed; the couple is now at <revision>
--   couple <couple id>                  the couple was deleted
--   roles <policy revision> [<role>...] what the named roles grant changed (no names: any role may have)
--   keys                                a service key was revoked or deleted
-- Notifications arrive in commit order, and a cache that hears one drops only what it names.

-- The notice that couple p_couple_id changed and is now at p_revision (NULL: the couple is gone).
CREATE OR REPLACE FUNCTION rbac.notify_couple_change(p_couple_id uuid, p_revision bigint) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify('rbac_changes', concat_ws(' ', 'couple', p_couple_id::text, p_revision::text))
$$;

CREATE OR REPLACE FUNCTION rbac.notify_membership_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_couple_id uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.couple_id ELSE NEW.couple_id END;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NULL;
    END IF;
    PERFORM rbac.notify_couple_change(v_couple_id, (SELECT revision FROM public.couples WHERE id = v_couple_id));
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER memberships_notify AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.notify_membership_change();

-- A change to what roles grant advances the policy revision, which checks read beside each couple's own: no
-- couple's row is written, and caches drop only the members of the roles that changed.
CREATE OR REPLACE FUNCTION rbac.notify_role_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_revision bigint;
    v_roles text;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        SELECT string_agg(role, ' ') INTO v_roles FROM (SELECT role FROM changed UNION SELECT role FROM replaced) r;
    ELSE
        SELECT string_agg(DISTINCT role, ' ') INTO v_roles FROM changed;
    END IF;
    IF v_roles IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE public.policy_revision SET revision = revision + 1 RETURNING revision INTO v_revision;
    -- A payload must stay under 8000 bytes; without names, caches drop every role's members.
    PERFORM pg_notify('rbac_changes', concat_ws(' ', 'roles', v_revision::text,
                                                CASE WHEN length(v_roles) < 7000 THEN v_roles END));
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER role_permissions_notify_insert AFTER INSERT ON role_permissions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_role_change();
CREATE OR REPLACE TRIGGER role_permissions_notify_update AFTER UPDATE ON role_permissions
    REFERENCING OLD TABLE AS replaced NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_role_change();
CREATE OR REPLACE TRIGGER role_permissions_notify_delete AFTER DELETE ON role_permissions
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_role_change();

CREATE OR REPLACE FUNCTION rbac.notify_key_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM pg_notify('rbac_changes', 'keys');
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER service_keys_notify AFTER UPDATE OR DELETE ON service_keys
    FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_key_change();
