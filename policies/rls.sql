-- Row-level security for every tenant table, re-applied by `rbac migrate` whenever it changed (so it is
-- idempotent).
-- rbac_app, the application role, has no BYPASSRLS: a connection acting for user U (request.jwt.claims
-- `sub`) sees only rows of couples where U's membership is in force (active, not expired). Other roles
-- without a policy see nothing.
-- Each policy compares the row's couple (or user) with an array of what the acting user may read, which a
-- function of sql/functions/access.sql builds once per statement: the scalar sub-select around it makes it an
-- InitPlan (and the comparison an index condition) rather than a call for every row; the cast keeps ANY from
-- taking the sub-select for a set of rows.

-- Who may read each table: its policy, the column that holds the couple (or the user), and the function that
-- lists what the acting user may read. A table distributed on Citus keeps row-level security but gets no
-- policy: one could not read the coordinator's memberships from a worker, and sql/citus/distribute.sql refuses
-- rbac_app the table instead.
DO $$
DECLARE
    v_table text;
    v_policy text;
    v_column text;
    v_readable text;
BEGIN
    FOR v_table, v_policy, v_column, v_readable IN
        VALUES ('couples', 'members_read', 'id', 'rbac.readable_couples()'),
               -- Who belongs, and the couple's own roles (as the policy's roles are for everyone): for its members.
               ('memberships', 'members_read', 'couple_id', 'rbac.readable_couples()'),
               ('couple_roles', 'members_read', 'couple_id', 'rbac.readable_couples()'),
               ('couple_role_permissions', 'members_read', 'couple_id', 'rbac.readable_couples()'),
               ('invitations', 'inviters_read', 'couple_id', 'rbac.readable_couples(''collaborators.invite'')'),
               ('audit_log', 'auditors_read', 'couple_id', 'rbac.readable_couples(''audit.view'')'),
               ('users', 'collaborators_read', 'id', 'rbac.visible_users()')
        -- The budget: members read what their view permissions cover; writes go through the services.
        UNION ALL
        SELECT table_name, 'viewers_read', 'couple_id', format('rbac.readable_couples(%L)', view_permission)
        FROM (SELECT table_name, view_permission FROM rbac.budget_tables()
              UNION ALL VALUES ('budget_revisions', 'budget.view')) budget
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', v_table);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', v_table);
        CONTINUE WHEN rbac.distributed(v_table);
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', v_policy, v_table);
        EXECUTE format('CREATE POLICY %I ON %I FOR SELECT TO rbac_app USING (%I = ANY ((SELECT %s)::uuid[]))',
                       v_policy, v_table, v_column, v_readable);
    END LOOP;
END $$;

-- How many rows of a budget table a couple holds: for those who may read that table. The permission differs by
-- row, so it is asked per row, of the few rows of the acting user's own couples only.
ALTER TABLE budget_row_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE budget_row_counts FORCE ROW LEVEL SECURITY;
DO $$
BEGIN
    IF NOT rbac.distributed('budget_row_counts') THEN
        DROP POLICY IF EXISTS viewers_read ON budget_row_counts;
        CREATE POLICY viewers_read ON budget_row_counts FOR SELECT TO rbac_app
            USING (couple_id = ANY ((SELECT rbac.readable_couples())::uuid[])
                   AND user_has_permission(couple_id, (SELECT t.view_permission FROM rbac.budget_tables() t
                                                       WHERE t.table_name = budget_row_counts.table_name)));
    END IF;
END $$;

-- The per-row predicates the policies above replaced; nothing else calls them.
DROP FUNCTION IF EXISTS rbac.is_active_member(uuid), rbac.can_see_user(uuid);

-- Operators (sql/functions/privileges.sql) act on every couple, as a superuser would: past row-level security
-- on every table that has it, on Citus too (a policy without sub-selects travels to the shards).
DO $$
DECLARE
    v_table regclass;
BEGIN
    FOR v_table IN SELECT c.oid::regclass FROM pg_class c
                   WHERE c.relnamespace = 'public'::regnamespace AND c.relrowsecurity LOOP
        EXECUTE format('DROP POLICY IF EXISTS operators_all ON %s', v_table);
        EXECUTE format('CREATE POLICY operators_all ON %s TO rbac_operator USING (true) WITH CHECK (true)', v_table);
    END LOOP;
END $$;
