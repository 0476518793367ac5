-- How many rows of each budget table one couple may hold. Without a bound, a member who may edit the budget
-- (or a client gone wrong) could add rows until every overview, listing and clone of the couple slowed to a
-- crawl. The limits are far above what a wedding needs, and above the budget benchmark's large couple (4,000
-- items, 40,000 expenses, 80,000 allocations). An operator changes one with SQL:
--   UPDATE budget_row_limits SET max_rows = 50000 WHERE table_name = 'budget_items';
-- A statement that would take a couple past a limit fails with SQLSTATE RBQTA and adds nothing; a couple
-- already past a lowered limit keeps its rows and may delete some.

CREATE TABLE budget_row_limits (
    table_name text PRIMARY KEY,
    -- What the rows are, in the error message: "... the couple's limit of budget items (20000)".
    noun text NOT NULL,
    max_rows integer NOT NULL CHECK (max_rows >= 0)
);
INSERT INTO budget_row_limits (table_name, noun, max_rows) VALUES
    ('budget_scenarios', 'scenarios', 100),
    ('budget_folders', 'folders', 5000),
    ('budget_items', 'budget items', 20000),
    ('expenses', 'expenses', 100000),
    ('expense_payments', 'payments', 200000),
    ('expense_allocations', 'allocations', 500000),
    ('gifts_and_owed', 'gifts', 20000);

-- Each couple's row count per budget table, kept by the triggers below. Adding rows updates the couple's
-- count row for that table, which serialises concurrent additions for one couple: the second waits for the
-- first to commit, then counts on from what it committed.
CREATE TABLE budget_row_counts (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    table_name text NOT NULL,
    row_count integer NOT NULL,
    PRIMARY KEY (couple_id, table_name)
);

CREATE FUNCTION rbac.count_budget_rows() RETURNS trigger
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

-- The triggers first: creating them locks each table against writes until this migration commits, so the
-- counts below miss no row.
DO $$
DECLARE
    v_table text;
BEGIN
    FOR v_table IN SELECT table_name FROM budget_row_limits ORDER BY table_name LOOP
        EXECUTE format('CREATE TRIGGER %1$s_count_insert AFTER INSERT ON %1$I REFERENCING NEW TABLE AS added '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.count_budget_rows()', v_table);
        EXECUTE format('CREATE TRIGGER %1$s_count_update AFTER UPDATE ON %1$I '
                       'REFERENCING OLD TABLE AS removed NEW TABLE AS added '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.count_budget_rows()', v_table);
        EXECUTE format('CREATE TRIGGER %1$s_count_delete AFTER DELETE ON %1$I REFERENCING OLD TABLE AS removed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.count_budget_rows()', v_table);
        EXECUTE format('INSERT INTO budget_row_counts (couple_id, table_name, row_count) '
                       'SELECT couple_id, %1$L, count(*) FROM %1$I GROUP BY couple_id', v_table);
    END LOOP;
END $$;

REVOKE ALL ON budget_row_limits, budget_row_counts FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION rbac.count_budget_rows() FROM PUBLIC;
GRANT SELECT ON budget_row_limits, budget_row_counts TO rbac_app;
