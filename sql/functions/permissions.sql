-- Permission questions: may user U do P in couple C, what may they do, and what permission caches read.

-- The one definition of "holds a permission": the member's role grants it, be it a role of the policy or one the
-- couple defined (their names never collide), and the membership is in force (active and not past its expiry).
-- plpgsql so that its query plan is cached per session (a LANGUAGE sql function with this body is re-planned on
-- every call); false, never NULL, for unknown couples, users and permissions, for suspended members and from the
-- instant a membership expires. The two kinds of grant are one lateral UNION ALL with LIMIT 1: an OR of two
-- EXISTS sub-plans cost a sixth more per call. It does not ask who asks: the two user_has_permission do, and
-- what asks about the caller comes here directly (the two-argument form, rbac.require_permission and the other
-- checks of an acting user), since through the three-argument form it would read the claims twice, a sixth of
-- its time. No pinned search_path: only functions that pin it call this (its EXECUTE is no one's), and pinning
-- would cost every call a configuration change.
CREATE OR REPLACE FUNCTION rbac.holds_permission(p_couple_id uuid, p_user_id uuid, p_permission text)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM memberships m
        JOIN LATERAL (SELECT 1 FROM role_permissions rp WHERE rp.role = m.role AND rp.permission = p_permission
                      UNION ALL
                      SELECT 1 FROM couple_role_permissions crp
                      WHERE crp.couple_id = m.couple_id AND crp.role = m.role AND crp.permission = p_permission
                      LIMIT 1) granted ON true
        WHERE m.couple_id = p_couple_id AND m.user_id = p_user_id AND rbac.in_force(m.status, m.expires_at));
END $$;

-- For trusted backends that name the user: the hot path. End users (a session with claims) ask about themselves,
-- or about the members of a couple they are in, as user_permissions lets them: one answer per permission would
-- tell an outsider all user_permissions refuses.
CREATE OR REPLACE FUNCTION public.user_has_permission(p_couple_id uuid, p_user_id uuid, p_permission text)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF nullif(current_setting('request.jwt.claims', true), '') IS NOT NULL
       AND rbac.jwt_user_id() IS DISTINCT FROM p_user_id THEN
        PERFORM rbac.require_member_view(p_couple_id, p_user_id);
    END IF;
    RETURN rbac.holds_permission(p_couple_id, p_user_id, p_permission);
END $$;

-- The caller is `sub` of request.jwt.claims, as Supabase / PostgREST set it.
CREATE OR REPLACE FUNCTION public.user_has_permission(p_couple_id uuid, p_permission text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RETURN rbac.holds_permission(p_couple_id, rbac.jwt_user_id(), p_permission);
END $$;

-- The permissions p_user_id holds in the couple, sorted; empty unless their membership is in force.
CREATE OR REPLACE FUNCTION public.user_permissions(p_couple_id uuid, p_user_id uuid) RETURNS text[]
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.require_member_view(p_couple_id, p_user_id);
    RETURN rbac.held_permissions(p_couple_id, p_user_id);
END $$;

-- p_user_id's role in the couple (also when suspended), or NULL when not a member.
CREATE OR REPLACE FUNCTION public.user_role(p_couple_id uuid, p_user_id uuid) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.require_member_view(p_couple_id, p_user_id);
    RETURN (SELECT role FROM memberships WHERE couple_id = p_couple_id AND user_id = p_user_id);
END $$;

-- Whether p_user_id may leave: an active or suspended member who is not the couple's last active owner.
CREATE OR REPLACE FUNCTION public.can_leave_collaboration(p_couple_id uuid, p_user_id uuid) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
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

-- A membership's status as listings show it: active, suspended, or expired (past its expiry, whatever the
-- status column says).
CREATE OR REPLACE FUNCTION rbac.membership_status(p_status text, p_expires_at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_expires_at <= now() THEN 'expired' ELSE p_status END
$$;

-- When p_user_id joined couple p_couple_id: the place of the membership that a page of the couple's members, or
-- of the user's couples, follows when the caller knows no other. RBNFD when they are no member (any more).
CREATE OR REPLACE FUNCTION rbac.joined_at(p_couple_id uuid, p_user_id uuid) RETURNS timestamptz
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_joined timestamptz := (SELECT created_at FROM memberships WHERE couple_id = p_couple_id AND user_id = p_user_id);
BEGIN
    IF v_joined IS NULL THEN
        RAISE EXCEPTION 'user % is no member of couple % to page after', p_user_id, p_couple_id USING ERRCODE = 'RBNFD';
    END IF;
    RETURN v_joined;
END $$;

-- The couples p_user_id belongs to, in the order they joined them (then by couple id). A page follows couple
-- p_after at p_after_joined, when the user joined it as the page before read (a place that holds once they have
-- left it); without p_after_joined, at rbac.joined_at.
-- Dropped first: its parameters changed once, which CREATE OR REPLACE cannot do. privileges.sql grants it again.
DROP FUNCTION IF EXISTS public.user_couples(uuid, integer, uuid);
CREATE OR REPLACE FUNCTION public.user_couples(
    p_user_id uuid, p_limit integer DEFAULT 50, p_after uuid DEFAULT NULL, p_after_joined timestamptz DEFAULT NULL
) RETURNS TABLE (couple_id uuid, couple_name text, role text, status text, joined_at timestamptz,
                 expires_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_after_joined timestamptz;
BEGIN
    IF NOT rbac.is_operator() AND rbac.require_user() IS DISTINCT FROM p_user_id THEN
        RAISE EXCEPTION 'permission denied: users can list only their own couples' USING ERRCODE = 'RBDEN';
    END IF;
    PERFORM rbac.require_page_size(p_limit);
    v_after_joined := coalesce(p_after_joined,
                               CASE WHEN p_after IS NOT NULL THEN rbac.joined_at(p_after, p_user_id) END);
    RETURN QUERY
        SELECT m.couple_id, c.name, m.role, rbac.membership_status(m.status, m.expires_at), m.created_at,
               m.expires_at
        FROM memberships m JOIN couples c ON c.id = m.couple_id
        WHERE m.user_id = p_user_id AND (p_after IS NULL OR (m.created_at, m.couple_id) > (v_after_joined, p_after))
        ORDER BY m.created_at, m.couple_id
        LIMIT p_limit;
END $$;

-- The members of a couple, in the order they joined it (then by user id); needs collaborators.view. Paged as
-- user_couples is: after member p_after, at p_after_joined or else at rbac.joined_at.
DROP FUNCTION IF EXISTS public.couple_members(uuid, integer, uuid);
CREATE OR REPLACE FUNCTION public.couple_members(
    p_couple_id uuid, p_limit integer DEFAULT 50, p_after uuid DEFAULT NULL, p_after_joined timestamptz DEFAULT NULL
) RETURNS TABLE (user_id uuid, email text, display_name text, role text, status text, joined_at timestamptz,
                 expires_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_after_joined timestamptz;
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'collaborators.view');
    PERFORM rbac.require_page_size(p_limit);
    v_after_joined := coalesce(p_after_joined,
                               CASE WHEN p_after IS NOT NULL THEN rbac.joined_at(p_couple_id, p_after) END);
    RETURN QUERY
        SELECT m.user_id, u.email, u.display_name, m.role, rbac.membership_status(m.status, m.expires_at),
               m.created_at, m.expires_at
        FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE m.couple_id = p_couple_id AND (p_after IS NULL OR (m.created_at, m.user_id) > (v_after_joined, p_after))
        ORDER BY m.created_at, m.user_id
        LIMIT p_limit;
END $$;

-- What permission caches load, for many (couple, user) pairs in one statement: each member's role, which they
-- map through role_permission_sets themselves, once per policy revision (aggregating a role's permissions
-- again for every pair cost several times as much); for a role the couple defined, its permissions, which
-- change with the couple's revision, as one sorted space-separated text (couple_role_sets: one row to read, and
-- the key under which the server keeps one copy of each distinct set; NULL for a policy role, whose name no
-- couple's role takes, and for a couple's role that grants nothing, which the policy's map then finds nothing
-- for either); and when the membership expires, after which the set must not be used.
-- The n-th row answers the n-th pair; all rows come from one snapshot. revision is NULL for an unknown couple;
-- role is NULL unless the membership is in force; policy_revision is the same in every row.
DROP FUNCTION IF EXISTS public.user_roles(uuid[], uuid[]);
CREATE OR REPLACE FUNCTION public.user_roles(p_couple_ids uuid[], p_user_ids uuid[])
RETURNS TABLE (revision bigint, role text, policy_revision bigint, expires_at timestamptz,
               couple_role_permissions text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
-- One generic plan (index lookups per pair) for every length of the arrays. Left to choose, PostgreSQL plans
-- afresh on every call, since a plan for the arrays at hand always looks cheaper than one that has to guess
-- their length, and the planning costs more than the query.
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF cardinality(p_couple_ids) IS DISTINCT FROM cardinality(p_user_ids) THEN
        RAISE EXCEPTION 'user_roles needs one user per couple, not % couples and % users',
            cardinality(p_couple_ids), cardinality(p_user_ids) USING ERRCODE = 'RBINV';
    END IF;
    RETURN QUERY
    SELECT c.revision, m.role, (SELECT p.revision FROM policy_revision p), m.expires_at,
           (SELECT s.permissions FROM couple_role_sets s WHERE s.couple_id = m.couple_id AND s.role = m.role)
    FROM unnest(p_couple_ids, p_user_ids) WITH ORDINALITY AS pair(couple_id, user_id, n)
    LEFT JOIN couples c ON c.id = pair.couple_id
    LEFT JOIN memberships m ON m.couple_id = pair.couple_id AND m.user_id = pair.user_id
                           AND rbac.in_force(m.status, m.expires_at)
    ORDER BY pair.n;
END $$;

-- Every role with the permissions it grants (sorted), and the policy revision they were read at (the same in
-- every row).
CREATE OR REPLACE FUNCTION public.role_permission_sets()
RETURNS TABLE (policy_revision bigint, role text, permissions text[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT (SELECT p.revision FROM policy_revision p), r.name,
           coalesce((SELECT array_agg(rp.permission ORDER BY rp.permission)
                     FROM role_permissions rp WHERE rp.role = r.name), '{}')
    FROM roles r ORDER BY r.name
$$;

