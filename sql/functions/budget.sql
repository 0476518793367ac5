-- The budget tables' triggers (revision, row counts, audit) and the scenario clone.

-- Every budget table with rows of a couple: its name in the audit log and the permission that lets a member
-- read it (policies/rls.sql). The one list of them.
CREATE OR REPLACE FUNCTION rbac.budget_tables()
RETURNS TABLE (table_name text, audit_name text, view_permission text)
LANGUAGE sql IMMUTABLE AS $$
    VALUES ('budget_scenarios', 'budget_scenario', 'budget.view'),
           ('budget_folders', 'budget_folder', 'budget.view'),
           ('budget_items', 'budget_item', 'budget.view'),
           ('expenses', 'expense', 'expenses.view'),
           ('expense_payments', 'payment', 'expenses.view'),
           ('expense_allocations', 'allocation', 'budget.view'),
           ('gifts_and_owed', 'gift', 'gifts.view')
$$;

-- Advances budget_revisions for each couple whose rows the statement changed.
CREATE OR REPLACE FUNCTION rbac.advance_budget_revision() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO budget_revisions AS r (couple_id, revision)
    SELECT DISTINCT c.couple_id, 1 FROM changed c
    WHERE EXISTS (SELECT 1 FROM couples WHERE id = c.couple_id)  -- not for a couple being deleted
    ON CONFLICT (couple_id) DO UPDATE SET revision = r.revision + 1;
    RETURN NULL;
END $$;

-- Keeps budget_row_counts and refuses (RBQTA) a statement that takes a couple past budget_row_limits.
CREATE OR REPLACE FUNCTION rbac.count_budget_rows() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_over record;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF EXISTS (SELECT couple_id FROM added EXCEPT ALL SELECT couple_id FROM removed) THEN
            RAISE EXCEPTION 'a budget row cannot move to another couple' USING ERRCODE = 'RBINV';
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE budget_row_counts c SET row_count = c.row_count - d.n
        FROM (SELECT couple_id, count(*) AS n FROM removed GROUP BY couple_id) d
        WHERE c.couple_id = d.couple_id AND c.table_name = TG_TABLE_NAME;
    ELSE
        -- In couple order, so that two statements adding rows for the same couples lock them in one order.
        WITH counted AS (
            INSERT INTO budget_row_counts AS c (couple_id, table_name, row_count)
            SELECT couple_id, TG_TABLE_NAME, count(*) FROM added GROUP BY couple_id ORDER BY couple_id
            ON CONFLICT (couple_id, table_name) DO UPDATE SET row_count = c.row_count + excluded.row_count
            RETURNING c.row_count
        )
        SELECT l.noun, l.max_rows INTO v_over
        FROM counted JOIN budget_row_limits l ON l.table_name = TG_TABLE_NAME
        WHERE counted.row_count > l.max_rows LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'this would pass the couple''s limit of % (%)', v_over.noun, v_over.max_rows
                USING ERRCODE = 'RBQTA', HINT = 'delete some first, or ask an operator to raise the limit';
        END IF;
    END IF;
    RETURN NULL;
END $$;

-- Each budget table's triggers: statement-level ones for the revision and the row counts, a row-level one for
-- the couple's audit log (an explicit allocation is a person's act, and a recalculation shows what it moved).
DO $$
DECLARE
    v_table text;
    v_audit_name text;
BEGIN
    FOR v_table, v_audit_name IN SELECT table_name, audit_name FROM rbac.budget_tables() LOOP
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_revision_insert AFTER INSERT ON %1$I '
                       'REFERENCING NEW TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.advance_budget_revision()', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_revision_update AFTER UPDATE ON %1$I '
                       'REFERENCING NEW TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.advance_budget_revision()', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_revision_delete AFTER DELETE ON %1$I '
                       'REFERENCING OLD TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.advance_budget_revision()', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_count_insert AFTER INSERT ON %1$I '
                       'REFERENCING NEW TABLE AS added '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.count_budget_rows()', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_count_update AFTER UPDATE ON %1$I '
                       'REFERENCING OLD TABLE AS removed NEW TABLE AS added '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.count_budget_rows()', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_count_delete AFTER DELETE ON %1$I '
                       'REFERENCING OLD TABLE AS removed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.count_budget_rows()', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_audit AFTER INSERT OR UPDATE OR DELETE ON %1$I '
                       'FOR EACH ROW EXECUTE FUNCTION rbac.audit_change(%2$L)', v_table, v_audit_name);
    END LOOP;
END $$;

-- Copies a scenario with its folders, items and allocations, in the caller's transaction. The copies' ids are
-- derived from the new scenario's id and the originals' ids, so the references between them carry over.
CREATE OR REPLACE FUNCTION public.clone_budget_scenario(p_couple_id uuid, p_source_id uuid, p_name text) RETURNS uuid
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
    v_id uuid := gen_random_uuid();
BEGIN
    IF NOT EXISTS (SELECT 1 FROM budget_scenarios WHERE couple_id = p_couple_id AND id = p_source_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'RBNFD', MESSAGE = 'no such scenario in this couple';
    END IF;
    INSERT INTO budget_scenarios (couple_id, id, name) VALUES (p_couple_id, v_id, p_name);
    INSERT INTO budget_folders (couple_id, id, scenario_id, name)
    SELECT couple_id, md5(v_id::text || id::text)::uuid, v_id, name
    FROM budget_folders WHERE couple_id = p_couple_id AND scenario_id = p_source_id;
    INSERT INTO budget_items (couple_id, id, scenario_id, folder_id, name, category, event, budgeted)
    SELECT couple_id, md5(v_id::text || id::text)::uuid, v_id, md5(v_id::text || folder_id::text)::uuid,
           name, category, event, budgeted
    FROM budget_items WHERE couple_id = p_couple_id AND scenario_id = p_source_id;
    INSERT INTO expense_allocations (couple_id, scenario_id, expense_id, budget_item_id, amount)
    SELECT couple_id, v_id, expense_id, md5(v_id::text || budget_item_id::text)::uuid, amount
    FROM expense_allocations WHERE couple_id = p_couple_id AND scenario_id = p_source_id;
    RETURN v_id;
END $$;
