-- The budget: what-if scenarios of budget items in folders, the couple's expenses with their payments and
-- their allocations to the items of each scenario, and gifts and money owed. couple_id leads every key, and
-- every reference between budget rows carries it, so no row can point into another couple.
-- Money is numeric(12,2) and never negative.

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
-- never add up to more than the expense (checked by the functions that write them).
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
CREATE INDEX expense_allocations_by_item ON expense_allocations (couple_id, scenario_id, budget_item_id);
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

CREATE FUNCTION rbac.advance_budget_revision() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO budget_revisions AS r (couple_id, revision)
    SELECT DISTINCT c.couple_id, 1 FROM changed c
    WHERE EXISTS (SELECT 1 FROM couples WHERE id = c.couple_id)  -- not for a couple being deleted
    ON CONFLICT (couple_id) DO UPDATE SET revision = r.revision + 1;
    RETURN NULL;
END $$;

DO $$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['budget_scenarios', 'budget_folders', 'budget_items', 'expenses',
                                   'expense_payments', 'expense_allocations', 'gifts_and_owed'] LOOP
        EXECUTE format('CREATE TRIGGER %1$s_revision_insert AFTER INSERT ON %1$I REFERENCING NEW TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.advance_budget_revision()', v_table);
        EXECUTE format('CREATE TRIGGER %1$s_revision_update AFTER UPDATE ON %1$I REFERENCING NEW TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.advance_budget_revision()', v_table);
        EXECUTE format('CREATE TRIGGER %1$s_revision_delete AFTER DELETE ON %1$I REFERENCING OLD TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION rbac.advance_budget_revision()', v_table);
    END LOOP;
END $$;

-- Copies a scenario with its folders, items and allocations, in the caller's transaction. The copies' ids are
-- derived from the new scenario's id and the originals' ids, so the references between them carry over.
CREATE FUNCTION public.clone_budget_scenario(p_couple_id uuid, p_source_id uuid, p_name text) RETURNS uuid
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

REVOKE ALL ON budget_scenarios, budget_folders, budget_items, expenses, expense_payments, expense_allocations,
    gifts_and_owed, budget_revisions FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION public.clone_budget_scenario(uuid, uuid, text), rbac.advance_budget_revision()
    FROM PUBLIC;
GRANT SELECT ON budget_scenarios, budget_folders, budget_items, expenses, expense_payments, expense_allocations,
    gifts_and_owed, budget_revisions TO rbac_app;
