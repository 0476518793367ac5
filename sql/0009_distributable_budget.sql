-- The budget's schema in a form that also runs distributed by couple on Citus (docs/decisions/0009): what Citus
-- refuses on a distributed table is replaced here, on plain PostgreSQL too, so both run the same definitions.

-- ON DELETE SET NULL of one column of a key that holds the distribution column is refused: unfiling an item
-- when its folder goes, and unlinking a gift when its item goes, are triggers now (sql/functions/budget.sql);
-- the keys stay, without an action.
ALTER TABLE budget_items DROP CONSTRAINT budget_items_couple_id_scenario_id_folder_id_fkey;
ALTER TABLE budget_items ADD CONSTRAINT budget_items_couple_id_scenario_id_folder_id_fkey
    FOREIGN KEY (couple_id, scenario_id, folder_id) REFERENCES budget_folders (couple_id, scenario_id, id);
CREATE INDEX budget_items_by_folder ON budget_items (couple_id, folder_id) WHERE folder_id IS NOT NULL;
ALTER TABLE gifts_and_owed DROP CONSTRAINT gifts_and_owed_couple_id_budget_item_id_fkey;
ALTER TABLE gifts_and_owed ADD CONSTRAINT gifts_and_owed_couple_id_budget_item_id_fkey
    FOREIGN KEY (couple_id, budget_item_id) REFERENCES budget_items (couple_id, id);

-- Transition tables do not reach a shard's triggers: the revision and the row counts are kept by row-level
-- triggers now, under other names (a database made before this had the statement-level ones).
DO $$
DECLARE
    v_table text;
    v_kind text;
BEGIN
    FOR v_table IN SELECT table_name FROM (VALUES ('budget_scenarios'), ('budget_folders'), ('budget_items'),
            ('expenses'), ('expense_payments'), ('expense_allocations'), ('gifts_and_owed')) t (table_name) LOOP
        FOREACH v_kind IN ARRAY ARRAY['revision_insert', 'revision_update', 'revision_delete', 'count_insert',
                                      'count_update', 'count_delete'] LOOP
            EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', v_table || '_' || v_kind, v_table);
        END LOOP;
    END LOOP;
END $$;

-- A couple's log is read newest first by time: on Citus, ids are drawn from each node's own range, so only
-- the time orders entries written on different nodes.
CREATE INDEX audit_log_by_time ON audit_log (couple_id, at, id);
