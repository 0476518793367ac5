-- Distributes a migrated database on a Citus coordinator (docs/decisions/0009): the couple's audit log and
-- every budget table by couple_id, colocated, so that one couple's budget lives on one worker; the row limits
-- as a reference table, which the row-count triggers read on the workers. The collaboration core stays on
-- the coordinator, where a permission check never leaves it. `rbac migrate --citus` runs this after the
-- migrations, in their transaction; running it again changes nothing.

-- Budget tables have triggers, which run on their shards; Citus creates them only when told it may, now and
-- for later migrations.
SET LOCAL citus.enable_unsafe_triggers = on;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'this database has no citus extension' USING ERRCODE = 'RBINV',
            HINT = 'CREATE EXTENSION citus on the coordinator and each worker, and add the workers (citus_add_node)';
    END IF;
    EXECUTE format('ALTER DATABASE %I SET citus.enable_unsafe_triggers = on', current_database());
    -- The actor, named with SET LOCAL by the services, must reach the workers, where a budget row's audit
    -- trigger reads it.
    EXECUTE format('ALTER DATABASE %I SET citus.propagate_set_commands = local', current_database());
END $$;

DO $$
DECLARE
    v_table text;
    v_key name;
BEGIN
    FOR v_table IN SELECT 'audit_log' UNION ALL SELECT table_name FROM rbac.budget_tables()
                   UNION ALL VALUES ('budget_revisions'), ('budget_row_counts') LOOP
        -- Its row-level security policies could not read the coordinator's memberships from a worker (and
        -- Citus refuses a policy with a sub-select): rbac_app is refused the table below instead. The
        -- operators' policy reads nothing and stays.
        FOR v_key IN SELECT policyname FROM pg_policies
                     WHERE schemaname = 'public' AND tablename = v_table AND policyname <> 'operators_all' LOOP
            EXECUTE format('DROP POLICY %I ON %I', v_key, v_table);
        END LOOP;
        -- A distributed table cannot reference the coordinator's couples: deleting a couple reaches these
        -- rows through its trigger (rbac.delete_couple_budget) instead.
        FOR v_key IN SELECT conname FROM pg_constraint
                     WHERE conrelid = v_table::regclass AND confrelid = 'couples'::regclass LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', v_table, v_key);
        END LOOP;
        -- Copying the rows to the shards must not run the triggers again (counting and auditing them twice).
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = v_table::regclass) THEN
            EXECUTE format('ALTER TABLE %I DISABLE TRIGGER USER', v_table);
            PERFORM create_distributed_table(v_table, 'couple_id',
                colocate_with => CASE WHEN v_table = 'audit_log' THEN 'default' ELSE 'audit_log' END);
            EXECUTE format('ALTER TABLE %I ENABLE TRIGGER USER', v_table);
        END IF;
        -- Direct SQL clients are refused these tables outright rather than answered with nothing; the
        -- services read them as their own role.
        EXECUTE format('REVOKE SELECT ON %I FROM rbac_app', v_table);
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'budget_row_limits'::regclass) THEN
        ALTER TABLE budget_row_limits DISABLE TRIGGER USER;
        PERFORM create_reference_table('budget_row_limits');
        ALTER TABLE budget_row_limits ENABLE TRIGGER USER;
    END IF;
END $$;
