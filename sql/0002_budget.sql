-- The budget: what-if scenarios of budget items in folders, the couple's expenses with their payments and
-- their allocations to the items of each scenario, and gifts and money owed. couple_id leads every key, and
-- every reference between budget rows carries it, so no row can point into another couple.
-- Money is numeric(12,2) and never negative. Triggers and functions: sql/functions/budget.sql.

CREATE TABLE budget_scenarios (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    is_primary boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (couple_id, id)
);
-- At most one primary scenario per couple.
CREATE UNIQUE INDEX budget_scenarios_one_primary ON budget_scenarios (couple_id) WHERE is_primary;

CREATE TABLE budget_folders (
    couple_id uuid NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    scenario_id uuid NOT NULL,
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    PRIMARY KEY (couple_id, id),
    UNIQUE (couple_id, scenario_id, id),
    FOREIGN KEY (couple_id, scenario_id) REFERENCES budget_scenarios (couple_id, id) ON DELETE CASCADE
);

CREATE TABLE budget_items (
    couple_id uuid NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    scenario_id uuid NOT NULL,
    folder_id uuid,
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    category text NOT NULL DEFAULT '' CHECK (length(category) <= 100),
    event text NOT NULL DEFAULT '' CHECK (length(event) <= 100),
    budgeted numeric(12, 2) NOT NULL CHECK (budgeted >= 0),
    PRIMARY KEY (couple_id, id),
    UNIQUE (couple_id, scenario_id, id),
    FOREIGN KEY (couple_id, scenario_id) REFERENCES budget_scenarios (couple_id, id) ON DELETE CASCADE,
    -- A folder of the same scenario; deleting the folder leaves its items unfiled.
    FOREIGN KEY (couple_id, scenario_id, folder_id) REFERENCES budget_folders (couple_id, scenario_id, id)
        ON DELETE SET NULL (folder_id)
);

CREATE TABLE expenses (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    vendor text NOT NULL DEFAULT '' CHECK (length(vendor) <= 200),
    amount numeric(12, 2) NOT NULL CHECK (amount >= 0),
    due_date date,
    category text NOT NULL DEFAULT '' CHECK (length(category) <= 100),
    PRIMARY KEY (couple_id, id)
);

CREATE TABLE expense_payments (
    couple_id uuid NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    expense_id uuid NOT NULL,
    amount numeric(12, 2) NOT NULL CHECK (amount > 0),
    paid_at date NOT NULL DEFAULT current_date,
    PRIMARY KEY (couple_id, id),
    FOREIGN KEY (couple_id, expense_id) REFERENCES expenses (couple_id, id) ON DELETE CASCADE
);
CREATE INDEX expense_payments_by_expense ON expense_payments (couple_id, expense_id);

-- How much of an expense each budget item of a scenario carries. In each scenario an expense's allocations
-- never add up to more than the expense (checked by the services that write them).
CREATE TABLE expense_allocations (
    couple_id uuid NOT NULL,
    scenario_id uuid NOT NULL,
    expense_id uuid NOT NULL,
    budget_item_id uuid NOT NULL,
    amount numeric(12, 2) NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (couple_id, scenario_id, expense_id, budget_item_id),
    FOREIGN KEY (couple_id, expense_id) REFERENCES expenses (couple_id, id) ON DELETE CASCADE,
    FOREIGN KEY (couple_id, scenario_id, budget_item_id) REFERENCES budget_items (couple_id, scenario_id, id)
        ON DELETE CASCADE
);
-- The overview reads every allocation of a scenario, grouped by item: with the expense and the amount in the
-- index, that read is an index-only scan that returns each item's allocations together, in expense order.
CREATE INDEX expense_allocations_by_item_covering
    ON expense_allocations (couple_id, scenario_id, budget_item_id, expense_id) INCLUDE (amount);
CREATE INDEX expense_allocations_by_expense ON expense_allocations (couple_id, expense_id);

CREATE TABLE gifts_and_owed (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    from_name text NOT NULL CHECK (length(btrim(from_name)) BETWEEN 1 AND 200),
    amount numeric(12, 2) NOT NULL CHECK (amount >= 0),
    received boolean NOT NULL DEFAULT false,
    budget_item_id uuid,
    PRIMARY KEY (couple_id, id),
    FOREIGN KEY (couple_id, budget_item_id) REFERENCES budget_items (couple_id, id) ON DELETE SET NULL (budget_item_id)
);
CREATE INDEX gifts_and_owed_by_item ON gifts_and_owed (couple_id, budget_item_id);

-- Each couple's budget revision, advanced by every statement that changes its budget rows (also raw SQL), so
-- a cached overview can tell, with one indexed read, whether it is still current.
CREATE TABLE budget_revisions (
    couple_id uuid PRIMARY KEY REFERENCES couples (id) ON DELETE CASCADE,
    revision bigint NOT NULL
);

-- How many rows of each budget table one couple may hold. Without a bound, a member who may edit the budget
-- (or a client gone wrong) could add rows until every overview, listing and clone of the couple slowed to a
-- crawl. The limits are far above what a wedding needs, and above the budget benchmark's large couple. An
-- operator changes one with SQL:
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

-- Each couple's row count per budget table, kept by triggers. Adding rows updates the couple's count row for
-- that table, which serialises concurrent additions for one couple: the second waits for the first to
-- commit, then counts on from what it committed.
CREATE TABLE budget_row_counts (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    table_name text NOT NULL,
    row_count integer NOT NULL,
    PRIMARY KEY (couple_id, table_name)
);

REVOKE ALL ON budget_scenarios, budget_folders, budget_items, expenses, expense_payments, expense_allocations,
    gifts_and_owed, budget_revisions, budget_row_limits, budget_row_counts FROM PUBLIC;
GRANT SELECT ON budget_scenarios, budget_folders, budget_items, expenses, expense_payments, expense_allocations,
    gifts_and_owed, budget_revisions, budget_row_limits, budget_row_counts TO rbac_app;
