-- The collaboration core: roles and permissions as data, memberships, invitations, the audit log, and the
-- helpers every function below uses. Rules that must hold under concurrency live here, in the same
-- transaction as the write, so they hold for every client.
--
-- Errors raised here use SQLSTATEs of class RB, each with a message for people:
--   RBAUT no acting user            RBDEN permission denied       RBESC role not grantable by the actor
--   RBNFD not found                 RBDUP already exists          RBINV invalid input
--   RBLST last active owner         RBEXP invitation expired      RBREV invitation revoked
--   RBUSD invitation already used   RBEML invitation bound to another email address
--   RBPOL invalid policy

CREATE SCHEMA rbac;
COMMENT ON SCHEMA rbac IS 'Private helpers of the collaboration functions; not part of the API.';

-- Roles: rbac_app is what the application (and Supabase-style clients) run as: no BYPASSRLS, SELECT on tenant
-- tables through row-level security, EXECUTE on the API functions. Members of rbac_operator act as the
-- operator (full rights) when no end-user JWT claims are set. Roles are cluster-wide, so several databases
-- in one cluster may race to create them.
DO $$
BEGIN
    BEGIN
        CREATE ROLE rbac_app NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE rbac_operator NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
END $$;

-- Every membership write advances its couple's revision (and locking that row serialises owner changes).
ALTER TABLE couples ADD COLUMN revision bigint NOT NULL DEFAULT 0;

CREATE TABLE permissions (
    name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z_]*\.[a-z][a-z_]*$'),
    description text NOT NULL
);

CREATE TABLE roles (
    name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z_]*$'),
    description text NOT NULL,
    -- Display order: lower is more powerful.
    rank integer NOT NULL
);

-- The effective permissions of each role (inheritance in the policy file is resolved when it is applied).
CREATE TABLE role_permissions (
    role text NOT NULL REFERENCES roles (name) ON DELETE CASCADE,
    permission text NOT NULL REFERENCES permissions (name) ON DELETE CASCADE,
    PRIMARY KEY (role, permission)
);

-- Which roles a holder of `role` may give to others (by grant or invitation).
CREATE TABLE role_grants (
    role text NOT NULL REFERENCES roles (name) ON DELETE CASCADE,
    grantable_role text NOT NULL REFERENCES roles (name) ON DELETE CASCADE,
    PRIMARY KEY (role, grantable_role)
);

CREATE TABLE memberships (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL REFERENCES roles (name),
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (couple_id, user_id)
);
CREATE INDEX memberships_user_id_idx ON memberships (user_id);

CREATE TABLE invitations (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    -- SHA-256 of the token; the token itself never reaches the database.
    token_hash bytea NOT NULL CHECK (length(token_hash) = 32),
    role text NOT NULL REFERENCES roles (name),
    -- When set, only the user with this address may accept.
    email text CHECK (email IS NULL OR (email ~ '^[^@\s]+@[^@\s]+$' AND length(email) <= 320)),
    invited_by uuid REFERENCES users (id) ON DELETE SET NULL,
    inviter_label text,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    accepted_at timestamptz,
    accepted_by uuid REFERENCES users (id) ON DELETE SET NULL,
    revoked_at timestamptz,
    PRIMARY KEY (couple_id, id),
    CHECK (accepted_at IS NULL OR revoked_at IS NULL)
);
CREATE UNIQUE INDEX invitations_token_hash_key ON invitations (token_hash);

CREATE TABLE audit_log (
    couple_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor_id uuid,
    actor_label text NOT NULL,
    action text NOT NULL,
    before jsonb,
    after jsonb,
    PRIMARY KEY (couple_id, id)
);

-- Helpers ---------------------------------------------------------------------------------------------------

-- The end user this request acts for: `sub` of the JWT claims PostgREST / Supabase put in
-- request.jwt.claims, or NULL when there are none or `sub` is not a UUID.
CREATE FUNCTION rbac.jwt_user_id() RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
DECLARE
    v_claims text := nullif(current_setting('request.jwt.claims', true), '');
    v_sub text;
BEGIN
    IF v_claims IS NULL THEN
        RETURN NULL;
    END IF;
    v_sub := v_claims::jsonb ->> 'sub';
    IF v_sub ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RETURN v_sub::uuid;
    END IF;
    RETURN NULL;
END $$;

-- The operator: no end-user claims, on a session whose login role is a member of rbac_operator (superusers
-- are). A session setting alone cannot make anyone an operator.
CREATE FUNCTION rbac.is_operator() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
    SELECT nullif(current_setting('request.jwt.claims', true), '') IS NULL
       AND pg_has_role(session_user, 'rbac_operator', 'MEMBER')
$$;

-- Who to record as the actor: the end user's id, else the operator's label (rbac.actor_label, which the CLI
-- sets to the OS user or --actor-label), else the session's login role.
CREATE FUNCTION rbac.actor_label() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
    SELECT coalesce(
        'user:' || rbac.jwt_user_id()::text,
        'operator:' || nullif(current_setting('rbac.actor_label', true), ''),
        'session:' || session_user)
$$;

-- The acting end user; raises RBAUT when there is none. Not for operators: check rbac.is_operator() first.
CREATE FUNCTION rbac.require_user() RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
DECLARE
    v_user uuid := rbac.jwt_user_id();
BEGIN
    IF v_user IS NULL THEN
        RAISE EXCEPTION 'no acting user: this call needs an end user (request.jwt.claims with a sub) or an rbac operator session'
            USING ERRCODE = 'RBAUT';
    END IF;
    RETURN v_user;
END $$;

CREATE FUNCTION rbac.has_permission(p_couple_id uuid, p_user_id uuid, p_permission text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, public AS $$
    SELECT EXISTS (
        SELECT 1 FROM public.memberships m
        JOIN public.role_permissions rp ON rp.role = m.role
        WHERE m.couple_id = p_couple_id AND m.user_id = p_user_id AND m.status = 'active'
          AND rp.permission = p_permission)
$$;

CREATE FUNCTION rbac.require_couple(p_couple_id uuid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public AS $$
BEGIN
    IF p_couple_id IS NULL OR NOT EXISTS (SELECT 1 FROM public.couples WHERE id = p_couple_id) THEN
        RAISE EXCEPTION 'couple % does not exist', coalesce(p_couple_id::text, '(null)') USING ERRCODE = 'RBNFD';
    END IF;
END $$;

-- The acting user, after checking they hold `p_permission` in the couple; NULL for the operator.
CREATE FUNCTION rbac.require_permission(p_couple_id uuid, p_permission text) RETURNS uuid
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public AS $$
DECLARE
    v_actor uuid;
BEGIN
    PERFORM rbac.require_couple(p_couple_id);
    IF rbac.is_operator() THEN
        RETURN NULL;
    END IF;
    v_actor := rbac.require_user();
    IF NOT rbac.has_permission(p_couple_id, v_actor, p_permission) THEN
        RAISE EXCEPTION 'permission denied: % needs % in couple %', v_actor, p_permission, p_couple_id
            USING ERRCODE = 'RBDEN', HINT = 'an owner can grant a role that includes it';
    END IF;
    RETURN v_actor;
END $$;

-- Raises RBINV naming the valid roles when p_role is not one.
CREATE FUNCTION rbac.require_role(p_role text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public AS $$
BEGIN
    IF p_role IS NULL OR NOT EXISTS (SELECT 1 FROM public.roles WHERE name = p_role) THEN
        RAISE EXCEPTION 'unknown role "%"; valid roles: %', coalesce(p_role, '(null)'),
            (SELECT string_agg(name, ', ' ORDER BY rank) FROM public.roles)
            USING ERRCODE = 'RBINV';
    END IF;
END $$;

-- Raises RBESC unless the actor (NULL = operator) may give p_role to someone in the couple.
CREATE FUNCTION rbac.require_grantable(p_couple_id uuid, p_actor uuid, p_role text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public AS $$
DECLARE
    v_actor_role text;
BEGIN
    IF p_actor IS NULL THEN
        RETURN;
    END IF;
    SELECT role INTO v_actor_role FROM public.memberships
    WHERE couple_id = p_couple_id AND user_id = p_actor AND status = 'active';
    IF NOT EXISTS (SELECT 1 FROM public.role_grants WHERE role = v_actor_role AND grantable_role = p_role) THEN
        RAISE EXCEPTION 'a % cannot give the % role', coalesce(v_actor_role, 'non-member'), p_role
            USING ERRCODE = 'RBESC',
                  HINT = coalesce('a ' || v_actor_role || ' may give: '
                      || (SELECT string_agg(grantable_role, ', ') FROM public.role_grants WHERE role = v_actor_role),
                      'only members can give roles');
    END IF;
END $$;

-- Triggers --------------------------------------------------------------------------------------------------

-- Before any membership change: lock the couple row and advance its revision (so concurrent owner changes
-- queue up, and REPEATABLE READ / SERIALIZABLE writers conflict instead of acting on a stale snapshot), then
-- refuse any change that leaves the couple without an active owner. Applies to every client and to raw SQL;
-- a couple being deleted (its row already gone) may lose all its members.
CREATE FUNCTION rbac.memberships_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_couple_id uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.couple_id ELSE NEW.couple_id END;
    v_couple_name text;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.couple_id <> OLD.couple_id THEN
        RAISE EXCEPTION 'a membership cannot move to another couple' USING ERRCODE = 'RBINV';
    END IF;
    UPDATE public.couples SET revision = revision + 1 WHERE id = v_couple_id RETURNING name INTO v_couple_name;
    IF NOT FOUND THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF TG_OP <> 'INSERT' AND OLD.role = 'owner' AND OLD.status = 'active'
       AND (TG_OP = 'DELETE' OR NEW.role <> 'owner' OR NEW.status <> 'active')
       AND NOT EXISTS (
           SELECT 1 FROM public.memberships
           WHERE couple_id = OLD.couple_id AND role = 'owner' AND status = 'active' AND user_id <> OLD.user_id)
    THEN
        RAISE EXCEPTION 'couple "%" must keep at least one owner', v_couple_name
            USING ERRCODE = 'RBLST',
                  HINT = 'make another member an owner first (transfer ownership), then try again';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

CREATE TRIGGER memberships_guard BEFORE INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.memberships_guard();

-- Writes one audit row per membership or invitation change, within the changed row's couple.
CREATE FUNCTION rbac.audit_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_before jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END;
    v_after jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END;
BEGIN
    -- Token hashes stay out of the log.
    v_before := v_before - 'token_hash';
    v_after := v_after - 'token_hash';
    IF v_before = v_after THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.audit_log (couple_id, actor_id, actor_label, action, before, after)
    VALUES (coalesce(v_after ->> 'couple_id', v_before ->> 'couple_id')::uuid, rbac.jwt_user_id(), rbac.actor_label(),
            TG_ARGV[0] || '.' || lower(TG_OP), v_before, v_after);
    RETURN NULL;
END $$;

CREATE TRIGGER memberships_audit AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('membership');
CREATE TRIGGER invitations_audit AFTER INSERT OR UPDATE OR DELETE ON invitations
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_change('invitation');

-- The audit log is append-only, for everyone (superusers included).
CREATE FUNCTION rbac.audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % is not allowed', TG_OP USING ERRCODE = 'RBDEN';
END $$;

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION rbac.audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION rbac.audit_log_append_only();
