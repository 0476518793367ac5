-- Roles a couple defines (sql/0008_couple_roles.sql): authoring them, and the rules that keep them from
-- granting more than their authors hold. A holder of roles.manage authors them; giving one takes roles.assign
-- and every permission it grants (rbac.require_grantable).

-- Every role a membership or invitation names exists, the policy's or the couple's: the foreign key the two
-- kinds of role rule out, with a foreign key's lock. A couple's role is held FOR KEY SHARE until the writer
-- commits, so a concurrent delete (FOR UPDATE) waits and then sees the new holder, or goes first and the
-- writer finds no role. Rows written before a role was deleted keep its name.
CREATE OR REPLACE FUNCTION rbac.role_exists_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM 1 FROM couple_roles WHERE couple_id = NEW.couple_id AND name = NEW.role FOR KEY SHARE;
    PERFORM rbac.require_role(NEW.couple_id, NEW.role);
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER memberships_role_exists BEFORE INSERT OR UPDATE OF role ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.role_exists_guard();
CREATE OR REPLACE TRIGGER invitations_role_exists BEFORE INSERT OR UPDATE OF role ON invitations
    FOR EACH ROW EXECUTE FUNCTION rbac.role_exists_guard();

-- A couple's role never takes the name of one of the policy's; a role still held (by a membership or a pending
-- invitation) is not deleted, unless its couple is being deleted. A couple defines at most 100 roles
-- (CoupleRole.mostPerCouple), so that one who may author them cannot grow the table, and every check's set of
-- the couple's roles, without end. They are counted under the couple's row lock (create_couple_role holds it
-- already), so that two new roles cannot both take the last place; the row is written too (its revision,
-- unchanged), so that a REPEATABLE READ or SERIALIZABLE writer whose snapshot misses the other's role fails to
-- serialize.
CREATE OR REPLACE FUNCTION rbac.couple_roles_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    c_most constant integer := 100;
    v_held bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM couples WHERE id = OLD.couple_id) THEN
            RETURN OLD;
        END IF;
        SELECT count(*) INTO v_held FROM (
            SELECT 1 FROM memberships WHERE couple_id = OLD.couple_id AND role = OLD.name
            UNION ALL
            SELECT 1 FROM invitations
            WHERE couple_id = OLD.couple_id AND role = OLD.name AND accepted_at IS NULL AND revoked_at IS NULL
              AND expires_at > now()) held;
        IF v_held > 0 THEN
            RAISE EXCEPTION 'the % role is held by % member(s) or pending invitation(s)', OLD.name, v_held
                USING ERRCODE = 'RBHLD', HINT = 'name a role to move them to (--reassign ROLE)';
        END IF;
        RETURN OLD;
    END IF;
    IF EXISTS (SELECT 1 FROM roles WHERE name = NEW.name) THEN
        RAISE EXCEPTION '"%" is a role of the policy; choose another name', NEW.name USING ERRCODE = 'RBDUP';
    END IF;
    IF TG_OP = 'INSERT' OR NEW.couple_id IS DISTINCT FROM OLD.couple_id THEN
        PERFORM 1 FROM couples WHERE id = NEW.couple_id FOR UPDATE;
        UPDATE couples SET revision = revision WHERE id = NEW.couple_id;
        IF (SELECT count(*) FROM couple_roles WHERE couple_id = NEW.couple_id) >= c_most THEN
            RAISE EXCEPTION 'couple % defines % roles, the most a couple may', NEW.couple_id, c_most
                USING ERRCODE = 'RBQTA', HINT = 'delete a role it no longer needs first';
        END IF;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER couple_roles_guard BEFORE INSERT OR UPDATE OR DELETE ON couple_roles
    FOR EACH ROW EXECUTE FUNCTION rbac.couple_roles_guard();

-- A change to what a couple's roles grant is a change to that couple: what its roles now grant is written to
-- couple_role_sets (sql/0026_couple_role_sets.sql), its revision advances and caches hear of it
-- (sql/functions/notifications.sql), so checks see it at once, on every instance, and other couples' cached
-- sets stay. Each role that changed is locked first (an advisory lock: its row may already be held by the
-- writer, FOR KEY SHARE, while another waits to lock it FOR UPDATE, and a second row lock would deadlock the
-- two), so that writers of one role's rows write its set one after the other, each from what the one before
-- committed; raw SQL takes no lock of its own. An update runs this twice: for the rows as they were, and are.
CREATE OR REPLACE FUNCTION rbac.couple_role_permissions_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_couple_id uuid;
    v_revision bigint;
BEGIN
    -- A migration before sql/0026 that writes these rows, run under these definitions, finds no such table:
    -- sql/0026 fills it from the rows.
    IF to_regclass('public.couple_role_sets') IS NOT NULL THEN
        PERFORM rbac.advisory_lock('couple role ' || r.couple_id || ' ' || r.role, false)
        FROM (SELECT DISTINCT couple_id, role FROM changed ORDER BY couple_id, role) r;
        DELETE FROM couple_role_sets s WHERE (s.couple_id, s.role) IN (SELECT couple_id, role FROM changed);
        INSERT INTO couple_role_sets (couple_id, role, permissions)
        SELECT crp.couple_id, crp.role, string_agg(crp.permission, ' ' ORDER BY crp.permission)
        FROM couple_role_permissions crp
        WHERE (crp.couple_id, crp.role) IN (SELECT couple_id, role FROM changed)
        GROUP BY crp.couple_id, crp.role;
    END IF;
    FOR v_couple_id IN SELECT DISTINCT couple_id FROM changed LOOP
        UPDATE couples SET revision = revision + 1 WHERE id = v_couple_id RETURNING revision INTO v_revision;
        IF FOUND THEN
            PERFORM rbac.notify_couple_change(v_couple_id, v_revision);
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER couple_role_permissions_insert AFTER INSERT ON couple_role_permissions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.couple_role_permissions_changed();
CREATE OR REPLACE TRIGGER couple_role_permissions_delete AFTER DELETE ON couple_role_permissions
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.couple_role_permissions_changed();
CREATE OR REPLACE TRIGGER couple_role_permissions_update_old AFTER UPDATE ON couple_role_permissions
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.couple_role_permissions_changed();
CREATE OR REPLACE TRIGGER couple_role_permissions_update_new AFTER UPDATE ON couple_role_permissions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION rbac.couple_role_permissions_changed();

-- The couple's role p_name, locked; RBNFD when the couple defined no such role.
CREATE OR REPLACE FUNCTION rbac.lock_couple_role(p_couple_id uuid, p_name text) RETURNS couple_roles
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_role couple_roles;
BEGIN
    SELECT * INTO v_role FROM couple_roles WHERE couple_id = p_couple_id AND name = p_name FOR UPDATE;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM roles WHERE name = p_name) THEN
        RAISE EXCEPTION '"%" is a role of the policy, not of couple %', p_name, p_couple_id
            USING ERRCODE = 'RBNFD', HINT = 'the policy''s roles change with rbac policy apply';
    ELSIF NOT FOUND THEN
        RAISE EXCEPTION 'couple % has no role of its own named "%"', p_couple_id, coalesce(p_name, '(null)')
            USING ERRCODE = 'RBNFD';
    END IF;
    RETURN v_role;
END $$;

-- p_permissions, sorted and without repeats, after checking each is in the registry and is one a couple's role
-- may grant: every one but couple.transfer, which goes with ownership (sql/0025_transfer_with_ownership.sql).
CREATE OR REPLACE FUNCTION rbac.known_permissions(p_permissions text[]) RETURNS text[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_unknown text := (SELECT p FROM unnest(p_permissions) p WHERE p IS NULL OR p NOT IN (SELECT name FROM permissions)
                       LIMIT 1);
BEGIN
    IF p_permissions IS NULL OR EXISTS (SELECT 1 FROM unnest(p_permissions) p WHERE p IS NULL) THEN
        RAISE EXCEPTION 'a role''s permissions are a list of permission names' USING ERRCODE = 'RBINV';
    END IF;
    IF v_unknown IS NOT NULL THEN
        RAISE EXCEPTION 'unknown permission "%"; valid permissions: %', v_unknown,
            (SELECT string_agg(name, ', ' ORDER BY name) FROM permissions) USING ERRCODE = 'RBINV';
    END IF;
    IF 'couple.transfer' = ANY (p_permissions) THEN
        RAISE EXCEPTION 'couple.transfer goes with ownership: a couple''s role cannot grant it' USING ERRCODE = 'RBINV',
            HINT = 'make the member an owner instead (the owner role), or hand the couple over to them';
    END IF;
    RETURN ARRAY(SELECT DISTINCT p FROM unnest(p_permissions) p ORDER BY p);
END $$;

CREATE OR REPLACE FUNCTION rbac.require_role_description(p_description text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_description IS NULL OR length(btrim(p_description)) NOT BETWEEN 1 AND 500
       OR rbac.has_control_character(p_description) THEN
        RAISE EXCEPTION 'a role''s description must be 1 to 500 characters, on one line' USING ERRCODE = 'RBINV';
    END IF;
    IF rbac.is_blank(p_description) THEN
        RAISE EXCEPTION 'a role''s description must show something, not only spaces and invisible characters '
            '(zero-width spaces, joiners, fillers, ...)' USING ERRCODE = 'RBINV';
    END IF;
    RETURN btrim(p_description);
END $$;

-- Every role members of the couple can hold: the policy's, then the couple's own, each with the permissions
-- it grants. Needs collaborators.view.
CREATE OR REPLACE FUNCTION public.couple_roles(p_couple_id uuid)
RETURNS TABLE (name text, description text, permissions text[], couple_defined boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'collaborators.view');
    RETURN QUERY
        SELECT r.name, r.description, r.permissions, r.couple_defined
        FROM (SELECT roles.name, roles.description, roles.rank,
                     ARRAY(SELECT rp.permission FROM role_permissions rp
                           WHERE rp.role = roles.name ORDER BY rp.permission) AS permissions,
                     false AS couple_defined
              FROM roles
              UNION ALL
              SELECT cr.name, cr.description, NULL, rbac.couple_role_permissions(p_couple_id, cr.name), true
              FROM couple_roles cr WHERE cr.couple_id = p_couple_id) r
        ORDER BY r.couple_defined, r.rank, r.name;
END $$;

-- One role as couple_roles lists it.
CREATE OR REPLACE FUNCTION rbac.couple_role_row(p_couple_id uuid, p_name text)
RETURNS TABLE (name text, description text, permissions text[], couple_defined boolean)
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT cr.name, cr.description, rbac.couple_role_permissions(p_couple_id, cr.name), true
    FROM couple_roles cr WHERE cr.couple_id = p_couple_id AND cr.name = p_name
$$;

-- A new role of the couple; needs roles.manage, and the author must hold every permission it grants.
CREATE OR REPLACE FUNCTION public.create_couple_role(
    p_couple_id uuid, p_name text, p_description text, p_permissions text[]
) RETURNS TABLE (name text, description text, permissions text[], couple_defined boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.require_permission(p_couple_id, 'roles.manage');
    v_description text := rbac.require_role_description(p_description);
    v_permissions text[] := rbac.known_permissions(p_permissions);
BEGIN
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z_]*$' OR length(p_name) > 63 THEN
        RAISE EXCEPTION '"%" is not a role name (lower-case letters and underscores; at most 63)',
            coalesce(p_name, '(null)') USING ERRCODE = 'RBINV';
    END IF;
    PERFORM rbac.require_holds_all(p_couple_id, v_actor, v_permissions, format('author the %s role', p_name));
    -- Serialises authoring in the couple, so two authors of one name get one role and one RBDUP; a couple
    -- deleted since the permission check has nothing to hold the role.
    PERFORM 1 FROM couples WHERE id = p_couple_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'couple % does not exist', p_couple_id USING ERRCODE = 'RBNFD';
    END IF;
    IF EXISTS (SELECT 1 FROM couple_roles cr WHERE cr.couple_id = p_couple_id AND cr.name = p_name) THEN
        RAISE EXCEPTION 'couple % already has a role named "%"', p_couple_id, p_name USING ERRCODE = 'RBDUP';
    END IF;
    INSERT INTO couple_roles (couple_id, name, description) VALUES (p_couple_id, p_name, v_description);
    INSERT INTO couple_role_permissions (couple_id, role, permission)
    SELECT p_couple_id, p_name, p FROM unnest(v_permissions) p;
    RETURN QUERY SELECT * FROM rbac.couple_role_row(p_couple_id, p_name);
END $$;

-- Changes a role of the couple: its description and (when p_permissions is not NULL) what it grants. Needs
-- roles.manage and every permission the role will grant; for a role someone holds, roles.assign as well, since
-- changing it gives its holders what it now grants.
CREATE OR REPLACE FUNCTION public.edit_couple_role(
    p_couple_id uuid, p_name text, p_description text DEFAULT NULL, p_permissions text[] DEFAULT NULL
) RETURNS TABLE (name text, description text, permissions text[], couple_defined boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.require_permission(p_couple_id, 'roles.manage');
    v_role couple_roles := rbac.lock_couple_role(p_couple_id, p_name);
    v_permissions text[];
BEGIN
    IF p_description IS NOT NULL THEN
        UPDATE couple_roles cr SET description = rbac.require_role_description(p_description)
        WHERE cr.couple_id = p_couple_id AND cr.name = p_name AND cr.description <> btrim(p_description);
    END IF;
    IF p_permissions IS NOT NULL THEN
        v_permissions := rbac.known_permissions(p_permissions);
        PERFORM rbac.require_holds_all(p_couple_id, v_actor, v_permissions, format('make %s grant that', p_name));
        IF v_actor IS NOT NULL
           AND EXISTS (SELECT 1 FROM memberships m WHERE m.couple_id = p_couple_id AND m.role = p_name)
           AND NOT rbac.holds_permission(p_couple_id, v_actor, 'roles.assign') THEN
            RAISE EXCEPTION 'the % role is held; changing what it grants needs roles.assign', p_name
                USING ERRCODE = 'RBESC';
        END IF;
        DELETE FROM couple_role_permissions crp
        WHERE crp.couple_id = p_couple_id AND crp.role = p_name AND crp.permission <> ALL (v_permissions);
        INSERT INTO couple_role_permissions (couple_id, role, permission)
        SELECT p_couple_id, p_name, p FROM unnest(v_permissions) p
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN QUERY SELECT * FROM rbac.couple_role_row(p_couple_id, p_name);
END $$;

-- Deletes a role of the couple. Held by members or pending invitations, it is refused (RBHLD) unless
-- p_reassign names the role they move to, in the same transaction; the actor must be allowed to give both.
CREATE OR REPLACE FUNCTION public.delete_couple_role(p_couple_id uuid, p_name text, p_reassign text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.require_permission(p_couple_id, 'roles.manage');
BEGIN
    -- What it moves, then both roles by name, in the order delete_couple takes them; before them, the couple's
    -- newcomers lock (rbac.lock_newcomers).
    IF p_reassign IS NOT NULL THEN
        PERFORM rbac.lock_newcomers(p_couple_id, false);
        PERFORM FROM invitations WHERE couple_id = p_couple_id AND role = p_name ORDER BY created_at, id FOR UPDATE;
        PERFORM FROM memberships WHERE couple_id = p_couple_id AND role = p_name ORDER BY user_id FOR UPDATE;
        PERFORM FROM couple_roles WHERE couple_id = p_couple_id AND name IN (p_name, p_reassign) ORDER BY name
            FOR UPDATE;
    END IF;
    PERFORM rbac.lock_couple_role(p_couple_id, p_name);
    IF p_reassign IS NOT NULL THEN
        PERFORM rbac.require_role(p_couple_id, p_reassign);
        IF p_reassign = p_name THEN
            RAISE EXCEPTION 'members of % cannot move to the role being deleted', p_name USING ERRCODE = 'RBINV',
                HINT = 'name another role to move them to';
        ELSIF p_reassign = 'owner' THEN
            RAISE EXCEPTION 'members of % cannot move to owner', p_name USING ERRCODE = 'RBINV',
                HINT = 'ownership moves with transfer_ownership';
        END IF;
        PERFORM rbac.require_grantable(p_couple_id, v_actor, p_name);
        PERFORM rbac.require_grantable(p_couple_id, v_actor, p_reassign);
        UPDATE memberships SET role = p_reassign WHERE couple_id = p_couple_id AND role = p_name;
        UPDATE invitations SET role = p_reassign
        WHERE couple_id = p_couple_id AND role = p_name AND accepted_at IS NULL AND revoked_at IS NULL
          AND expires_at > now();
    END IF;
    DELETE FROM couple_roles WHERE couple_id = p_couple_id AND name = p_name;
END $$;
