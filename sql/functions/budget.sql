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

-- Advances the couple's budget revision, once per transaction: a transaction that adds a thousand rows moves it
-- once, since a reader can only see all of them or none. The couple revised last in this transaction is
-- remembered in a transaction-local setting (rolled back with a savepoint, like the revision itself), which
-- catches the repeats of a statement's rows, all of one couple. An update that changes nothing (an edit to the
-- same name, a re-split to the same cents) leaves it, and so the overviews cached at it.
CREATE OR REPLACE FUNCTION rbac.advance_budget_revision() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_couple_id uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.couple_id ELSE NEW.couple_id END;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NULL;
    END IF;
    IF current_setting('rbac.budget_revised', true) IS DISTINCT FROM v_couple_id::text THEN
        INSERT INTO budget_revisions AS r (couple_id, revision) VALUES (v_couple_id, 1)
        ON CONFLICT (couple_id) DO UPDATE SET revision = r.revision + 1;
        PERFORM set_config('rbac.budget_revised', v_couple_id::text, true);
    END IF;
    RETURN NULL;
END $$;

-- Keeps budget_row_counts for the table named by the trigger's argument (on a Citus shard TG_TABLE_NAME is
-- the shard's name) and refuses (RBQTA) a row that takes a couple past budget_row_limits. Adding a row
-- updates the couple's count row, which serialises concurrent additions for one couple: the second waits
-- for the first to commit, then counts on from what it committed.
CREATE OR REPLACE FUNCTION rbac.count_budget_rows() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_table text := TG_ARGV[0];
    v_count integer;
    v_limit record;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.couple_id <> OLD.couple_id THEN
            RAISE EXCEPTION 'a budget row cannot move to another couple' USING ERRCODE = 'RBINV';
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE budget_row_counts SET row_count = row_count - 1
        WHERE couple_id = OLD.couple_id AND table_name = v_table;
    ELSE
        INSERT INTO budget_row_counts AS c (couple_id, table_name, row_count) VALUES (NEW.couple_id, v_table, 1)
        ON CONFLICT (couple_id, table_name) DO UPDATE SET row_count = c.row_count + 1
        RETURNING c.row_count INTO v_count;
        SELECT noun, max_rows INTO v_limit FROM budget_row_limits WHERE table_name = v_table;
        IF v_count > v_limit.max_rows THEN
            RAISE EXCEPTION 'this would pass the couple''s limit of % (%)', v_limit.noun, v_limit.max_rows
                USING ERRCODE = 'RBQTA', HINT = 'delete some first, or ask an operator to raise the limit';
        END IF;
    END IF;
    RETURN NULL;
END $$;

-- ON DELETE SET NULL of one column, which Citus refuses on a key that holds the distribution column: the
-- trigger's arguments name the referencing table and column. Deleting a folder leaves its items unfiled;
-- deleting an item leaves its gifts unlinked.
CREATE OR REPLACE FUNCTION rbac.set_null_on_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    EXECUTE format('UPDATE %1$I SET %2$I = NULL WHERE couple_id = $1 AND %2$I = $2', TG_ARGV[0], TG_ARGV[1])
        USING OLD.couple_id, OLD.id;
    RETURN OLD;
END $$;
CREATE OR REPLACE TRIGGER budget_folders_unfile_items BEFORE DELETE ON budget_folders
    FOR EACH ROW EXECUTE FUNCTION rbac.set_null_on_delete('budget_items', 'folder_id');
CREATE OR REPLACE TRIGGER budget_items_unlink_gifts BEFORE DELETE ON budget_items
    FOR EACH ROW EXECUTE FUNCTION rbac.set_null_on_delete('gifts_and_owed', 'budget_item_id');

-- Deleting a couple deletes its budget first, then the revision and counts its deletion advanced. On plain
-- PostgreSQL the foreign keys to couples would cascade as well; on Citus the distributed budget tables have
-- no key to the coordinator's couples, and this is what reaches them.
CREATE OR REPLACE FUNCTION rbac.delete_couple_budget() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    DELETE FROM gifts_and_owed WHERE couple_id = OLD.id;
    DELETE FROM expenses WHERE couple_id = OLD.id;
    DELETE FROM budget_scenarios WHERE couple_id = OLD.id;
    DELETE FROM budget_revisions WHERE couple_id = OLD.id;
    DELETE FROM budget_row_counts WHERE couple_id = OLD.id;
    RETURN OLD;
END $$;
CREATE OR REPLACE TRIGGER couples_delete_budget BEFORE DELETE ON couples
    FOR EACH ROW EXECUTE FUNCTION rbac.delete_couple_budget();

-- Each budget table's row-level triggers: the revision, the row counts, and the couple's audit log (an
-- explicit allocation is a person's act, and a recalculation shows what it moved).
DO $$
DECLARE
    v_table text;
    v_audit_name text;
BEGIN
    FOR v_table, v_audit_name IN SELECT table_name, audit_name FROM rbac.budget_tables() LOOP
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_revision AFTER INSERT OR UPDATE OR DELETE ON %1$I '
                       'FOR EACH ROW EXECUTE FUNCTION rbac.advance_budget_revision()', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_count AFTER INSERT OR UPDATE OR DELETE ON %1$I '
                       'FOR EACH ROW EXECUTE FUNCTION rbac.count_budget_rows(%1$L)', v_table);
        EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_audit AFTER INSERT OR UPDATE OR DELETE ON %1$I '
                       'FOR EACH ROW EXECUTE FUNCTION rbac.audit_change(%2$L)', v_table, v_audit_name);
    END LOOP;
END $$;

-- Copies a scenario with its folders, items and allocations, in the caller's transaction. The copies' ids are
-- derived from the new scenario's id and the originals' ids, so the references between them carry over.
CREATE OR REPLACE FUNCTION public.clone_budget_scenario(p_couple_id uuid, p_source_id uuid, p_name text) RETURNS uuid
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
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
