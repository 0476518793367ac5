-- Who may call and read what. No function of this product is open to PUBLIC (a new function gets EXECUTE for
-- PUBLIC by default, so this runs after every definition and migration); rbac_app, the application role, calls
-- the API functions, which check the acting user's permissions themselves, and the row-level security
-- predicates; operators (rbac_operator: the CLI's and `rbac serve`'s login when it is no superuser) call
-- everything, alone what permission caches read, and read and write every table but the logs, which only
-- the triggers write (policies/rls.sql lets them past row-level security).

-- End users create nothing in public or rbac. Functions find tables and other functions through a search path
-- that names public, and PostgreSQL takes the best match anywhere on the path: a role that may create there
-- could add, say, a to_jsonb(couples) that beats pg_catalog's polymorphic one, and it would run as whoever
-- calls it, the owner of the SECURITY DEFINER functions included. PostgreSQL 15 stopped letting PUBLIC create
-- in public; a database created before, or upgraded from an older release, still lets it.
REVOKE CREATE ON SCHEMA public, rbac FROM PUBLIC, rbac_app;
DO $$
DECLARE
    -- End users are rbac_app and the roles that belong to it (Supabase's authenticated, say); owners, operators
    -- and superusers are trusted with the functions anyway.
    v_end_users oid[] := ARRAY(SELECT r.oid FROM pg_roles r
                               WHERE pg_has_role(r.oid, 'rbac_app', 'MEMBER') AND NOT r.rolsuper
                                 AND NOT pg_has_role(r.oid, 'rbac_operator', 'MEMBER'));
    v_found text;
BEGIN
    -- One may still create there through a grant of its own, one to a role it belongs to, or one this REVOKE
    -- left (run by a role that owns neither schema, it takes nothing away and only warns).
    SELECT string_agg(DISTINCT u.role_id::regrole::text, ', ') INTO v_found
    FROM unnest(v_end_users) AS u(role_id), pg_namespace n
    WHERE n.nspname IN ('public', 'rbac') AND has_schema_privilege(u.role_id, n.oid, 'CREATE')
      AND NOT pg_has_role(u.role_id, n.nspowner, 'MEMBER');
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'end users may create objects in schema public or rbac as %, and a function made there '
                        'could run as the owner of rbac''s functions; revoke CREATE on both from them, from the '
                        'roles they belong to and from PUBLIC (as the schemas'' owner)', v_found
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- What one made there while it could is still there, waiting for a call it matches better.
    SELECT string_agg(format('%s %s (owned by %s)', o.type, o.identity, d.refobjid::regrole), ', '
                      ORDER BY o.identity) INTO v_found
    FROM pg_shdepend d, LATERAL pg_identify_object(d.classid, d.objid, d.objsubid) o
    WHERE d.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND d.deptype = 'o'
      AND d.refobjid = ANY (v_end_users) AND o.schema IN ('public', 'rbac');
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'end users made objects in schema public or rbac, which could run as the owner of rbac''s '
                        'functions: %; see what they do, and drop them', v_found
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

DO $$
DECLARE
    v_function regprocedure;
BEGIN
    FOR v_function IN
        SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname IN ('public', 'rbac')
          -- Functions of extensions (pgTAP, pgcrypto, ...) keep their own privileges.
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', v_function);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO rbac_operator', v_function);
    END LOOP;
END $$;

GRANT USAGE ON SCHEMA rbac TO rbac_operator;
DO $$
DECLARE
    v_relation regclass;
    v_kind "char";
BEGIN
    FOR v_relation, v_kind IN
        SELECT c.oid::regclass, c.relkind FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
    LOOP
        IF v_kind = 'S' THEN
            EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO rbac_operator', v_relation);
        ELSIF v_relation::text IN ('audit_log', 'operator_audit_log', 'schema_migrations', 'schema_definitions')
        THEN
            -- Append-only records: their triggers and functions write them as their owner.
            EXECUTE format('GRANT SELECT ON %s TO rbac_operator', v_relation);
        ELSE
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO rbac_operator', v_relation);
        END IF;
    END LOOP;
END $$;

GRANT EXECUTE ON FUNCTION
    public.user_has_permission(uuid, text),
    public.user_has_permission(uuid, uuid, text),
    public.user_permissions(uuid, uuid),
    public.user_role(uuid, uuid),
    public.can_leave_collaboration(uuid, uuid),
    public.user_couples(uuid, integer, uuid, timestamptz),
    public.couple_members(uuid, integer, uuid, timestamptz),
    public.create_couple(text, uuid),
    public.rename_couple(uuid, text),
    public.delete_couple(uuid),
    public.edit_user(uuid, text, text),
    public.delete_user(uuid),
    public.grant_role(uuid, uuid, text, timestamptz),
    public.suspend_member(uuid, uuid),
    public.reactivate_member(uuid, uuid),
    public.remove_member(uuid, uuid),
    public.leave_couple(uuid, uuid),
    public.transfer_ownership(uuid, uuid, text),
    public.create_invitation(uuid, bytea, text, text, interval, timestamptz),
    public.resend_invitation(uuid, uuid, bytea, interval),
    public.invitation_preview(bytea),
    public.accept_invitation(bytea, uuid),
    public.revoke_invitation(uuid, uuid),
    public.couple_invitations(uuid, text, integer, uuid, timestamptz),
    public.couple_invitation(uuid, uuid),
    public.couple_roles(uuid),
    public.create_couple_role(uuid, text, text, text[]),
    public.edit_couple_role(uuid, text, text, text[]),
    public.delete_couple_role(uuid, text, text),
    rbac.readable_couples(text),
    rbac.visible_users(),
    rbac.budget_tables(),
    rbac.jwt_user_id(),
    rbac.jwt_identity()
TO rbac_app;
