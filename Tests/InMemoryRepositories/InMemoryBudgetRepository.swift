import Budget
import Foundation
import Synchronization
import Tenancy

/// Budget storage in memory, for fast tests of the services' rules. A transaction works on a copy of the
/// data and publishes it when its body returns; the couple's lock is a per-repository async lock. It keeps no
/// audit log, so the actors of writes go unrecorded, and no row limits (it lists none and takes none): those are
/// PostgreSQL's, and their tests run there.
public final class InMemoryBudgetRepository: BudgetRepository {
    public struct Data: Sendable, Equatable {
        public var revision: Int64 = 0
        public var scenarios: [Scenario] = []
        public var folders: [Folder] = []
        public var items: [BudgetItem] = []
        public var expenses: [Expense] = []
        public var payments: [ExpensePayment] = []
        public var allocations: [Allocation] = []
        public var gifts: [Gift] = []
    }

    private let data = Mutex(Data())
    private let lock = AsyncLock()

    public init() {}

    /// A copy of everything stored.
    public var snapshot: Data { data.withLock { $0 } }

    private func read<T>(_ body: (Data) throws -> T) rethrows -> T { try data.withLock { try body($0) } }

    private func write<T>(_ body: (inout Data) throws -> T) rethrows -> T {
        try data.withLock { data in
            let before = data
            let value = try body(&data)
            // As in the database: a write that changes nothing leaves the revision.
            if data != before { data.revision += 1 }
            return value
        }
    }

    public func revision(couple: UUID, scenario: UUID) async throws -> (revision: Int64, scenarioExists: Bool) {
        read { ($0.revision, Self.scenarioExists(scenario, in: $0)) }
    }

    public func items(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [BudgetItem] {
        try read {
            try Self.listed(.item, Self.items(of: scenario, in: $0), page, by: Self.byName)
        }
    }

    public func allocationCents(couple: UUID, scenario: UUID) async throws -> [[AllocationCents]] {
        read { [Self.allocationCents(of: scenario, in: $0)] }
    }

    public func expenseNames(couple: UUID) async throws -> [UUID: String] {
        read(Self.expenseNames)
    }

    public func linkedGifts(couple: UUID, scenario: UUID) async throws -> [Gift] {
        read { Self.linkedGifts(of: scenario, in: $0) }
    }

    public func overviewSnapshot(couple: UUID, scenario: UUID) async throws -> OverviewSnapshot {
        let data = snapshot
        return OverviewSnapshot(
            revision: data.revision, scenarioExists: Self.scenarioExists(scenario, in: data),
            items: Self.items(of: scenario, in: data), allocations: [Self.allocationCents(of: scenario, in: data)],
            expenseNames: Self.expenseNames(data), gifts: Self.linkedGifts(of: scenario, in: data))
    }

    private static func scenarioExists(_ scenario: UUID, in data: Data) -> Bool {
        data.scenarios.contains { $0.id == scenario }
    }

    private static func items(of scenario: UUID, in data: Data) -> [BudgetItem] {
        data.items.filter { $0.scenarioID == scenario }
    }

    private static func allocationCents(of scenario: UUID, in data: Data) -> [AllocationCents] {
        data.allocations.filter { $0.scenarioID == scenario }
            .sorted { ($0.budgetItemID, $0.expenseID) < ($1.budgetItemID, $1.expenseID) }
            .map {
                AllocationCents(expenseID: $0.expenseID, budgetItemID: $0.budgetItemID, cents: Money.cents($0.amount))
            }
    }

    private static func expenseNames(_ data: Data) -> [UUID: String] {
        Dictionary(data.expenses.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
    }

    private static func linkedGifts(of scenario: UUID, in data: Data) -> [Gift] {
        let items = Set(items(of: scenario, in: data).map(\.id))
        return data.gifts.filter { $0.budgetItemID.map(items.contains) == true }
    }

    public func scenarios(couple: UUID, page: PageRequest<Date>?) async throws -> [Scenario] {
        try read { try Self.listed(.scenario, $0.scenarios, page, by: Self.inOrder) }
    }

    public func createScenario(couple: UUID, name: String, primary: Bool, as actor: Actor) async throws -> Scenario {
        write { data in
            let scenario = Scenario(id: UUID(), name: name, isPrimary: primary, createdAt: Date())
            if primary {
                data.scenarios = data.scenarios.map {
                    Scenario(id: $0.id, name: $0.name, isPrimary: false, createdAt: $0.createdAt)
                }
            }
            data.scenarios.append(scenario)
            return scenario
        }
    }

    public func cloneScenario(couple: UUID, source: UUID, name: String, as actor: Actor) async throws -> Scenario {
        try write { data in
            guard data.scenarios.contains(where: { $0.id == source }) else { throw BudgetRecord.scenario.notFound }
            let copy = Scenario(id: UUID(), name: name, isPrimary: false, createdAt: Date())
            var newIDs: [UUID: UUID] = [:]
            func mapped(_ id: UUID) -> UUID {
                if let known = newIDs[id] { return known }
                newIDs[id] = UUID()
                return newIDs[id]!
            }
            data.scenarios.append(copy)
            data.folders += data.folders.filter { $0.scenarioID == source }.map {
                Folder(id: mapped($0.id), scenarioID: copy.id, name: $0.name)
            }
            data.items += data.items.filter { $0.scenarioID == source }.map {
                BudgetItem(
                    id: mapped($0.id), scenarioID: copy.id, folderID: $0.folderID.map(mapped), name: $0.name,
                    category: $0.category, event: $0.event, budgeted: $0.budgeted)
            }
            data.allocations += data.allocations.filter { $0.scenarioID == source }.map {
                Allocation(
                    scenarioID: copy.id, expenseID: $0.expenseID, budgetItemID: mapped($0.budgetItemID),
                    amount: $0.amount)
            }
            return copy
        }
    }

    public func setPrimaryScenario(couple: UUID, scenario: UUID, as actor: Actor) async throws -> Scenario {
        try write { data in
            guard let found = data.scenarios.first(where: { $0.id == scenario }) else {
                throw BudgetRecord.scenario.notFound
            }
            data.scenarios = data.scenarios.map {
                Scenario(id: $0.id, name: $0.name, isPrimary: $0.id == scenario, createdAt: $0.createdAt)
            }
            return Scenario(id: found.id, name: found.name, isPrimary: true, createdAt: found.createdAt)
        }
    }

    public func renameScenario(couple: UUID, scenario: UUID, to name: String, as actor: Actor) async throws
        -> Scenario
    {
        try write { data in
            guard let index = data.scenarios.firstIndex(where: { $0.id == scenario }) else {
                throw BudgetRecord.scenario.notFound
            }
            let found = data.scenarios[index]
            let renamed = Scenario(id: scenario, name: name, isPrimary: found.isPrimary, createdAt: found.createdAt)
            data.scenarios[index] = renamed
            return renamed
        }
    }

    public func folders(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [Folder] {
        try read {
            try Self.listed(
                .folder, $0.folders.filter { $0.scenarioID == scenario }, page, by: Self.byName)
        }
    }

    public func createFolder(couple: UUID, scenario: UUID, name: String, as actor: Actor) async throws -> Folder {
        try write { data in
            guard data.scenarios.contains(where: { $0.id == scenario }) else { throw BudgetRecord.scenario.notFound }
            let folder = Folder(id: UUID(), scenarioID: scenario, name: name)
            data.folders.append(folder)
            return folder
        }
    }

    public func renameFolder(couple: UUID, folder: UUID, to name: String, as actor: Actor) async throws -> Folder {
        try write { data in
            guard let index = data.folders.firstIndex(where: { $0.id == folder }) else {
                throw BudgetRecord.folder.notFound
            }
            let renamed = Folder(id: folder, scenarioID: data.folders[index].scenarioID, name: name)
            data.folders[index] = renamed
            return renamed
        }
    }

    public func createItem(couple: UUID, _ item: BudgetItem, as actor: Actor) async throws -> BudgetItem {
        try write { data in
            guard data.scenarios.contains(where: { $0.id == item.scenarioID }) else {
                throw BudgetRecord.scenario.notFound
            }
            // As the schema's key (couple, scenario, folder): a folder of the item's own scenario.
            if let folder = item.folderID {
                guard data.folders.contains(where: { $0.id == folder && $0.scenarioID == item.scenarioID }) else {
                    throw BudgetRecord.folder.notFound
                }
            }
            data.items.append(item)
            return item
        }
    }

    public func expenses(couple: UUID, page: PageRequest<DueAndName>?) async throws -> [Expense] {
        try read {
            try Self.listed(
                .expense, $0.expenses, page,
                by: {
                    let (due, otherDue) = ($0.key.dueDate?.description ?? "~", $1.key.dueDate?.description ?? "~")
                    return due == otherDue ? Self.byName(($0.key.name, $0.id), ($1.key.name, $1.id)) : due < otherDue
                })
        }
    }

    public func createExpense(couple: UUID, _ expense: Expense, as actor: Actor) async throws -> Expense {
        write { data in
            data.expenses.append(expense)
            return expense
        }
    }

    public func payments(couple: UUID, expenses: [UUID]?) async throws -> [ExpensePayment] {
        read { data in expenses.map { ids in data.payments.filter { ids.contains($0.expenseID) } } ?? data.payments }
    }

    public func payments(couple: UUID, expense: UUID, page: PageRequest<CalendarDay>?) async throws -> [ExpensePayment]?
    {
        try read { data in
            guard data.expenses.contains(where: { $0.id == expense }) else { return nil }
            let payments = data.payments.filter { $0.expenseID == expense }
            return try Self.listed(.payment, payments, page, by: Self.inOrder)
        }
    }

    public func addPayment(couple: UUID, _ payment: ExpensePayment, as actor: Actor) async throws -> ExpensePayment {
        try write { data in
            guard data.expenses.contains(where: { $0.id == payment.expenseID }) else {
                throw BudgetRecord.expense.notFound
            }
            data.payments.append(payment)
            return payment
        }
    }

    public func gifts(couple: UUID, page: PageRequest<String>?) async throws -> [Gift] {
        try read { try Self.listed(.gift, $0.gifts, page, by: Self.byName) }
    }

    public func rowLimits(couple: UUID?) async throws -> [BudgetRowLimit] { [] }

    public func setRowLimits(_ limits: [(table: String, maxRows: Int)]) async throws {
        guard let first = limits.first else { return }
        throw BudgetError(
            .invalidInput, "\(quoted(first.table)) is not a budget table here: no table has limits")
    }

    /// A row's place in a listing: its key in the listing's order, then its id.
    private typealias Place<Key> = (key: Key, id: UUID)

    /// Names as PostgresBudgetRepository orders them: regardless of letter case, then as written.
    private static func byName(_ one: Place<String>, _ other: Place<String>) -> Bool {
        (one.key.lowercased(), one.key, one.id) < (other.key.lowercased(), other.key, other.id)
    }

    private static func inOrder<Key: Comparable>(_ one: Place<Key>, _ other: Place<Key>) -> Bool {
        (one.key, one.id) < (other.key, other.id)
    }

    /// `rows` in the listing's order (`precedes`), all of them or with `page` those after its place, as
    /// PostgresBudgetRepository lists them: the place the page carries, else that of the row its id names,
    /// which must exist.
    private static func listed<Row: ListedRow>(
        _ record: BudgetRecord, _ rows: [Row], _ page: PageRequest<Row.OrderKey>?,
        by precedes: (Place<Row.OrderKey>, Place<Row.OrderKey>) -> Bool
    ) throws -> [Row] {
        // A row's own cursor always carries its key.
        func place(_ row: Row) -> Place<Row.OrderKey> { (row.cursor.key!, row.cursor.id) }
        let ordered = rows.sorted { precedes(place($0), place($1)) }
        guard let page else { return ordered }
        guard let after = page.after else { return Array(ordered.prefix(page.limit)) }
        guard
            let following = after.following(
                in: ordered, id: { place($0).id }, key: { place($0).key }, follows: { precedes(($1, $2), place($0)) })
        else {
            throw BudgetError(.notFound, "no \(record.rawValue) \(after.id.uuidString.lowercased()) to page after")
        }
        return Array(following.prefix(page.limit))
    }

    public func createGift(couple: UUID, _ gift: Gift, as actor: Actor) async throws -> Gift {
        try write { data in
            if let item = gift.budgetItemID, !data.items.contains(where: { $0.id == item }) {
                throw BudgetRecord.item.notFound
            }
            data.gifts.append(gift)
            return gift
        }
    }

    public func withBudgetLock<T: Sendable>(
        couple: UUID, as actor: Actor, _ body: (any BudgetTransaction) async throws -> T
    ) async throws -> T {
        try await lock.withLock {
            let transaction = Transaction(data: read { $0 })
            let value = try await body(transaction)
            write { $0 = transaction.data.withLock { $0 } }
            return value
        }
    }

    private final class Transaction: BudgetTransaction, Sendable {
        let data: Mutex<Data>
        init(data: Data) { self.data = Mutex(data) }

        func expenses(_ ids: [UUID]) async throws -> [Expense] {
            data.withLock { data in data.expenses.filter { ids.contains($0.id) } }
        }
        func item(_ id: UUID) async throws -> BudgetItem? { data.withLock { $0.items.first { $0.id == id } } }
        func items(_ ids: [UUID]) async throws -> [BudgetItem] {
            data.withLock { data in data.items.filter { ids.contains($0.id) } }
        }
        func setExpenseAmount(_ id: UUID, _ amount: Decimal) async throws {
            data.withLock { data in
                if let index = data.expenses.firstIndex(where: { $0.id == id }) { data.expenses[index].amount = amount }
            }
        }
        func setExpenseDetails(_ expense: Expense) async throws {
            data.withLock { data in
                guard let index = data.expenses.firstIndex(where: { $0.id == expense.id }) else { return }
                data.expenses[index] = Expense(
                    id: expense.id, name: expense.name, vendor: expense.vendor, amount: data.expenses[index].amount,
                    dueDate: expense.dueDate, category: expense.category)
            }
        }
        func gift(_ id: UUID) async throws -> Gift? { data.withLock { $0.gifts.first { $0.id == id } } }
        func setGift(_ gift: Gift) async throws {
            try data.withLock { data in
                if let item = gift.budgetItemID, !data.items.contains(where: { $0.id == item }) {
                    throw BudgetRecord.item.notFound
                }
                guard let index = data.gifts.firstIndex(where: { $0.id == gift.id }) else { return }
                data.gifts[index] = gift
            }
        }
        func setItemDetails(_ item: BudgetItem) async throws {
            try data.withLock { data in
                if let folder = item.folderID,
                    !data.folders.contains(where: { $0.id == folder && $0.scenarioID == item.scenarioID })
                {
                    throw BudgetRecord.folder.notFound
                }
                guard let index = data.items.firstIndex(where: { $0.id == item.id }) else { return }
                data.items[index] = BudgetItem(
                    id: item.id, scenarioID: item.scenarioID, folderID: item.folderID, name: item.name,
                    category: item.category, event: item.event, budgeted: data.items[index].budgeted)
            }
        }
        func setItemBudgeted(_ id: UUID, _ amount: Decimal) async throws {
            data.withLock { data in
                if let index = data.items.firstIndex(where: { $0.id == id }) { data.items[index].budgeted = amount }
            }
        }
        func allocations(scenario: UUID?, expenses: [UUID]) async throws -> [Allocation] {
            data.withLock { data in
                data.allocations.filter {
                    expenses.contains($0.expenseID) && (scenario == nil || $0.scenarioID == scenario)
                }
            }
        }
        func allocations(item: UUID) async throws -> [Allocation] {
            data.withLock { $0.allocations.filter { $0.budgetItemID == item } }
        }
        func replaceAllocations(scenario: UUID, expenses: [UUID], with allocations: [Allocation]) async throws {
            struct Pair: Hashable {
                let expense: UUID
                let item: UUID
            }
            func pair(_ allocation: Allocation) -> Pair {
                Pair(expense: allocation.expenseID, item: allocation.budgetItemID)
            }
            data.withLock { data in
                var wanted = Dictionary(allocations.map { (pair($0), $0) }) { $1 }
                // Kept allocations stay where they are (with their new amount), so that a re-split to the same
                // cents leaves the data as it was; removed ones go; new ones come last.
                data.allocations = data.allocations.compactMap { old in
                    guard old.scenarioID == scenario, expenses.contains(old.expenseID) else { return old }
                    return wanted.removeValue(forKey: pair(old))
                }
                data.allocations += allocations.filter { wanted[pair($0)] != nil }
            }
        }
        /// As the schema's foreign keys would: cascades, and gifts and items let go of what was deleted.
        func delete(_ record: BudgetRecord, id: UUID) async throws {
            try data.withLock { data in
                var items: Set<UUID> = []
                switch record {
                case .scenario:
                    guard let scenario = data.scenarios.first(where: { $0.id == id }) else { throw record.notFound }
                    guard !scenario.isPrimary else { throw BudgetRecord.primaryScenarioKept }
                    data.scenarios.removeAll { $0.id == id }
                    data.folders.removeAll { $0.scenarioID == id }
                    items = Set(data.items.filter { $0.scenarioID == id }.map(\.id))
                case .folder:
                    guard data.folders.contains(where: { $0.id == id }) else { throw record.notFound }
                    data.folders.removeAll { $0.id == id }
                    for index in data.items.indices where data.items[index].folderID == id {
                        data.items[index].folderID = nil
                    }
                case .item:
                    guard data.items.contains(where: { $0.id == id }) else { throw record.notFound }
                    items = [id]
                case .expense:
                    guard data.expenses.contains(where: { $0.id == id }) else { throw record.notFound }
                    data.expenses.removeAll { $0.id == id }
                    data.payments.removeAll { $0.expenseID == id }
                    data.allocations.removeAll { $0.expenseID == id }
                case .payment:
                    guard data.payments.contains(where: { $0.id == id }) else { throw record.notFound }
                    data.payments.removeAll { $0.id == id }
                case .gift:
                    guard data.gifts.contains(where: { $0.id == id }) else { throw record.notFound }
                    data.gifts.removeAll { $0.id == id }
                }
                data.items.removeAll { items.contains($0.id) }
                data.allocations.removeAll { items.contains($0.budgetItemID) }
                data.gifts = data.gifts.map { gift in
                    guard let item = gift.budgetItemID, items.contains(item) else { return gift }
                    return Gift(
                        id: gift.id, from: gift.from, amount: gift.amount, received: gift.received, budgetItemID: nil)
                }
            }
        }
    }
}

/// A lock for async code: one holder at a time, the others suspended (not blocked) in arrival order.
final class AsyncLock: Sendable {
    private let state = Mutex<(held: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func withLock<T>(_ body: () async throws -> T) async throws -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = state.withLock { state in
                if state.held {
                    state.waiters.append(continuation)
                    return false
                }
                state.held = true
                return true
            }
            if acquired { continuation.resume() }
        }
        defer {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.waiters.isEmpty {
                    state.held = false
                    return nil
                }
                return state.waiters.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}
