-- Applying the access policy (policies/policy.json).

-- Replaces roles, permissions, role_permissions and role_grants with the policy `p_policy`:
--   {"permissions": {"budget.view": "See the budget", ...},
--    "roles": {"owner": {"rank": 1, "description": "...", "inherits": ["partner"],
--                        "permissions": ["couple.delete", ...], "grants": ["owner", "partner", ...]}, ...}}
-- A role's permissions are its own plus those of every role it inherits, transitively. Idempotent, and it
-- writes only what differs, so applying an unchanged policy changes nothing and notifies no cache. Raises
-- RBPOL naming every key it does not take, unknown permission or role, an inheritance cycle, or a role but owner
-- holding couple.transfer; RBHLD for a sound policy that removes a role still held or names a role as a couple
-- did. It reads memberships and invitations only for roles it removes, so its cost does not grow with the
-- couples.
CREATE OR REPLACE FUNCTION public.apply_policy(p_policy jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_problems text[];
    v_conflicts text[];
    v_removed text[];
BEGIN
    IF NOT rbac.is_operator() THEN
        RAISE EXCEPTION 'permission denied: only an rbac operator can change the policy' USING ERRCODE = 'RBDEN';
    END IF;
    IF jsonb_typeof(p_policy -> 'permissions') IS DISTINCT FROM 'object'
       OR jsonb_typeof(p_policy -> 'roles') IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a policy is an object with "permissions" and "roles" objects' USING ERRCODE = 'RBPOL';
    END IF;

    CREATE TEMPORARY TABLE policy_permissions ON COMMIT DROP AS
        SELECT key AS name, CASE jsonb_typeof(value) WHEN 'string' THEN value #>> '{}' END AS description
        FROM jsonb_each(p_policy -> 'permissions');
    CREATE TEMPORARY TABLE policy_roles ON COMMIT DROP AS
        SELECT key AS name, value AS definition FROM jsonb_each(p_policy -> 'roles');
    CREATE TEMPORARY TABLE policy_references ON COMMIT DROP AS
        SELECT r.name AS role, kind, reference
        FROM policy_roles r,
             LATERAL (SELECT 'permissions' AS kind, jsonb_array_elements_text(
                          CASE jsonb_typeof(r.definition -> 'permissions') WHEN 'array' THEN r.definition -> 'permissions' ELSE '[]' END)
                      UNION ALL
                      SELECT 'inherits', jsonb_array_elements_text(
                          CASE jsonb_typeof(r.definition -> 'inherits') WHEN 'array' THEN r.definition -> 'inherits' ELSE '[]' END)
                      UNION ALL
                      SELECT 'grants', jsonb_array_elements_text(
                          CASE jsonb_typeof(r.definition -> 'grants') WHEN 'array' THEN r.definition -> 'grants' ELSE '[]' END)
                     ) AS refs (kind, reference);

    SELECT array_agg(problem ORDER BY problem) INTO v_problems FROM (
        -- A key read by nothing is a mistake to name, not to skip: "inherit" for "inherits" would leave a role
        -- without its ancestors' permissions.
        SELECT format('the policy names "%s", which it does not take; it takes permissions, roles', key) AS problem
        FROM jsonb_object_keys(p_policy) AS key WHERE key NOT IN ('permissions', 'roles')
        UNION ALL
        SELECT format('role "%s" names "%s", which a role does not take; it takes description, grants, inherits, '
                      'permissions, rank', r.name, key)
        FROM policy_roles r,
             jsonb_object_keys(CASE jsonb_typeof(r.definition) WHEN 'object' THEN r.definition ELSE '{}' END) AS key
        WHERE key NOT IN ('description', 'grants', 'inherits', 'permissions', 'rank')
        UNION ALL
        SELECT format('permission "%s" is not named area.action in lower case', name)
        FROM policy_permissions WHERE name !~ '^[a-z][a-z_]*\.[a-z][a-z_]*$'
        UNION ALL
        SELECT format('permission "%s" needs a description', name) FROM policy_permissions WHERE description IS NULL
        UNION ALL
        SELECT format('role "%s" is not named in lower-case letters and underscores', name)
        FROM policy_roles WHERE name !~ '^[a-z][a-z_]*$'
        UNION ALL
        SELECT format('role "%s" needs a "description" string and an integer "rank" from -2147483648 to 2147483647',
                      name) FROM policy_roles
        WHERE jsonb_typeof(definition -> 'description') IS DISTINCT FROM 'string'
           -- 4.0 is taken, as JSON readers take it for 4; 4.5 and 3e9 are not. CASE reads the number only once
           -- it is one.
           OR CASE jsonb_typeof(definition -> 'rank')
                  WHEN 'number' THEN (definition ->> 'rank')::numeric NOT BETWEEN -2147483648 AND 2147483647
                                  OR (definition ->> 'rank')::numeric <> trunc((definition ->> 'rank')::numeric)
                  ELSE true
              END
        UNION ALL
        SELECT format('role "%s" lists unknown permission "%s"', role, reference) FROM policy_references
        WHERE kind = 'permissions' AND reference NOT IN (SELECT name FROM policy_permissions)
        UNION ALL
        SELECT format('role "%s" %s unknown role "%s"', role, CASE kind WHEN 'inherits' THEN 'inherits' ELSE 'grants' END,
                      reference)
        FROM policy_references WHERE kind IN ('inherits', 'grants') AND reference NOT IN (SELECT name FROM policy_roles)
        UNION ALL
        SELECT 'the policy must define the "owner" role' WHERE NOT EXISTS (SELECT 1 FROM policy_roles WHERE name = 'owner')
    ) AS problems;
    -- What the couples hold refuses a policy that is sound in itself, with another code (RBHLD): the document
    -- is not wrong, the roles it would take from them or the names they took are in the way.
    SELECT array_agg(format('role "%s" is the name of a role %s couple(s) defined', name, count) ORDER BY name)
    INTO v_conflicts
    FROM (SELECT name, count(*) FROM couple_roles
          WHERE name IN (SELECT name FROM policy_roles) AND name NOT IN (SELECT name FROM roles)
          GROUP BY name) AS clashes;
    SELECT array_agg(name) INTO v_removed FROM roles WHERE name NOT IN (SELECT name FROM policy_roles);
    -- Not even planned otherwise: a query naming memberships waits for any lock on it.
    IF v_removed IS NOT NULL THEN
        SELECT v_conflicts || array_agg(format('role "%s" is held by %s membership(s) or invitation(s) but is not '
                                               'in the policy', role, count) ORDER BY role)
        INTO v_conflicts
        FROM (SELECT role, count(*)
              FROM (SELECT role FROM memberships WHERE role = ANY (v_removed)
                    UNION ALL SELECT role FROM invitations WHERE role = ANY (v_removed)) AS held
              GROUP BY role) AS held_roles;
    END IF;
    IF v_problems IS NOT NULL THEN
        RAISE EXCEPTION 'invalid policy: %', array_to_string(v_problems || v_conflicts, '; ') USING ERRCODE = 'RBPOL';
    END IF;
    IF v_conflicts IS NOT NULL THEN
        RAISE EXCEPTION 'policy not applied: %', array_to_string(v_conflicts, '; ') USING ERRCODE = 'RBHLD';
    END IF;

    -- Effective permissions: each role's own plus its ancestors', following "inherits" transitively.
    CREATE TEMPORARY TABLE policy_effective ON COMMIT DROP AS
        WITH RECURSIVE reach (role, ancestor, path) AS (
            SELECT name, name, ARRAY[name] FROM policy_roles
            UNION ALL
            SELECT reach.role, ref.reference, reach.path || ref.reference
            FROM reach JOIN policy_references ref ON ref.role = reach.ancestor AND ref.kind = 'inherits'
            WHERE NOT ref.reference = ANY (reach.path)
        )
        SELECT role, ancestor FROM reach;
    -- A role is on a cycle when something it inherits from inherits from it.
    SELECT array_agg(DISTINCT e.role ORDER BY e.role) INTO v_problems
    FROM policy_effective e JOIN policy_references ref ON ref.role = e.ancestor AND ref.kind = 'inherits'
    WHERE ref.reference = e.role;
    IF v_problems IS NOT NULL THEN
        RAISE EXCEPTION 'invalid policy: roles inherit from themselves: %', array_to_string(v_problems, ', ')
            USING ERRCODE = 'RBPOL';
    END IF;
    -- couple.transfer goes with ownership: transfer_ownership hands over only what the acting user owns, so
    -- another role holding it would answer "allowed" to a hand-over its holders are refused.
    SELECT array_agg(DISTINCT e.role ORDER BY e.role) INTO v_problems
    FROM policy_effective e JOIN policy_references ref ON ref.role = e.ancestor AND ref.kind = 'permissions'
    WHERE ref.reference = 'couple.transfer' AND e.role <> 'owner';
    IF v_problems IS NOT NULL THEN
        RAISE EXCEPTION 'invalid policy: couple.transfer goes with ownership, and only "owner" may hold it, not: %',
            array_to_string(v_problems, ', ') USING ERRCODE = 'RBPOL';
    END IF;

    INSERT INTO permissions (name, description) SELECT name, description FROM policy_permissions
    ON CONFLICT (name) DO UPDATE SET description = excluded.description
    WHERE permissions.description IS DISTINCT FROM excluded.description;
    INSERT INTO roles (name, description, rank)
    SELECT name, definition ->> 'description', (definition ->> 'rank')::numeric::integer FROM policy_roles
    ON CONFLICT (name) DO UPDATE SET description = excluded.description, rank = excluded.rank
    WHERE (roles.description, roles.rank) IS DISTINCT FROM (excluded.description, excluded.rank);

    DELETE FROM role_permissions rp WHERE NOT EXISTS (
        SELECT 1 FROM policy_effective e JOIN policy_references ref ON ref.role = e.ancestor AND ref.kind = 'permissions'
        WHERE e.role = rp.role AND ref.reference = rp.permission);
    INSERT INTO role_permissions (role, permission)
    SELECT DISTINCT e.role, ref.reference
    FROM policy_effective e JOIN policy_references ref ON ref.role = e.ancestor AND ref.kind = 'permissions'
    ON CONFLICT DO NOTHING;

    DELETE FROM role_grants g WHERE NOT EXISTS (
        SELECT 1 FROM policy_references ref
        WHERE ref.kind = 'grants' AND ref.role = g.role AND ref.reference = g.grantable_role);
    INSERT INTO role_grants (role, grantable_role)
    SELECT role, reference FROM policy_references WHERE kind = 'grants'
    ON CONFLICT DO NOTHING;

    DELETE FROM roles WHERE name NOT IN (SELECT name FROM policy_roles);
    DELETE FROM permissions WHERE name NOT IN (SELECT name FROM policy_permissions);

    DROP TABLE policy_permissions, policy_roles, policy_references, policy_effective;
END $$;
