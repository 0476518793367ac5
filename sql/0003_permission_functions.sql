-- Permission questions: may user U do P in couple C, and what may they do.
--
-- user_has_permission is the hot path. It is plpgsql so that its query plan is cached per session (a
-- LANGUAGE sql function with this body is re-planned on every call), and it answers false, never NULL, for
-- unknown couples, users and permissions and for suspended members.

-- The caller is `sub` of request.jwt.claims, as Supabase / PostgREST set it.
CREATE FUNCTION public.user_has_permission(p_couple_id uuid, p_permission text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_user uuid := rbac.jwt_user_id();
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM memberships m
        JOIN role_permissions rp ON rp.role = m.role
        WHERE m.couple_id = p_couple_id AND m.user_id = v_user AND m.status = 'active'
          AND rp.permission = p_permission);
END $$;

-- For trusted backends that name the user.
CREATE FUNCTION public.user_has_permission(p_couple_id uuid, p_user_id uuid, p_permission text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM memberships m
        JOIN role_permissions rp ON rp.role = m.role
        WHERE m.couple_id = p_couple_id AND m.user_id = p_user_id AND m.status = 'active'
          AND rp.permission = p_permission);
END $$;

-- Raises RBDEN unless the caller may look at p_user_id's standing in the couple: the operator, the user
-- themself, or an active member of the couple.
CREATE FUNCTION rbac.require_member_view(p_couple_id uuid, p_user_id uuid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public AS $$
DECLARE
    v_actor uuid;
BEGIN
    PERFORM rbac.require_couple(p_couple_id);
    IF rbac.is_operator() THEN
        RETURN;
    END IF;
    v_actor := rbac.require_user();
    IF v_actor IS DISTINCT FROM p_user_id AND NOT EXISTS (
        SELECT 1 FROM memberships WHERE couple_id = p_couple_id AND user_id = v_actor AND status = 'active')
    THEN
        RAISE EXCEPTION 'permission denied: only members of couple % can see its members', p_couple_id
            USING ERRCODE = 'RBDEN';
    END IF;
END $$;

-- The permissions p_user_id holds in the couple, sorted; empty when not an active member.
CREATE FUNCTION public.user_permissions(p_couple_id uuid, p_user_id uuid) RETURNS text[]
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM rbac.require_member_view(p_couple_id, p_user_id);
    RETURN coalesce((
        SELECT array_agg(rp.permission ORDER BY rp.permission)
        FROM memberships m JOIN role_permissions rp ON rp.role = m.role
        WHERE m.couple_id = p_couple_id AND m.user_id = p_user_id AND m.status = 'active'), '{}');
END $$;

-- p_user_id's role in the couple (also when suspended), or NULL when not a member.
CREATE FUNCTION public.user_role(p_couple_id uuid, p_user_id uuid) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM rbac.require_member_view(p_couple_id, p_user_id);
    RETURN (SELECT role FROM memberships WHERE couple_id = p_couple_id AND user_id = p_user_id);
END $$;

-- Whether p_user_id may leave: an active or suspended member who is not the couple's last active owner.
CREATE FUNCTION public.can_leave_collaboration(p_couple_id uuid, p_user_id uuid) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_member memberships;
BEGIN
    PERFORM rbac.require_member_view(p_couple_id, p_user_id);
    SELECT * INTO v_member FROM memberships WHERE couple_id = p_couple_id AND user_id = p_user_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN NOT (v_member.role = 'owner' AND v_member.status = 'active') OR EXISTS (
        SELECT 1 FROM memberships
        WHERE couple_id = p_couple_id AND role = 'owner' AND status = 'active' AND user_id <> p_user_id);
END $$;

-- The couples p_user_id belongs to, by couple id; pass the last couple_id of a page as p_after for the next.
CREATE FUNCTION public.user_couples(p_user_id uuid, p_limit integer DEFAULT 50, p_after uuid DEFAULT NULL)
RETURNS TABLE (couple_id uuid, couple_name text, role text, status text, joined_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF NOT rbac.is_operator() AND rbac.require_user() IS DISTINCT FROM p_user_id THEN
        RAISE EXCEPTION 'permission denied: users can list only their own couples' USING ERRCODE = 'RBDEN';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'page size must be between 1 and 1000, not %', p_limit USING ERRCODE = 'RBINV';
    END IF;
    RETURN QUERY
        SELECT m.couple_id, c.name, m.role, m.status, m.created_at
        FROM memberships m JOIN couples c ON c.id = m.couple_id
        WHERE m.user_id = p_user_id AND (p_after IS NULL OR m.couple_id > p_after)
        ORDER BY m.couple_id
        LIMIT p_limit;
END $$;

-- The members of a couple, by user id; needs collaborators.view. Paginated like user_couples.
CREATE FUNCTION public.couple_members(p_couple_id uuid, p_limit integer DEFAULT 50, p_after uuid DEFAULT NULL)
RETURNS TABLE (user_id uuid, email text, display_name text, role text, status text, joined_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'collaborators.view');
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'page size must be between 1 and 1000, not %', p_limit USING ERRCODE = 'RBINV';
    END IF;
    RETURN QUERY
        SELECT m.user_id, u.email, u.display_name, m.role, m.status, m.created_at
        FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE m.couple_id = p_couple_id AND (p_after IS NULL OR m.user_id > p_after)
        ORDER BY m.user_id
        LIMIT p_limit;
END $$;
