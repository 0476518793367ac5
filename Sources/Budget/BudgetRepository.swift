import Foundation
import Tenancy

/// Storage of one couple's budget: every method takes the couple first, and reads or writes only its rows.
/// Each read is one statement whatever the couple's size. Every write names the actor (checked by the service
/// before), which the audit log records.
public protocol BudgetRepository: Sendable {
    // MARK: The overview's reads

    /// The couple's budget revision (0 before its first budget write), and whether `scenario` is one of its
    /// scenarios.
    func revision(couple: UUID, scenario: UUID) async throws -> (revision: Int64, scenarioExists: Bool)
    /// The items of `scenario`, by name regardless of letter case ("apple" before "Banana"), then as written;
    /// with `page`, that page of them.
    func items(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [BudgetItem]
    /// The allocations of `scenario`, as the overview adds them up: in whole cents, in parts that the overview
    /// tallies in parallel. Each part is ordered by budget item and then by expense, and holds all of its items'
    /// allocations, so that each item's allocations come together (the overview's links keep this order).
    func allocationCents(couple: UUID, scenario: UUID) async throws -> [[AllocationCents]]
    /// The names of the couple's expenses, by id.
    func expenseNames(couple: UUID) async throws -> [UUID: String]
    /// The gifts set against items of `scenario`.
    func linkedGifts(couple: UUID, scenario: UUID) async throws -> [Gift]
    /// All five reads above, from one snapshot of the couple's budget (one read after another, in one
    /// transaction): slower than the reads in parallel, but consistent however many writes land meanwhile.
    func overviewSnapshot(couple: UUID, scenario: UUID) async throws -> OverviewSnapshot

    // MARK: Scenarios, folders, items

    /// The scenarios, oldest first; with `page`, that page of them.
    func scenarios(couple: UUID, page: PageRequest<Date>?) async throws -> [Scenario]
    /// Creates a scenario; a primary one takes over from the couple's previous primary.
    func createScenario(couple: UUID, name: String, primary: Bool, as actor: Actor) async throws -> Scenario
    /// Copies `source` with its folders, items and allocations, atomically.
    func cloneScenario(couple: UUID, source: UUID, name: String, as actor: Actor) async throws -> Scenario
    func setPrimaryScenario(couple: UUID, scenario: UUID, as actor: Actor) async throws -> Scenario
    /// Renames a scenario; throws `BudgetRecord.scenario.notFound` when the couple has no such scenario.
    func renameScenario(couple: UUID, scenario: UUID, to name: String, as actor: Actor) async throws -> Scenario
    /// The folders of `scenario`, by name as items are; with `page`, that page of them.
    func folders(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [Folder]
    func createFolder(couple: UUID, scenario: UUID, name: String, as actor: Actor) async throws -> Folder
    /// Renames a folder; throws `BudgetRecord.folder.notFound` when the couple has no such folder.
    func renameFolder(couple: UUID, folder: UUID, to name: String, as actor: Actor) async throws -> Folder
    func createItem(couple: UUID, _ item: BudgetItem, as actor: Actor) async throws -> BudgetItem

    // MARK: Expenses, payments, gifts

    /// The expenses, by due date (those without one last) and name as items are; with `page`, that page of them.
    func expenses(couple: UUID, page: PageRequest<DueAndName>?) async throws -> [Expense]
    func createExpense(couple: UUID, _ expense: Expense, as actor: Actor) async throws -> Expense
    /// The payments of `expenses`, or (nil) of every expense, oldest first.
    func payments(couple: UUID, expenses: [UUID]?) async throws -> [ExpensePayment]
    /// The payments of one expense, oldest first, or with `page` that page of them; nil when the couple has no
    /// such expense.
    func payments(couple: UUID, expense: UUID, page: PageRequest<CalendarDay>?) async throws -> [ExpensePayment]?
    func addPayment(couple: UUID, _ payment: ExpensePayment, as actor: Actor) async throws -> ExpensePayment
    /// The gifts and money owed, by whom from, as items are by name; with `page`, that page of them.
    func gifts(couple: UUID, page: PageRequest<String>?) async throws -> [Gift]
    func createGift(couple: UUID, _ gift: Gift, as actor: Actor) async throws -> Gift

    // MARK: Allocation

    /// Runs `body` in one transaction that holds the couple's budget lock (a transaction-scoped advisory lock in
    /// PostgreSQL), so recalculations for one couple never interleave, across processes too.
    func withBudgetLock<T: Sendable>(
        couple: UUID, as actor: Actor, _ body: (any BudgetTransaction) async throws -> T
    ) async throws -> T

    // MARK: Row limits (the operator's)

    /// Every budget table's limit of rows per couple, in table order; with `couple`, how many it holds.
    func rowLimits(couple: UUID?) async throws -> [BudgetRowLimit]

    /// Sets limits, all or none: a table that is not a budget table changes none of them.
    func setRowLimits(_ limits: [(table: String, maxRows: Int)]) async throws
}

/// A budget table's limit of rows per couple and, when a couple was named, how many it holds.
public struct BudgetRowLimit: Sendable, Hashable, Encodable {
    public let table: String
    public let maxRows: Int
    public let rows: Int?

    public init(table: String, maxRows: Int, rows: Int?) {
        self.table = table
        self.maxRows = maxRows
        self.rows = rows
    }
}

/// One allocation of an expense to a budget item, its amount in whole cents: exact for `numeric(12,2)`, and
/// tens of thousands of them add up in microseconds (each `Decimal` addition costs some hundred nanoseconds).
public struct AllocationCents: Sendable, Hashable {
    public let expenseID: UUID
    public let budgetItemID: UUID
    public let cents: Int64

    public init(expenseID: UUID, budgetItemID: UUID, cents: Int64) {
        self.expenseID = expenseID
        self.budgetItemID = budgetItemID
        self.cents = cents
    }
}

/// What an overview is computed from, read from one snapshot.
public struct OverviewSnapshot: Sendable {
    public let revision: Int64
    public let scenarioExists: Bool
    public let items: [BudgetItem]
    public let allocations: [[AllocationCents]]
    public let expenseNames: [UUID: String]
    public let gifts: [Gift]

    public init(
        revision: Int64, scenarioExists: Bool, items: [BudgetItem], allocations: [[AllocationCents]],
        expenseNames: [UUID: String], gifts: [Gift]
    ) {
        self.revision = revision
        self.scenarioExists = scenarioExists
        self.items = items
        self.allocations = allocations
        self.expenseNames = expenseNames
        self.gifts = gifts
    }
}

/// The reads and writes of an allocation recalculation, inside `withBudgetLock`.
public protocol BudgetTransaction {
    func expenses(_ ids: [UUID]) async throws -> [Expense]
    func item(_ id: UUID) async throws -> BudgetItem?
    func items(_ ids: [UUID]) async throws -> [BudgetItem]
    func setExpenseAmount(_ id: UUID, _ amount: Decimal) async throws
    /// Writes the expense's name, vendor, due date and category (not its amount).
    func setExpenseDetails(_ expense: Expense) async throws
    func gift(_ id: UUID) async throws -> Gift?
    /// Writes every field of the gift; a budget item the couple does not have is "not found".
    func setGift(_ gift: Gift) async throws
    func setItemBudgeted(_ id: UUID, _ amount: Decimal) async throws
    /// Writes the item's name, category, event and folder (not its budget); a folder not of the item's scenario
    /// is "not found".
    func setItemDetails(_ item: BudgetItem) async throws
    /// The allocations of `expenses`, in `scenario` or (nil) in every scenario.
    func allocations(scenario: UUID?, expenses: [UUID]) async throws -> [Allocation]
    /// The allocations to `item`.
    func allocations(item: UUID) async throws -> [Allocation]
    /// Makes `allocations` the allocations of `expenses` in `scenario`, writing only what differs: an
    /// allocation kept with its amount is not written, so the audit log shows what a re-split moved.
    func replaceAllocations(scenario: UUID, expenses: [UUID], with allocations: [Allocation]) async throws
    /// Deletes one record and what depends on it (see `BudgetRecord`); throws its `notFound` when the couple has
    /// no such record, and `primaryScenarioKept` for the primary scenario.
    func delete(_ record: BudgetRecord, id: UUID) async throws
}

extension BudgetTransaction {
    func expense(_ id: UUID) async throws -> Expense? { try await expenses([id]).first }
}
