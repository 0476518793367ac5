-- Budget changes go to the audit log as membership and invitation changes do: one row per changed row, with
-- before and after, and the actor the writing transaction names (the budget services name the acting user or
-- operator). Allocations are audited too: an explicit allocation is a person's act, and a recalculation
-- shows what it moved.
DO $$
DECLARE
    v_table text;
    v_kind text;
BEGIN
    FOR v_table, v_kind IN VALUES
        ('budget_scenarios', 'budget_scenario'), ('budget_folders', 'budget_folder'), ('budget_items', 'budget_item'),
        ('expenses', 'expense'), ('expense_payments', 'payment'), ('expense_allocations', 'allocation'),
        ('gifts_and_owed', 'gift')
    LOOP
        EXECUTE format('CREATE TRIGGER %1$s_audit AFTER INSERT OR UPDATE OR DELETE ON %1$I '
                       'FOR EACH ROW EXECUTE FUNCTION rbac.audit_change(%2$L)', v_table, v_kind);
    END LOOP;
END $$;
