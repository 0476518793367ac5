-- What permission caches need: a consistent snapshot of one member's permissions with the couple's revision,
-- and a notification, at commit, of every change that could make a cached answer wrong.
--
-- Channel rbac_changes; payloads:
--   couple <couple id> <revision>   a membership of the couple changed; the couple is now at <revision>
--   couple <couple id>              the couple was deleted
--   roles                           role permissions changed; every couple's revision advanced
--   keys                            a service key was revoked or deleted

CREATE FUNCTION rbac.notify_membership_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_couple_id uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.couple_id ELSE NEW.couple_id END;
    v_revision bigint;
BEGIN
    SELECT revision INTO v_revision FROM public.couples WHERE id = v_couple_id;
    PERFORM pg_notify('rbac_changes', concat_ws(' ', 'couple', v_couple_id::text, v_revision::text));
    RETURN NULL;
END $$;

CREATE TRIGGER memberships_notify AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.notify_membership_change();

-- A change to what a role grants changes every member's permissions: every couple's revision advances, so a
-- check with min_revision from before the change is answered from the database.
CREATE FUNCTION rbac.notify_role_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE public.couples SET revision = revision + 1;
        PERFORM pg_notify('rbac_changes', 'roles');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER role_permissions_notify_insert AFTER INSERT ON role_permissions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_role_change();
CREATE TRIGGER role_permissions_notify_update AFTER UPDATE ON role_permissions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_role_change();
CREATE TRIGGER role_permissions_notify_delete AFTER DELETE ON role_permissions
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_role_change();

CREATE FUNCTION rbac.notify_key_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM pg_notify('rbac_changes', 'keys');
    RETURN NULL;
END $$;

CREATE TRIGGER service_keys_notify AFTER UPDATE OR DELETE ON service_keys
    FOR EACH STATEMENT EXECUTE FUNCTION rbac.notify_key_change();

-- Everything p_user_id may do in the couple, and the couple's revision, read from one snapshot (a STABLE
-- function sees its caller's snapshot in every statement). Revision is NULL for an unknown couple;
-- permissions are empty unless the user is an active member. For trusted backends and caches.
CREATE FUNCTION public.user_permission_set(
    p_couple_id uuid, p_user_id uuid, OUT revision bigint, OUT permissions text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    SELECT c.revision INTO revision FROM couples c WHERE c.id = p_couple_id;
    permissions := coalesce((
        SELECT array_agg(rp.permission ORDER BY rp.permission)
        FROM memberships m JOIN role_permissions rp ON rp.role = m.role
        WHERE m.couple_id = p_couple_id AND m.user_id = p_user_id AND m.status = 'active'), '{}');
END $$;

REVOKE EXECUTE ON FUNCTION public.user_permission_set(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.user_permission_set(uuid, uuid) TO rbac_operator;
