-- Who is acting, and the checks every API function makes before it acts. Rules that must hold under
-- concurrency live in the functions and triggers, in the same transaction as the write, so they hold for
-- every client.
--
-- Errors raised by the functions use SQLSTATEs of class RB, each with a message for people:
--   RBAUT no acting user            RBDEN permission denied       RBESC role not grantable by the actor
--   RBNFD not found                 RBDUP already exists          RBINV invalid input
--   RBLST last active owner         RBEXP invitation expired      RBREV invitation revoked
--   RBUSD invitation already used   RBEML invitation bound to another email address
--   RBPOL invalid policy            RBQTA a budget row, role or couple limit reached
--   RBRAT too many invitations in an hour
--   RBHLD a role still held (by members or invitations), or a policy role named as a couple's own

-- An instant as refusals show it to people (2026-12-11 03:30:45 UTC), whatever the session's time zone; programs
-- get rbac.event_time's form (in a DETAIL, say).
CREATE OR REPLACE FUNCTION rbac.shown_time(p_at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"')
$$;

-- Whether a membership grants anything now: active, and not past its expiry. The one definition of "in force";
-- a SQL function of one expression, so the planner inlines it into every query that calls it.
CREATE OR REPLACE FUNCTION rbac.in_force(p_status text, p_expires_at timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_status = 'active' AND (p_expires_at IS NULL OR p_expires_at > now())
$$;

-- Whether text a person gave holds what names and descriptions must not: Unicode's control characters (Cc,
-- spelled out so that the rule does not depend on the database's locale) or a bidirectional embedding,
-- override or isolate, which turns the text after it around. Swift's `refuseControlCharacters` is the same rule.
CREATE OR REPLACE FUNCTION rbac.has_control_character(p_text text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT p_text ~ '[\u0001-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]'
$$;

-- The characters drawn as nothing, as a bracket expression for `~`: Unicode's Default_Ignorable_Code_Point (zero-width
-- spaces and joiners, direction marks, the soft hyphen, Hangul fillers, variation selectors, ...). Spelled out
-- as has_control_character is; Swift's `containsInvisibleCharacter` is the same rule.
CREATE OR REPLACE FUNCTION rbac.invisible_characters() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164'
           '\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]'
$$;

-- Whether text a person gave shows nothing: only white space (Unicode's White_Space), characters drawn as nothing
-- (rbac.invisible_characters) and the blank Braille pattern, which passes for a space. A name of such text would
-- look like none. Swift's `isBlank` is the same rule.
CREATE OR REPLACE FUNCTION rbac.is_blank(p_text text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT p_text ~ ('^([\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u2800\u3000]|'
                     || rbac.invisible_characters() || ')*$')
$$;

-- The identity a request's claims name: request.jwt.claims as PostgREST / Supabase (or rbac serve) put them,
-- `iss` ('' when absent) and `sub`. No row when there are no claims or no such identity.
CREATE OR REPLACE FUNCTION rbac.jwt_identity() RETURNS public.user_identities
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_claims jsonb := nullif(current_setting('request.jwt.claims', true), '')::jsonb;
    v_identity public.user_identities;
BEGIN
    IF v_claims IS NULL OR v_claims ->> 'sub' IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_identity FROM public.user_identities
    WHERE issuer = coalesce(v_claims ->> 'iss', '') AND subject = v_claims ->> 'sub';
    RETURN v_identity;
END $$;

-- The end user this request acts for: for claims without `iss` whose `sub` is a UUID, the user with that id
-- (development tokens, and how rbac's services name a user); else the user of the claims' identity. NULL when
-- there are no claims or they name no one.
CREATE OR REPLACE FUNCTION rbac.jwt_user_id() RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_claims jsonb := nullif(current_setting('request.jwt.claims', true), '')::jsonb;
    v_sub text := v_claims ->> 'sub';
BEGIN
    -- Decided without reading a table where it can be: on Citus this also runs on the workers (a budget
    -- row's audit trigger), which have no identities.
    IF v_sub IS NULL THEN
        RETURN NULL;
    ELSIF v_claims ->> 'iss' IS NULL
          AND v_sub ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RETURN v_sub::uuid;
    END IF;
    RETURN (rbac.jwt_identity()).user_id;
END $$;

-- The operator: no end-user claims, on a session whose login role is a member of rbac_operator (superusers
-- are). A session setting alone cannot make anyone an operator.
CREATE OR REPLACE FUNCTION rbac.is_operator() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT nullif(current_setting('request.jwt.claims', true), '') IS NULL
       AND pg_has_role(session_user, 'rbac_operator', 'MEMBER')
$$;

-- Who to record as the actor: the end user's id, else the operator's label (rbac.actor_label, which the CLI
-- sets to the OS user or --actor-label), else the session's login role.
CREATE OR REPLACE FUNCTION rbac.actor_label() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(
        'user:' || rbac.jwt_user_id()::text,
        'operator:' || nullif(current_setting('rbac.actor_label', true), ''),
        'session:' || session_user)
$$;

-- The acting end user; raises RBAUT when there is none. Not for operators: check rbac.is_operator() first.
CREATE OR REPLACE FUNCTION rbac.require_user() RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_user uuid := rbac.jwt_user_id();
BEGIN
    IF v_user IS NULL THEN
        RAISE EXCEPTION 'no acting user: this call needs an end user (request.jwt.claims with a sub) or an rbac operator session'
            USING ERRCODE = 'RBAUT';
    END IF;
    RETURN v_user;
END $$;

CREATE OR REPLACE FUNCTION rbac.require_couple(p_couple_id uuid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF p_couple_id IS NULL OR NOT EXISTS (SELECT 1 FROM public.couples WHERE id = p_couple_id) THEN
        RAISE EXCEPTION 'couple % does not exist', coalesce(p_couple_id::text, '(null)') USING ERRCODE = 'RBNFD';
    END IF;
END $$;

-- The transaction's advisory lock named p_name, shared or alone, for what no row stands for: a set that must not
-- grow, one person's joining, a role's permission set being written. The key is the name's
-- 64-bit hash: names come per couple and per person, millions of them, and two that shared a 32-bit key would
-- wait for each other, or deadlock where each is taken in an order of its own.
CREATE OR REPLACE FUNCTION rbac.advisory_lock(p_name text, p_shared boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_shared THEN
        PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_name, 0));
    ELSE
        PERFORM pg_advisory_xact_lock(hashtextextended(p_name, 0));
    END IF;
END $$;

-- Holds couple p_couple_id's row against its deletion to the end of the transaction; RBNFD when there is none.
-- A budget write takes it first (PostgresBudgetRepository): on Citus no foreign key ties the budget to the
-- couple, and a row written while the couple was deleted would outlive it.
CREATE OR REPLACE FUNCTION rbac.hold_couple(p_couple_id uuid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM FROM public.couples WHERE id = p_couple_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'couple % does not exist', coalesce(p_couple_id::text, '(null)') USING ERRCODE = 'RBNFD';
    END IF;
END $$;

-- A listing's page holds 1 to 1000 rows (as the Swift repositories' requirePageSize says).
CREATE OR REPLACE FUNCTION rbac.require_page_size(p_limit integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'page size must be between 1 and 1000, not %', p_limit USING ERRCODE = 'RBINV';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION rbac.require_user_exists(p_user_id uuid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF p_user_id IS NULL OR NOT EXISTS (SELECT 1 FROM users WHERE id = p_user_id) THEN
        RAISE EXCEPTION 'user % does not exist', coalesce(p_user_id::text, '(null)') USING ERRCODE = 'RBNFD';
    END IF;
END $$;

-- Who acts in an existing couple: the end user (RBAUT when there is none), or NULL for the operator.
CREATE OR REPLACE FUNCTION rbac.couple_actor(p_couple_id uuid) RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.require_couple(p_couple_id);
    IF rbac.is_operator() THEN
        RETURN NULL;
    END IF;
    RETURN rbac.require_user();
END $$;

-- The acting user, after checking they hold `p_permission` in the couple; NULL for the operator.
CREATE OR REPLACE FUNCTION rbac.require_permission(p_couple_id uuid, p_permission text) RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.couple_actor(p_couple_id);
BEGIN
    IF v_actor IS NOT NULL AND NOT rbac.holds_permission(p_couple_id, v_actor, p_permission) THEN
        -- Not whom it refuses: the caller knows whom it acted for, and may know them by email, not by id.
        RAISE EXCEPTION 'permission denied: this needs % in couple %', p_permission, p_couple_id
            USING ERRCODE = 'RBDEN', HINT = 'an owner can grant a role that includes it';
    END IF;
    RETURN v_actor;
END $$;

-- Whom a call that acts for one user acts for: the user the operator names (RBINV p_unnamed when none), or the
-- acting end user, who may name only themself (RBDEN p_denied otherwise).
CREATE OR REPLACE FUNCTION rbac.subject_user(p_user_id uuid, p_unnamed text, p_denied text) RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_user uuid;
BEGIN
    IF rbac.is_operator() THEN
        IF p_user_id IS NULL THEN
            RAISE EXCEPTION '%', p_unnamed USING ERRCODE = 'RBINV';
        END IF;
        RETURN p_user_id;
    END IF;
    v_user := rbac.require_user();
    IF p_user_id IS NOT NULL AND p_user_id <> v_user THEN
        RAISE EXCEPTION 'permission denied: %', p_denied USING ERRCODE = 'RBDEN';
    END IF;
    RETURN v_user;
END $$;

-- Raises RBDEN unless the caller may look at p_user_id's standing in the couple: the operator, the user
-- themself, or a member of the couple whose membership is in force.
CREATE OR REPLACE FUNCTION rbac.require_member_view(p_couple_id uuid, p_user_id uuid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.couple_actor(p_couple_id);
BEGIN
    IF v_actor IS NOT NULL AND v_actor IS DISTINCT FROM p_user_id AND NOT EXISTS (
        SELECT 1 FROM memberships m
        WHERE m.couple_id = p_couple_id AND m.user_id = v_actor AND rbac.in_force(m.status, m.expires_at))
    THEN
        RAISE EXCEPTION 'permission denied: only members of couple % can see its members', p_couple_id
            USING ERRCODE = 'RBDEN';
    END IF;
END $$;

DROP FUNCTION IF EXISTS rbac.require_role(text);
-- Raises RBINV naming the valid roles when p_role is neither a role of the policy nor one couple p_couple_id
-- defined.
CREATE OR REPLACE FUNCTION rbac.require_role(p_couple_id uuid, p_role text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF p_role IS NULL OR NOT (EXISTS (SELECT 1 FROM public.roles WHERE name = p_role)
                              OR EXISTS (SELECT 1 FROM public.couple_roles
                                         WHERE couple_id = p_couple_id AND name = p_role)) THEN
        RAISE EXCEPTION 'unknown role "%"; valid roles: %', coalesce(p_role, '(null)'),
            (SELECT string_agg(name, ', ' ORDER BY global DESC, rank, name) FROM (
                SELECT name, rank, true AS global FROM public.roles
                UNION ALL
                SELECT name, NULL, false FROM public.couple_roles WHERE couple_id = p_couple_id) r)
            USING ERRCODE = 'RBINV';
    END IF;
END $$;

-- The permissions p_user_id holds in the couple now (empty unless their membership is in force), whatever kind
-- of role they come from.
CREATE OR REPLACE FUNCTION rbac.held_permissions(p_couple_id uuid, p_user_id uuid) RETURNS text[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RETURN coalesce((
        SELECT array_agg(p.permission ORDER BY p.permission)
        FROM memberships m
        JOIN LATERAL (SELECT rp.permission FROM role_permissions rp WHERE rp.role = m.role
                      UNION ALL
                      SELECT crp.permission FROM couple_role_permissions crp
                      WHERE crp.couple_id = m.couple_id AND crp.role = m.role) p ON true
        WHERE m.couple_id = p_couple_id AND m.user_id = p_user_id AND rbac.in_force(m.status, m.expires_at)), '{}');
END $$;

-- The permissions role p_role of couple p_couple_id grants; NULL when it is not one the couple defined.
CREATE OR REPLACE FUNCTION rbac.couple_role_permissions(p_couple_id uuid, p_role text) RETURNS text[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM couple_roles WHERE couple_id = p_couple_id AND name = p_role) THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(SELECT permission FROM couple_role_permissions
                 WHERE couple_id = p_couple_id AND role = p_role ORDER BY permission);
END $$;

-- Raises RBESC unless the actor holds every permission in p_permissions (what a role they give, author or
-- edit would grant): no one hands out more than they hold.
CREATE OR REPLACE FUNCTION rbac.require_holds_all(p_couple_id uuid, p_actor uuid, p_permissions text[], p_what text)
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_missing text[] := ARRAY(SELECT unnest(p_permissions)
                              EXCEPT SELECT unnest(rbac.held_permissions(p_couple_id, p_actor)) ORDER BY 1);
BEGIN
    IF p_actor IS NOT NULL AND v_missing <> '{}' THEN
        RAISE EXCEPTION 'you cannot % without holding %', p_what, array_to_string(v_missing, ', ')
            USING ERRCODE = 'RBESC', HINT = 'a role can grant only permissions its author and whoever gives it hold';
    END IF;
END $$;

-- Raises RBESC unless the actor (NULL = operator) may give p_role to someone in the couple: for a role of the
-- policy, one the actor's role may give (role_grants); for a role the couple defined, roles.assign and every
-- permission of the role, read under a FOR KEY SHARE lock held to the end of the transaction: an edit of the
-- role (FOR UPDATE) waits for this grant and then sees the role held, so what was checked is what is given.
CREATE OR REPLACE FUNCTION rbac.require_grantable(p_couple_id uuid, p_actor uuid, p_role text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor_role text;
    v_permissions text[];
BEGIN
    IF p_actor IS NULL THEN
        RETURN;
    END IF;
    PERFORM 1 FROM public.couple_roles WHERE couple_id = p_couple_id AND name = p_role FOR KEY SHARE;
    v_permissions := rbac.couple_role_permissions(p_couple_id, p_role);
    IF v_permissions IS NOT NULL THEN
        IF NOT rbac.holds_permission(p_couple_id, p_actor, 'roles.assign') THEN
            RAISE EXCEPTION 'giving the couple''s own role % needs roles.assign', p_role USING ERRCODE = 'RBESC';
        END IF;
        PERFORM rbac.require_holds_all(p_couple_id, p_actor, v_permissions, format('give the %s role', p_role));
        RETURN;
    END IF;
    SELECT m.role INTO v_actor_role FROM public.memberships m
    WHERE m.couple_id = p_couple_id AND m.user_id = p_actor AND rbac.in_force(m.status, m.expires_at);
    IF NOT EXISTS (SELECT 1 FROM public.role_grants WHERE role = v_actor_role AND grantable_role = p_role) THEN
        RAISE EXCEPTION '% cannot give the % role',
            coalesce('a member with the ' || v_actor_role || ' role', 'a non-member'), p_role
            USING ERRCODE = 'RBESC',
                  HINT = CASE WHEN v_actor_role IS NULL THEN 'only members can give roles'
                      ELSE coalesce('the ' || v_actor_role || ' role may give: ' || (
                          SELECT string_agg(grantable_role, ', ' ORDER BY grantable_role) FROM public.role_grants
                          WHERE role = v_actor_role), 'the ' || v_actor_role || ' role may give none') END;
    END IF;
END $$;

-- An expiry a caller asked for: NULL (never), or an instant in the future, and never for an owner.
CREATE OR REPLACE FUNCTION rbac.require_expiry(p_role text, p_expires_at timestamptz) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_expires_at IS NULL THEN
        RETURN;
    END IF;
    IF p_role = 'owner' THEN
        RAISE EXCEPTION 'an owner''s membership cannot expire; give another role an expiry, or none'
            USING ERRCODE = 'RBINV';
    END IF;
    IF p_expires_at <= now() THEN
        RAISE EXCEPTION 'the expiry % is not in the future', rbac.shown_time(p_expires_at) USING ERRCODE = 'RBINV';
    END IF;
END $$;

-- Row-level security (policies/rls.sql): what the acting user may read, as arrays. A policy reads each once per
-- statement, `couple_id = ANY ((SELECT rbac.readable_couples())::uuid[])`: the planner makes the scalar sub-select
-- an InitPlan and the comparison an index condition. A predicate called per row would run a membership query
-- for every row scanned, which costs many times the read itself (scripts/bench-rls).

-- The couples where the acting user's membership is in force and, given p_permission, grants it.
CREATE OR REPLACE FUNCTION rbac.readable_couples(p_permission text DEFAULT NULL) RETURNS uuid[]
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_me uuid := rbac.jwt_user_id();
BEGIN
    RETURN ARRAY(SELECT m.couple_id FROM memberships m
                 WHERE m.user_id = v_me AND rbac.in_force(m.status, m.expires_at)
                   AND (p_permission IS NULL OR rbac.holds_permission(m.couple_id, v_me, p_permission)));
END $$;

-- The acting user and the people in the couples where their membership is in force.
CREATE OR REPLACE FUNCTION rbac.visible_users() RETURNS uuid[]
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_me uuid := rbac.jwt_user_id();
    v_couples uuid[] := rbac.readable_couples();
BEGIN
    IF v_me IS NULL THEN
        RETURN '{}';
    END IF;
    RETURN v_me || ARRAY(SELECT DISTINCT m.user_id FROM memberships m
                         WHERE m.couple_id = ANY (v_couples) AND m.user_id <> v_me);
END $$;

-- The operator's settings (invitation_settings, couple_settings) are one row each, which UPDATE changes: without
-- it, the limit it holds would hold no one (a NULL limit refuses nothing), and `rbac ... limit` would have
-- nothing to show. So the row is not deleted or truncated, by anyone. Nor is delivery_key_check's, once the first
-- key to seal wrote it: without it, the next key to seal or send would become the database's, a wrong one
-- included, and its workers would send every message to its death.
CREATE OR REPLACE FUNCTION rbac.keep_setting() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The trigger's argument says what to do instead.
    RAISE EXCEPTION 'the one row of % stays: %', TG_TABLE_NAME, TG_ARGV[0] USING ERRCODE = 'RBDEN';
END $$;

DO $$
DECLARE
    v_table text;
    v_instead text;
BEGIN
    FOR v_table, v_instead IN
        VALUES ('invitation_settings', 'change its values with UPDATE'),
               ('couple_settings', 'change its values with UPDATE'),
               ('delivery_key_check', 'rbac delivery-key rotate changes the database''s key, and reset replaces '
                                      'one that is lost')
    LOOP
        -- A table a later migration makes: the run that applies it applies this file again.
        CONTINUE WHEN to_regclass(format('public.%I', v_table)) IS NULL;
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_kept BEFORE DELETE ON %1$I '
                       'FOR EACH ROW EXECUTE FUNCTION rbac.keep_setting(%2$L)', v_table, v_instead);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_not_truncated BEFORE TRUNCATE ON %1$I '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.keep_setting(%2$L)', v_table, v_instead);
    END LOOP;
END $$;
