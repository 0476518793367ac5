import Budget
import Collaboration
import Foundation
import Postgres

/// The budget tables, on a pool whose login role is the operator: the budget services check the
/// acting user's permissions before they call this. Every statement names the couple first; every write runs in
/// a transaction that names the actor, which the audit triggers (sql/functions/budget.sql) record.
public struct PostgresBudgetRepository: BudgetRepository {
    private let pool: PostgresConnectionPool
    private let reads: BudgetReadPools?

    /// Writes go through `pool`; so do reads, unless `reads` sends each couple's elsewhere (on Citus, to the
    /// worker that holds its budget).
    public init(pool: PostgresConnectionPool, reads: BudgetReadPools? = nil) {
        self.pool = pool
        self.reads = reads
    }

    // MARK: The overview's reads

    public func revision(couple: UUID, scenario: UUID) async throws -> (revision: Int64, scenarioExists: Bool) {
        try await Self.revision(couple, scenario, on: reader(couple))
    }

    public func items(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [BudgetItem] {
        let start = try await start(page, .item, couple: couple, Self.itemColumns, Self.item)
        return try await Self.items(couple, scenario, limit: page?.limit, after: start, on: reader(couple))
    }

    /// The two halves of the items' id space, read on two connections at once: PostgreSQL produces the halves
    /// in parallel, and each is decoded as it arrives, one row per item with its allocations as arrays
    /// (decision 0005).
    public func allocationCents(couple: UUID, scenario: UUID) async throws -> [[AllocationCents]] {
        async let lower = Self.allocationCents(couple, scenario, items: Self.lowerItems, on: reader(couple))
        async let upper = Self.allocationCents(couple, scenario, items: Self.upperItems, on: reader(couple))
        return try await [lower, upper]
    }

    public func expenseNames(couple: UUID) async throws -> [UUID: String] {
        try await Self.expenseNames(couple, on: reader(couple))
    }

    public func linkedGifts(couple: UUID, scenario: UUID) async throws -> [Gift] {
        try await Self.linkedGifts(couple, scenario, on: reader(couple))
    }

    /// The same statements, one after another in one REPEATABLE READ transaction: one snapshot.
    public func overviewSnapshot(couple: UUID, scenario: UUID) async throws -> OverviewSnapshot {
        try await reading(couple) { pool in
            try await pool.withTransaction(isolation: .repeatableRead) { connection in
                let run: Statement = { try await connection.query($0) }
                let (revision, exists) = try await Self.revision(couple, scenario, on: run)
                let items = try await Self.items(couple, scenario, limit: nil, after: nil, on: run)
                let allocations = [
                    try await Self.allocationCents(couple, scenario, items: Self.lowerItems, on: run),
                    try await Self.allocationCents(couple, scenario, items: Self.upperItems, on: run),
                ]
                return OverviewSnapshot(
                    revision: revision, scenarioExists: exists, items: items, allocations: allocations,
                    expenseNames: try await Self.expenseNames(couple, on: run),
                    gifts: try await Self.linkedGifts(couple, scenario, on: run))
            }
        }
    }

    /// Runs a statement: on a pooled connection, or on a transaction's.
    private typealias Statement = (PostgresQuery) async throws -> PostgresRows

    private static func revision(_ couple: UUID, _ scenario: UUID, on run: Statement) async throws
        -> (revision: Int64, scenarioExists: Bool)
    {
        let row = try await run(
            PostgresQuery(
                """
                SELECT coalesce((SELECT revision FROM budget_revisions WHERE couple_id = \(couple)), 0) AS revision,
                       EXISTS (SELECT 1 FROM budget_scenarios WHERE couple_id = \(couple) AND id = \(scenario)) AS found
                """
            ).prepared(as: "budget_revision"))[0]
        return (try row.decode("revision"), try row.decode("found"))
    }

    /// A scenario's items by name: all, or `limit` of them after `start` (see `start`).
    private static func items(
        _ couple: UUID, _ scenario: UUID, limit: Int?, after start: PageCursor<String>?, on run: Statement
    ) async throws -> [BudgetItem] {
        try await run(
            PostgresQuery(
                """
                SELECT \(sql: itemColumns) FROM budget_items
                WHERE couple_id = \(couple) AND scenario_id = \(scenario)
                  AND (\(start?.id)::uuid IS NULL OR (\(sql: Self.byName), id) > (
                       SELECT \(sql: Self.byName), \(start?.id) FROM (SELECT \(start?.key)::text AS name) place))
                ORDER BY \(sql: Self.byName), id LIMIT \(limit)
                """
            ).prepared(as: "budget_items")
        ).map(item)
    }

    /// Budget item ids from the first to the last of each half of the uuid order (PostgreSQL compares uuids
    /// byte by byte): random ids split about evenly.
    private static let lowerItems =
        UUID(uuidString: "00000000-0000-0000-0000-000000000000")!...UUID(
            uuidString: "7fffffff-ffff-ffff-ffff-ffffffffffff")!
    private static let upperItems =
        UUID(uuidString: "80000000-0000-0000-0000-000000000000")!...UUID(
            uuidString: "ffffffff-ffff-ffff-ffff-ffffffffffff")!

    private static func allocationCents(
        _ couple: UUID, _ scenario: UUID, items: ClosedRange<UUID>, on run: Statement
    ) async throws -> [AllocationCents] {
        // Each item's arrays list its expenses in id order: array_agg takes the rows in the sub-select's order
        // (PostgreSQL never merges a sub-select that has an ORDER BY into the outer query), which the covering
        // index gives without a sort.
        var allocations: [AllocationCents] = []
        for row in try await run(
            PostgresQuery(
                """
                SELECT budget_item_id, array_agg(expense_id) AS expense_ids, array_agg(cents) AS cents
                FROM (SELECT budget_item_id, expense_id, (amount * 100)::bigint AS cents FROM expense_allocations
                      WHERE couple_id = \(couple) AND scenario_id = \(scenario)
                        AND budget_item_id BETWEEN \(items.lowerBound) AND \(items.upperBound)
                      ORDER BY budget_item_id, expense_id) AS a
                GROUP BY budget_item_id ORDER BY budget_item_id
                """
            ).prepared(as: "budget_allocation_cents"))
        {
            let item: UUID = try row.decode("budget_item_id")
            let (expenses, cents): ([UUID], [Int64]) = (try row.decode("expense_ids"), try row.decode("cents"))
            for (expense, cents) in zip(expenses, cents) {
                allocations.append(AllocationCents(expenseID: expense, budgetItemID: item, cents: cents))
            }
        }
        return allocations
    }

    private static func expenseNames(_ couple: UUID, on run: Statement) async throws -> [UUID: String] {
        let rows = try await run(
            PostgresQuery("SELECT id, name FROM expenses WHERE couple_id = \(couple)").prepared(
                as: "budget_expense_names"))
        var names: [UUID: String] = [:]
        names.reserveCapacity(rows.count)
        for row in rows { names[try row.decode("id")] = try row.decode("name") }
        return names
    }

    private static func linkedGifts(_ couple: UUID, _ scenario: UUID, on run: Statement) async throws -> [Gift] {
        try await run(
            PostgresQuery(
                """
                SELECT \(sql: giftColumns) FROM gifts_and_owed
                WHERE couple_id = \(couple) AND budget_item_id IN (
                    SELECT id FROM budget_items WHERE couple_id = \(couple) AND scenario_id = \(scenario))
                """
            ).prepared(as: "budget_linked_gifts")
        ).map(gift)
    }

    // MARK: Scenarios, folders, items

    /// Where a page of a listing begins: after the place the page carries, else (an id alone) after the place
    /// of the row its id names, which the couple must still have: a page after a row deleted since is refused,
    /// not empty. Nil for every row, or the first page. A listing's rows and its pages are in one order (what
    /// people see, then the id), so that a page is a slice of the listing.
    private func start<Row: ListedRow>(
        _ page: PageRequest<Row.OrderKey>?, _ record: BudgetRecord, couple: UUID, _ columns: StaticString,
        _ decode: (PostgresRow) throws -> Row
    ) async throws -> PageCursor<Row.OrderKey>? {
        guard let after = page?.after else { return nil }
        guard after.key == nil else { return after }
        let rows = try await run(
            """
            SELECT \(sql: columns) FROM \(identifier: Transaction.table(record))
            WHERE couple_id = \(couple) AND id = \(after.id)
            """, couple: couple)
        guard let row = rows.first else {
            throw BudgetError(.notFound, "no \(record.rawValue) \(after.id.uuidString.lowercased()) to page after")
        }
        return try decode(row).cursor
    }

    public func scenarios(couple: UUID, page: PageRequest<Date>?) async throws -> [Scenario] {
        let start = try await start(page, .scenario, couple: couple, Self.scenarioColumns, Self.scenario)
        return try await run(
            """
            SELECT \(sql: Self.scenarioColumns) FROM budget_scenarios
            WHERE couple_id = \(couple) AND (\(start?.id)::uuid IS NULL OR (created_at, id) > (\(start?.key), \(start?.id)))
            ORDER BY created_at, id LIMIT \(page?.limit)
            """, couple: couple
        ).map(Self.scenario)
    }

    /// A primary scenario is made under the couple's budget lock, as `setPrimaryScenario` does: unserialised, two
    /// processes would each clear the primary they see and then meet at the one-primary index.
    public func createScenario(couple: UUID, name: String, primary: Bool, as actor: Actor) async throws -> Scenario {
        try await transaction(couple, as: actor) { connection in
            if primary {
                try await Self.lockBudget(couple, connection)
                try await connection.query(
                    "UPDATE budget_scenarios SET is_primary = false WHERE couple_id = \(couple) AND is_primary")
            }
            return try Self.scenario(
                try await connection.query(
                    """
                    INSERT INTO budget_scenarios (couple_id, name, is_primary) VALUES (\(couple), \(name), \(primary))
                    RETURNING \(sql: Self.scenarioColumns)
                    """)[0])
        }
    }

    /// Under the couple's budget lock, as deletes are: a clone counts rows (budget_row_limits) in four tables, and a
    /// cascading delete in the opposite order; unserialised, the two could deadlock.
    public func cloneScenario(couple: UUID, source: UUID, name: String, as actor: Actor) async throws -> Scenario {
        try await transaction(couple, as: actor) { connection in
            try await Self.lockBudget(couple, connection)
            let id: UUID = try await connection.query(
                "SELECT clone_budget_scenario(\(couple), \(source), \(name)) AS id")[0].decode("id")
            return try Self.scenario(
                try await connection.query(
                    "SELECT \(sql: Self.scenarioColumns) FROM budget_scenarios WHERE couple_id = \(couple) AND id = \(id)"
                )[0])
        }
    }

    /// Under the couple's budget lock: the primary another process made while this one waited is committed, and
    /// cleared here, by the time the lock is held.
    public func setPrimaryScenario(couple: UUID, scenario: UUID, as actor: Actor) async throws -> Scenario {
        try await transaction(couple, as: actor) { connection in
            try await Self.lockBudget(couple, connection)
            try await connection.query(
                "UPDATE budget_scenarios SET is_primary = false WHERE couple_id = \(couple) AND is_primary AND id <> \(scenario)"
            )
            let rows = try await connection.query(
                """
                UPDATE budget_scenarios SET is_primary = true WHERE couple_id = \(couple) AND id = \(scenario)
                RETURNING \(sql: Self.scenarioColumns)
                """)
            guard let row = rows.first else { throw BudgetRecord.scenario.notFound }
            return try Self.scenario(row)
        }
    }

    public func renameScenario(couple: UUID, scenario: UUID, to name: String, as actor: Actor) async throws
        -> Scenario
    {
        try await transaction(couple, as: actor) { connection in
            let rows = try await connection.query(
                """
                UPDATE budget_scenarios SET name = \(name) WHERE couple_id = \(couple) AND id = \(scenario)
                RETURNING \(sql: Self.scenarioColumns)
                """)
            guard let row = rows.first else { throw BudgetRecord.scenario.notFound }
            return try Self.scenario(row)
        }
    }

    public func folders(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [Folder] {
        let start = try await start(page, .folder, couple: couple, Self.folderColumns, Self.folder)
        return try await run(
            """
            SELECT \(sql: Self.folderColumns) FROM budget_folders
            WHERE couple_id = \(couple) AND scenario_id = \(scenario)
              AND (\(start?.id)::uuid IS NULL OR (\(sql: Self.byName), id) > (
                   SELECT \(sql: Self.byName), \(start?.id) FROM (SELECT \(start?.key)::text AS name) place))
            ORDER BY \(sql: Self.byName), id LIMIT \(page?.limit)
            """, couple: couple
        ).map(Self.folder)
    }

    public func createFolder(couple: UUID, scenario: UUID, name: String, as actor: Actor) async throws -> Folder {
        let id: UUID = try await transaction(couple, as: actor) { connection in
            try await connection.query(
                "INSERT INTO budget_folders (couple_id, scenario_id, name) VALUES (\(couple), \(scenario), \(name)) RETURNING id"
            )[0].decode("id")
        }
        return Folder(id: id, scenarioID: scenario, name: name)
    }

    public func renameFolder(couple: UUID, folder: UUID, to name: String, as actor: Actor) async throws -> Folder {
        try await transaction(couple, as: actor) { connection in
            let rows = try await connection.query(
                """
                UPDATE budget_folders SET name = \(name) WHERE couple_id = \(couple) AND id = \(folder)
                RETURNING \(sql: Self.folderColumns)
                """)
            guard let row = rows.first else { throw BudgetRecord.folder.notFound }
            return try Self.folder(row)
        }
    }

    public func createItem(couple: UUID, _ item: BudgetItem, as actor: Actor) async throws -> BudgetItem {
        try await write(
            """
            INSERT INTO budget_items (couple_id, id, scenario_id, folder_id, name, category, event, budgeted)
            VALUES (\(couple), \(item.id), \(item.scenarioID), \(item.folderID), \(item.name), \(item.category),
                    \(item.event), \(item.budgeted))
            """, couple: couple, as: actor)
        return item
    }

    // MARK: Expenses, payments, gifts

    /// By due date (those without one last), then name.
    public func expenses(couple: UUID, page: PageRequest<DueAndName>?) async throws -> [Expense] {
        let start = try await start(page, .expense, couple: couple, Self.expenseColumns, Self.expense)
        return try await run(
            """
            SELECT \(sql: Self.expenseColumns) FROM expenses
            WHERE couple_id = \(couple)
              AND (\(start?.id)::uuid IS NULL OR (coalesce(due_date, 'infinity'), \(sql: Self.byName), id) > (
                   SELECT coalesce(due_date, 'infinity'), \(sql: Self.byName), \(start?.id) FROM (
                       SELECT \(start?.key?.dueDate?.description)::date AS due_date, \(start?.key?.name)::text AS name
                   ) place))
            ORDER BY coalesce(due_date, 'infinity'), \(sql: Self.byName), id LIMIT \(page?.limit)
            """, couple: couple
        ).map(Self.expense)
    }

    public func createExpense(couple: UUID, _ expense: Expense, as actor: Actor) async throws -> Expense {
        try await write(
            """
            INSERT INTO expenses (couple_id, id, name, vendor, amount, due_date, category)
            VALUES (\(couple), \(expense.id), \(expense.name), \(expense.vendor), \(expense.amount),
                    \(expense.dueDate?.description)::date, \(expense.category))
            """, couple: couple, as: actor)
        return expense
    }

    /// One statement: the expense's row, joined to its payments by date (or to a page of them, see `start`)
    /// if it has any. Nil when the couple has no such expense.
    public func payments(couple: UUID, expense: UUID, page: PageRequest<CalendarDay>?) async throws
        -> [ExpensePayment]?
    {
        let start = try await start(page, .payment, couple: couple, Self.paymentColumns, Self.payment)
        let rows = try await run(
            """
            SELECT p.id, e.id AS expense_id, p.amount, to_char(p.paid_at, 'YYYY-MM-DD') AS paid_at
            FROM expenses e LEFT JOIN LATERAL (
                SELECT * FROM expense_payments p
                WHERE p.couple_id = e.couple_id AND p.expense_id = e.id
                  AND (\(start?.id)::uuid IS NULL OR (p.paid_at, p.id) > (\(start?.key?.description)::date, \(start?.id)))
                ORDER BY p.paid_at, p.id LIMIT \(page?.limit)
            ) p ON true
            WHERE e.couple_id = \(couple) AND e.id = \(expense) ORDER BY p.paid_at, p.id
            """, couple: couple)
        guard !rows.isEmpty else { return nil }
        return try rows.filter { try $0.decode("id", as: UUID?.self) != nil }.map(Self.payment)
    }

    public func payments(couple: UUID, expenses: [UUID]?) async throws -> [ExpensePayment] {
        try await run(
            """
            SELECT \(sql: Self.paymentColumns) FROM expense_payments
            WHERE couple_id = \(couple) AND (\(expenses)::uuid[] IS NULL OR expense_id = ANY(\(expenses)))
            ORDER BY paid_at, id
            """, couple: couple
        ).map(Self.payment)
    }

    public func addPayment(couple: UUID, _ payment: ExpensePayment, as actor: Actor) async throws -> ExpensePayment {
        try await write(
            """
            INSERT INTO expense_payments (couple_id, id, expense_id, amount, paid_at)
            VALUES (\(couple), \(payment.id), \(payment.expenseID), \(payment.amount), \(payment.paidAt.description)::date)
            """, couple: couple, as: actor)
        return payment
    }

    public func gifts(couple: UUID, page: PageRequest<String>?) async throws -> [Gift] {
        let start = try await start(page, .gift, couple: couple, Self.giftColumns, Self.gift)
        return try await run(
            """
            SELECT \(sql: Self.giftColumns) FROM gifts_and_owed
            WHERE couple_id = \(couple)
              AND (\(start?.id)::uuid IS NULL OR (\(sql: Self.byFromName), id) > (
                   SELECT \(sql: Self.byFromName), \(start?.id) FROM (SELECT \(start?.key)::text AS from_name) place))
            ORDER BY \(sql: Self.byFromName), id LIMIT \(page?.limit)
            """, couple: couple
        ).map(Self.gift)
    }

    public func createGift(couple: UUID, _ gift: Gift, as actor: Actor) async throws -> Gift {
        try await write(
            """
            INSERT INTO gifts_and_owed (couple_id, id, from_name, amount, received, budget_item_id)
            VALUES (\(couple), \(gift.id), \(gift.from), \(gift.amount), \(gift.received), \(gift.budgetItemID))
            """, couple: couple, as: actor)
        return gift
    }

    // MARK: Allocation

    public func withBudgetLock<T: Sendable>(
        couple: UUID, as actor: Actor, _ body: (any BudgetTransaction) async throws -> T
    ) async throws -> T {
        try await transaction(couple, as: actor) { connection in
            try await Self.lockBudget(couple, connection)
            return try await body(Transaction(couple: couple, connection: connection))
        }
    }

    /// Takes the couple's budget lock, held to the end of the transaction: a second recalculation for the
    /// couple, from any process, waits here and then reads what the first committed.
    private static func lockBudget(_ couple: UUID, _ connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(couple.uuidString), 0))")
    }

    private struct Transaction: BudgetTransaction {
        let couple: UUID
        let connection: PostgresConnection

        func expenses(_ ids: [UUID]) async throws -> [Expense] {
            try await connection.query(
                "SELECT \(sql: PostgresBudgetRepository.expenseColumns) FROM expenses WHERE couple_id = \(couple) AND id = ANY(\(ids))"
            ).map(PostgresBudgetRepository.expense)
        }

        func item(_ id: UUID) async throws -> BudgetItem? { try await items([id]).first }

        func items(_ ids: [UUID]) async throws -> [BudgetItem] {
            try await connection.query(
                """
                SELECT \(sql: PostgresBudgetRepository.itemColumns) FROM budget_items
                WHERE couple_id = \(couple) AND id = ANY(\(ids))
                """
            ).map(PostgresBudgetRepository.item)
        }

        func setExpenseAmount(_ id: UUID, _ amount: Decimal) async throws {
            try await connection.query(
                "UPDATE expenses SET amount = \(amount) WHERE couple_id = \(couple) AND id = \(id)")
        }

        func setExpenseDetails(_ expense: Expense) async throws {
            try await connection.query(
                """
                UPDATE expenses SET name = \(expense.name), vendor = \(expense.vendor),
                       due_date = \(expense.dueDate?.description)::date, category = \(expense.category)
                WHERE couple_id = \(couple) AND id = \(expense.id)
                """)
        }

        func gift(_ id: UUID) async throws -> Gift? {
            try await connection.query(
                """
                SELECT \(sql: PostgresBudgetRepository.giftColumns) FROM gifts_and_owed
                WHERE couple_id = \(couple) AND id = \(id)
                """
            ).first.map(PostgresBudgetRepository.gift)
        }

        func setGift(_ gift: Gift) async throws {
            try await connection.query(
                """
                UPDATE gifts_and_owed SET from_name = \(gift.from), amount = \(gift.amount), received = \(gift.received),
                       budget_item_id = \(gift.budgetItemID)
                WHERE couple_id = \(couple) AND id = \(gift.id)
                """)
        }

        func setItemDetails(_ item: BudgetItem) async throws {
            try await connection.query(
                """
                UPDATE budget_items SET name = \(item.name), category = \(item.category), event = \(item.event),
                       folder_id = \(item.folderID)
                WHERE couple_id = \(couple) AND id = \(item.id)
                """)
        }

        func setItemBudgeted(_ id: UUID, _ amount: Decimal) async throws {
            try await connection.query(
                "UPDATE budget_items SET budgeted = \(amount) WHERE couple_id = \(couple) AND id = \(id)")
        }

        func allocations(scenario: UUID?, expenses: [UUID]) async throws -> [Allocation] {
            try await connection.query(
                """
                SELECT \(sql: PostgresBudgetRepository.allocationColumns) FROM expense_allocations
                WHERE couple_id = \(couple) AND expense_id = ANY(\(expenses))
                  AND (\(scenario)::uuid IS NULL OR scenario_id = \(scenario))
                """
            ).map(PostgresBudgetRepository.allocation)
        }

        func allocations(item: UUID) async throws -> [Allocation] {
            try await connection.query(
                """
                SELECT \(sql: PostgresBudgetRepository.allocationColumns) FROM expense_allocations
                WHERE couple_id = \(couple) AND budget_item_id = \(item)
                """
            ).map(PostgresBudgetRepository.allocation)
        }

        func replaceAllocations(scenario: UUID, expenses: [UUID], with allocations: [Allocation]) async throws {
            let expenseIDs = allocations.map(\.expenseID)
            let itemIDs = allocations.map(\.budgetItemID)
            let amounts = allocations.map(\.amount.description)
            try await connection.query(
                """
                DELETE FROM expense_allocations
                WHERE couple_id = \(couple) AND scenario_id = \(scenario) AND expense_id = ANY(\(expenses))
                  AND (expense_id, budget_item_id) NOT IN (
                      SELECT e, i FROM unnest(\(expenseIDs)::uuid[], \(itemIDs)::uuid[]) AS t(e, i))
                """)
            guard !allocations.isEmpty else { return }
            // Selected through the scenario's row, so that Citus runs the insert on the couple's worker as one
            // statement (rows it would copy there from the coordinator lose their errors' SQLSTATEs). An
            // allocation kept at its amount is left alone.
            try await connection.query(
                """
                INSERT INTO expense_allocations AS a (couple_id, scenario_id, expense_id, budget_item_id, amount)
                SELECT s.couple_id, s.id, e, i, a::numeric
                FROM budget_scenarios s, unnest(\(expenseIDs)::uuid[], \(itemIDs)::uuid[], \(amounts)::text[]) AS t(e, i, a)
                WHERE s.couple_id = \(couple) AND s.id = \(scenario)
                ON CONFLICT (couple_id, scenario_id, expense_id, budget_item_id) DO UPDATE SET amount = excluded.amount
                WHERE a.amount <> excluded.amount
                """)
        }

        /// What depends on the record goes by the schema's foreign keys (cascades, SET NULL).
        func delete(_ record: BudgetRecord, id: UUID) async throws {
            if record == .scenario {
                // Locked, so that it cannot become the primary between this look and the delete.
                let found = try await connection.query(
                    "SELECT is_primary FROM budget_scenarios WHERE couple_id = \(couple) AND id = \(id) FOR UPDATE")
                guard let row = found.first else { throw record.notFound }
                guard !(try row.decode("is_primary", as: Bool.self)) else { throw BudgetRecord.primaryScenarioKept }
            }
            let deleted = try await connection.execute(
                "DELETE FROM \(identifier: Self.table(record)) WHERE couple_id = \(couple) AND id = \(id)")
            guard deleted == 1 else { throw record.notFound }
        }

        static func table(_ record: BudgetRecord) -> String {
            switch record {
            case .scenario: "budget_scenarios"
            case .folder: "budget_folders"
            case .item: "budget_items"
            case .expense: "expenses"
            case .payment: "expense_payments"
            case .gift: "gifts_and_owed"
            }
        }
    }

    // MARK: Limits

    public func rowLimits(couple: UUID?) async throws -> [BudgetRowLimit] {
        let rows = try await run(
            """
            SELECT l.table_name, l.max_rows, c.row_count,
                   EXISTS (SELECT 1 FROM couples WHERE id = \(couple)) AS couple_found
            FROM budget_row_limits l
            LEFT JOIN budget_row_counts c ON c.couple_id = \(couple) AND c.table_name = l.table_name
            ORDER BY l.table_name
            """, couple: nil)
        if let couple, let first = rows.first, !(try first.decode("couple_found", as: Bool.self)) {
            throw BudgetError(.notFound, "couple \(couple.uuidString.lowercased()) does not exist")
        }
        return try rows.map { row in
            BudgetRowLimit(
                table: try row.decode("table_name"), maxRows: try row.decode("max_rows"),
                rows: couple == nil ? nil : try row.decode("row_count", as: Int?.self) ?? 0)
        }
    }

    /// In one transaction.
    public func setRowLimits(_ limits: [(table: String, maxRows: Int)]) async throws {
        do {
            try await pool.withTransaction { connection in
                for (table, maxRows) in limits {
                    let updated = try await connection.execute(
                        "UPDATE budget_row_limits SET max_rows = \(maxRows) WHERE table_name = \(table)")
                    guard updated == 1 else {
                        let tables: [String] = try await connection.query(
                            "SELECT table_name FROM budget_row_limits ORDER BY table_name"
                        ).map { try $0.decode("table_name") }
                        throw BudgetError(
                            .invalidInput,
                            "\(quoted(table)) is not a budget table; the tables are \(tables.joined(separator: ", "))")
                    }
                }
            }
        } catch let error as PostgresError {
            throw Self.budgetError(error)
        }
    }

    // MARK: Rows

    /// Names in the order people read them: regardless of letter case, then as written, in code points
    /// whatever the database's collation (as InMemoryBudgetRepository sorts them), which lets PostgreSQL sort by
    /// comparing bytes. Listings and their pages' keysets use the same expression, so that pages are slices.
    static let byName: StaticString = #"lower(name) COLLATE "C", name COLLATE "C""#
    static let byFromName: StaticString = #"lower(from_name) COLLATE "C", from_name COLLATE "C""#

    // One column list per table, which its decoder below reads.
    static let scenarioColumns: StaticString = "id, name, is_primary, created_at"
    static let folderColumns: StaticString = "id, scenario_id, name"
    static let itemColumns: StaticString = "id, scenario_id, folder_id, name, category, event, budgeted"
    static let expenseColumns: StaticString =
        "id, name, vendor, amount, to_char(due_date, 'YYYY-MM-DD') AS due_date, category"
    static let paymentColumns: StaticString = "id, expense_id, amount, to_char(paid_at, 'YYYY-MM-DD') AS paid_at"
    static let allocationColumns: StaticString = "scenario_id, expense_id, budget_item_id, amount"
    static let giftColumns: StaticString = "id, from_name, amount, received, budget_item_id"

    private static func scenario(_ row: PostgresRow) throws -> Scenario {
        Scenario(
            id: try row.decode("id"), name: try row.decode("name"), isPrimary: try row.decode("is_primary"),
            createdAt: try row.decode("created_at"))
    }

    private static func folder(_ row: PostgresRow) throws -> Folder {
        Folder(id: try row.decode("id"), scenarioID: try row.decode("scenario_id"), name: try row.decode("name"))
    }

    private static func item(_ row: PostgresRow) throws -> BudgetItem {
        BudgetItem(
            id: try row.decode("id"), scenarioID: try row.decode("scenario_id"), folderID: try row.decode("folder_id"),
            name: try row.decode("name"), category: try row.decode("category"), event: try row.decode("event"),
            budgeted: try row.decode("budgeted"))
    }

    private static func expense(_ row: PostgresRow) throws -> Expense {
        Expense(
            id: try row.decode("id"), name: try row.decode("name"), vendor: try row.decode("vendor"),
            amount: try row.decode("amount"),
            dueDate: try row.decode("due_date", as: String?.self).flatMap(CalendarDay.init),
            category: try row.decode("category"))
    }

    /// A payment's date is a day of the years 1 to 9999 (sql/0032), which `to_char` writes as CalendarDay reads.
    private static func payment(_ row: PostgresRow) throws -> ExpensePayment {
        ExpensePayment(
            id: try row.decode("id"), expenseID: try row.decode("expense_id"), amount: try row.decode("amount"),
            paidAt: CalendarDay(try row.decode("paid_at"))!)
    }

    private static func allocation(_ row: PostgresRow) throws -> Allocation {
        Allocation(
            scenarioID: try row.decode("scenario_id"), expenseID: try row.decode("expense_id"),
            budgetItemID: try row.decode("budget_item_id"), amount: try row.decode("amount"))
    }

    private static func gift(_ row: PostgresRow) throws -> Gift {
        Gift(
            id: try row.decode("id"), from: try row.decode("from_name"), amount: try row.decode("amount"),
            received: try row.decode("received"), budgetItemID: try row.decode("budget_item_id"))
    }

    // MARK: Running

    /// One write statement, in a transaction that names `actor`.
    private func write(_ query: PostgresQuery, couple: UUID, as actor: Actor) async throws {
        try await transaction(couple, as: actor) { connection in _ = try await connection.query(query) }
    }

    /// Runs a read: of `couple`'s budget where `reads` sends it, else (nil: not one couple's) through `pool`.
    private func run(_ query: PostgresQuery, couple: UUID?) async throws -> PostgresRows {
        try await reading(couple) { try await $0.query(query) }
    }

    /// `run` for one couple, as the overview's reads take it.
    private func reader(_ couple: UUID) -> Statement {
        { try await run($0, couple: couple) }
    }

    private func reading<T: Sendable>(_ couple: UUID?, _ body: (PostgresConnectionPool) async throws -> T)
        async throws -> T
    {
        do {
            guard let couple, let reads else { return try await body(pool) }
            return try await reads.read(couple, body)
        } catch let error as PostgresError {
            throw Self.budgetError(error)
        }
    }

    /// Runs a write in a transaction that holds the couple's row against its deletion to the end
    /// (`rbac.hold_couple`) and names its actor, for the audit log, both in the round trip that begins it.
    private func transaction<T: Sendable>(
        _ couple: UUID, as actor: Actor, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            let hold: PostgresQuery = "SELECT rbac.hold_couple(\(couple))"
            return try await pool.withTransaction(opening: [hold] + Acting.statements(actor, on: pool), body)
        } catch let error as PostgresError {
            throw Self.budgetError(error)
        }
    }

    /// A reference to a row the couple does not have is "not found", naming the record; a refused value is
    /// "invalid input".
    private static func budgetError(_ error: PostgresError) -> any Error {
        switch error.sqlState {
        case .foreignKeyViolation:
            return referencedRecord(error)?.notFound
                ?? BudgetError(.notFound, "no such scenario, folder, budget item or expense in this couple")
        case .checkViolation:
            return BudgetError(.invalidInput, "a value is out of range (\(error.constraint ?? "check"))")
        case .uniqueViolation:
            return BudgetError(.alreadyExists, "that already exists")
        default:
            let mapped = domainError(error)
            return (mapped as? any CodedError).map { BudgetError($0) } ?? mapped
        }
    }

    /// The record the foreign key a write broke refers to, by the key's last column: the key is named
    /// `<table>_<columns>_fkey`. Citus passes a worker's error on without the constraint's field, but its message
    /// names the shard's key (the same name and the shard's number).
    private static func referencedRecord(_ error: PostgresError) -> BudgetRecord? {
        let columns: [(String, BudgetRecord)] = [
            ("folder_id", .folder), ("budget_item_id", .item), ("expense_id", .expense), ("scenario_id", .scenario),
        ]
        let name = error.constraint ?? error.message
        return columns.first { name.contains("_\($0.0)_fkey") }?.1
    }
}
