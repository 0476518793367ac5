import Foundation
import Tenancy

/// One couple's budget services, as one actor: the seeds' BudgetAggregationService, BudgetAllocationService,
/// BudgetDevelopmentService and ExpensePaymentStatusService, scoped to the couple this actor is keyed by.
/// `BudgetRegistry` hands out one per couple, so work for a couple runs one operation at a time while other
/// couples run in parallel. Every operation first checks that the actor (the person acting) holds the
/// permission it needs.
public actor CoupleBudget {
    public nonisolated let couple: UUID
    private let repository: any BudgetRepository
    private let checker: any PermissionChecking
    private let metrics: OperationMetrics
    /// Overviews by scenario, each valid while the couple's budget revision is the one it was read at.
    private var overviews: [UUID: BudgetOverview] = [:]

    public init(
        couple: UUID, repository: any BudgetRepository, checker: any PermissionChecking,
        metrics: OperationMetrics = OperationMetrics()
    ) {
        self.couple = couple
        self.repository = repository
        self.checker = checker
        self.metrics = metrics
    }

    // MARK: Aggregation

    /// Per budget item of `scenario`: budgeted, spent (its allocations), received gifts, effective spend, and
    /// the linked expenses and gifts; plus totals. Besides the permission check, seven statements whatever the
    /// couple's size (one when the cached overview is still current): the revision, five data reads in
    /// parallel (the allocations in two halves), and the revision again. Every budget write advances the
    /// revision, so when it is unchanged no write committed while the reads ran, and they all saw one state.
    /// When it moved, the reads run once more; if it moves again, they run one after another from one
    /// snapshot, which writes cannot disturb.
    public func overview(scenario: UUID, as actor: Actor) async throws -> BudgetOverview {
        try await authorized("budget.overview", .budgetView, actor) {
            var (revision, exists) = try await repository.revision(couple: couple, scenario: scenario)
            for _ in 0..<Self.parallelAttempts {
                guard exists else { throw BudgetRecord.scenario.notFound }
                if let cached = overviews[scenario], cached.revision == revision { return cached }
                async let items = repository.items(couple: couple, scenario: scenario, page: nil)
                async let allocations = repository.allocationCents(couple: couple, scenario: scenario)
                async let expenseNames = repository.expenseNames(couple: couple)
                async let gifts = repository.linkedGifts(couple: couple, scenario: scenario)
                let (itemRows, allocationRows, names, giftRows) = try await (items, allocations, expenseNames, gifts)
                async let after = repository.revision(couple: couple, scenario: scenario)
                let overview = await BudgetRules.overview(
                    scenario: scenario, revision: revision, items: itemRows, allocations: allocationRows,
                    expenseNames: names, gifts: giftRows)
                let current = try await after
                if current.revision == revision {
                    overviews[scenario] = overview
                    return overview
                }
                (revision, exists) = current
            }
            let snapshot = try await metrics.measure("budget.overview_snapshot") {
                try await repository.overviewSnapshot(couple: couple, scenario: scenario)
            }
            guard snapshot.scenarioExists else { throw BudgetRecord.scenario.notFound }
            let overview = await BudgetRules.overview(
                scenario: scenario, revision: snapshot.revision, items: snapshot.items,
                allocations: snapshot.allocations, expenseNames: snapshot.expenseNames, gifts: snapshot.gifts)
            overviews[scenario] = overview
            return overview
        }
    }

    /// How often the reads run in parallel before an overview reads from one snapshot instead.
    static let parallelAttempts = 2

    // MARK: Development

    /// The primary scenario, where a command acts when it names none; nil when the couple has none. For those
    /// who see the budget or edit it: a member whose role edits the budget without seeing it adds items to it too.
    public func primaryScenario(as actor: Actor) async throws -> Scenario? {
        try await authorized("budget.primary_scenario", .budgetView, or: .budgetEdit, actor) {
            try await repository.scenarios(couple: couple, page: nil).first(where: \.isPrimary)
        }
    }

    /// The scenarios, oldest first. Like every listing here, with `page` one page of the same listing.
    public func scenarios(page: PageRequest<Date>? = nil, as actor: Actor) async throws -> [Scenario] {
        try await authorized("budget.scenarios", .budgetView, actor) {
            try await repository.scenarios(couple: couple, page: page)
        }
    }

    public func createScenario(named name: String, primary: Bool = false, as actor: Actor) async throws -> Scenario {
        try await authorized("budget.create_scenario", .budgetEdit, actor) {
            try await repository.createScenario(
                couple: couple, name: try budgetName(name, "name"), primary: primary, as: actor)
        }
    }

    /// Copies `source` with its folders, items and allocations, in one transaction.
    public func cloneScenario(_ source: UUID, named name: String, as actor: Actor) async throws -> Scenario {
        try await authorized("budget.clone_scenario", .budgetEdit, actor) {
            try await repository.cloneScenario(
                couple: couple, source: source, name: try budgetName(name, "name"), as: actor)
        }
    }

    public func setPrimaryScenario(_ scenario: UUID, as actor: Actor) async throws -> Scenario {
        try await authorized("budget.set_primary", .budgetEdit, actor) {
            try await repository.setPrimaryScenario(couple: couple, scenario: scenario, as: actor)
        }
    }

    public func renameScenario(_ scenario: UUID, to name: String, as actor: Actor) async throws -> Scenario {
        try await authorized("budget.rename_scenario", .budgetEdit, actor) {
            try await repository.renameScenario(
                couple: couple, scenario: scenario, to: try budgetName(name, "name"), as: actor)
        }
    }

    public func folders(scenario: UUID, page: PageRequest<String>? = nil, as actor: Actor) async throws -> [Folder] {
        try await authorized("budget.folders", .budgetView, actor) {
            try await repository.folders(couple: couple, scenario: scenario, page: page)
        }
    }

    public func createFolder(named name: String, scenario: UUID, as actor: Actor) async throws -> Folder {
        try await authorized("budget.create_folder", .budgetEdit, actor) {
            try await repository.createFolder(
                couple: couple, scenario: scenario, name: try budgetName(name, "name"), as: actor)
        }
    }

    public func items(scenario: UUID, page: PageRequest<String>? = nil, as actor: Actor) async throws -> [BudgetItem] {
        try await authorized("budget.items", .budgetView, actor) {
            try await repository.items(couple: couple, scenario: scenario, page: page)
        }
    }

    /// The events and categories the scenario's items are grouped by, each listed once, sorted.
    public func eventCategories(scenario: UUID, as actor: Actor) async throws -> EventCategories {
        let items = try await items(scenario: scenario, as: actor)
        return EventCategories(
            events: Self.distinct(items.map(\.event)), categories: Self.distinct(items.map(\.category)))
    }

    /// Labels as a list to pick from: "Flowers" and "flowers" read as one, so they are listed once, as most
    /// items spell it (of spellings used as often, the first in code-point order), and the list is sorted
    /// regardless of case, as budget listings are, so that "apple" is not listed after "Zebra". No label ("")
    /// is not listed.
    private static func distinct(_ labels: [String]) -> [String] {
        var spellings: [String: [String: Int]] = [:]
        for label in labels where !label.isEmpty {
            spellings[label.lowercased(), default: [:]][label, default: 0] += 1
        }
        return spellings.sorted { $0.key < $1.key }.compactMap { _, counts in
            counts.max { ($0.value, $1.key) < ($1.value, $0.key) }?.key
        }
    }

    public func renameFolder(_ folder: UUID, to name: String, as actor: Actor) async throws -> Folder {
        try await authorized("budget.rename_folder", .budgetEdit, actor) {
            try await repository.renameFolder(
                couple: couple, folder: folder, to: try budgetName(name, "name"), as: actor)
        }
    }

    public func createItem(
        named name: String, scenario: UUID, budgeted: Decimal, folder: UUID? = nil, category: String = "",
        event: String = "", as actor: Actor
    ) async throws -> BudgetItem {
        try await authorized("budget.create_item", .budgetEdit, actor) {
            let item = BudgetItem(
                id: UUID(), scenarioID: scenario, folderID: folder, name: try budgetName(name, "name"),
                category: try Self.label(category, "category"), event: try Self.label(event, "event"),
                budgeted: try Money.validated(budgeted, "budgeted"))
            return try await repository.createItem(couple: couple, item, as: actor)
        }
    }

    /// Changes an item's name, category, event or folder (one of its own scenario), under the couple's budget
    /// lock. Refuses an edit that changes nothing.
    public func editItem(_ id: UUID, _ edit: ItemEdit, as actor: Actor) async throws -> BudgetItem {
        try await authorized("budget.edit_item", .budgetEdit, actor) {
            guard !edit.isEmpty else {
                throw BudgetError(.invalidInput, "nothing to change: give a name, category, event or folder")
            }
            let name = try edit.name.map { try budgetName($0, "name") }
            let category = try edit.category.map { try Self.label($0, "category") }
            let event = try edit.event.map { try Self.label($0, "event") }
            return try await repository.withBudgetLock(couple: couple, as: actor) { transaction in
                guard var item = try await transaction.item(id) else { throw BudgetRecord.item.notFound }
                if let name { item.name = name }
                if let category { item.category = category }
                if let event { item.event = event }
                if let folder = edit.folder { item.folderID = folder }
                try await transaction.setItemDetails(item)
                return item
            }
        }
    }

    // MARK: Expenses, payments, gifts

    public func expenses(page: PageRequest<DueAndName>? = nil, as actor: Actor) async throws -> [Expense] {
        try await authorized("budget.expenses", .expensesView, actor) {
            try await repository.expenses(couple: couple, page: page)
        }
    }

    public func createExpense(
        named name: String, amount: Decimal, vendor: String = "", dueDate: CalendarDay? = nil, category: String = "",
        as actor: Actor
    ) async throws -> Expense {
        try await authorized("budget.create_expense", .expensesEdit, actor) {
            let expense = Expense(
                id: UUID(), name: try budgetName(name, "name"), vendor: try Self.label(vendor, "vendor", limit: 200),
                amount: try Money.validated(amount, "amount"), dueDate: dueDate,
                category: try Self.label(category, "category"))
            return try await repository.createExpense(couple: couple, expense, as: actor)
        }
    }

    public func recordPayment(expense: UUID, amount: Decimal, paidAt: CalendarDay? = nil, as actor: Actor)
        async throws -> ExpensePayment
    {
        try await authorized("budget.record_payment", .expensesEdit, actor) {
            guard try Money.validated(amount, "amount") > 0 else {
                throw BudgetError(.invalidInput, "a payment's amount must be more than 0")
            }
            return try await repository.addPayment(
                couple: couple,
                ExpensePayment(id: UUID(), expenseID: expense, amount: amount, paidAt: paidAt ?? CalendarDay.today()),
                as: actor)
        }
    }

    /// Changes an expense's name, vendor, category or due date, under the couple's budget lock (so that two edits
    /// of different fields both land). Refuses an edit that changes nothing.
    public func editExpense(_ id: UUID, _ edit: ExpenseEdit, as actor: Actor) async throws -> Expense {
        try await authorized("budget.edit_expense", .expensesEdit, actor) {
            guard !edit.isEmpty else {
                throw BudgetError(.invalidInput, "nothing to change: give a name, vendor, category or due date")
            }
            let name = try edit.name.map { try budgetName($0, "name") }
            let vendor = try edit.vendor.map { try Self.label($0, "vendor", limit: 200) }
            let category = try edit.category.map { try Self.label($0, "category") }
            return try await repository.withBudgetLock(couple: couple, as: actor) { transaction in
                guard var expense = try await transaction.expense(id) else { throw BudgetRecord.expense.notFound }
                if let name { expense.name = name }
                if let vendor { expense.vendor = vendor }
                if let category { expense.category = category }
                if let dueDate = edit.dueDate { expense.dueDate = dueDate }
                try await transaction.setExpenseDetails(expense)
                return expense
            }
        }
    }

    /// The payments recorded against `expense`, oldest first.
    public func payments(expense: UUID, page: PageRequest<CalendarDay>? = nil, as actor: Actor) async throws
        -> [ExpensePayment]
    {
        try await authorized("budget.payments", .expensesView, actor) {
            guard let payments = try await repository.payments(couple: couple, expense: expense, page: page) else {
                throw BudgetRecord.expense.notFound
            }
            return payments
        }
    }

    /// Every expense's payment position on `today` (with `page`, a page of expenses'), from two statements
    /// however many payments there are.
    public func paymentStatuses(
        today: CalendarDay = CalendarDay.today(), page: PageRequest<DueAndName>? = nil, as actor: Actor
    ) async throws -> [PaymentStatus] {
        try await authorized("budget.payment_statuses", .expensesView, actor) {
            let expenses: [Expense]
            let payments: [ExpensePayment]
            if page == nil {
                async let all = repository.payments(couple: couple, expenses: nil)
                expenses = try await repository.expenses(couple: couple, page: nil)
                payments = try await all
            } else {
                expenses = try await repository.expenses(couple: couple, page: page)
                payments = try await repository.payments(couple: couple, expenses: expenses.map(\.id))
            }
            let byExpense = Dictionary(grouping: payments, by: \.expenseID)
            return expenses.map { BudgetRules.paymentStatus(of: $0, payments: byExpense[$0.id] ?? [], today: today) }
        }
    }

    public func gifts(page: PageRequest<String>? = nil, as actor: Actor) async throws -> [Gift] {
        try await authorized("budget.gifts", .giftsView, actor) {
            try await repository.gifts(couple: couple, page: page)
        }
    }

    public func recordGift(
        from: String, amount: Decimal, received: Bool, budgetItem: UUID? = nil, as actor: Actor
    ) async throws -> Gift {
        try await authorized("budget.record_gift", .giftsEdit, actor) {
            try await repository.createGift(
                couple: couple,
                Gift(
                    id: UUID(), from: try budgetName(from, "from"), amount: try Money.validated(amount, "amount"),
                    received: received, budgetItemID: budgetItem), as: actor)
        }
    }

    /// Changes a gift: who it is from, its amount, whether it has come in, the budget item it goes towards.
    /// Refuses an edit that changes nothing.
    public func editGift(_ id: UUID, _ edit: GiftEdit, as actor: Actor) async throws -> Gift {
        try await authorized("budget.edit_gift", .giftsEdit, actor) {
            guard !edit.isEmpty else {
                throw BudgetError(
                    .invalidInput, "nothing to change: give who it is from, an amount, received or a budget item")
            }
            let from = try edit.from.map { try budgetName($0, "from") }
            let amount = try edit.amount.map { try Money.validated($0, "amount") }
            return try await repository.withBudgetLock(couple: couple, as: actor) { transaction in
                guard let gift = try await transaction.gift(id) else { throw BudgetRecord.gift.notFound }
                let changed = Gift(
                    id: id, from: from ?? gift.from, amount: amount ?? gift.amount,
                    received: edit.received ?? gift.received, budgetItemID: edit.budgetItem ?? gift.budgetItemID)
                try await transaction.setGift(changed)
                return changed
            }
        }
    }

    // MARK: Allocation

    /// Allocates `expense` in `scenario` to `items`, replacing its allocations there; without a scenario (`nil`),
    /// in the one the items are in. With amounts, those are the shares, which may not add up to more than the
    /// expense; without (`nil`), the expense's whole amount is split in proportion to the items' budgets.
    public func allocate(
        expense: UUID, scenario: UUID?, items: [UUID], amounts: [Decimal]? = nil, as actor: Actor
    ) async throws -> [Allocation] {
        try await authorized("budget.allocate", .expensesEdit, actor) {
            guard !items.isEmpty, Set(items).count == items.count else {
                throw BudgetError(.invalidInput, "name each budget item once, and at least one")
            }
            if let amounts {
                guard amounts.count == items.count else {
                    throw BudgetError(.invalidInput, "give an amount for every item, or for none")
                }
                for amount in amounts { _ = try Money.validated(amount, "amount") }
            }
            return try await repository.withBudgetLock(couple: couple, as: actor) { transaction in
                guard let found = try await transaction.expense(expense) else { throw BudgetRecord.expense.notFound }
                let budgetItems = try await transaction.items(items)
                let byID = Dictionary(budgetItems.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
                let target = scenario ?? byID[items[0]]?.scenarioID
                guard let target, items.allSatisfy({ byID[$0]?.scenarioID == target }) else {
                    throw BudgetError(
                        .notFound,
                        scenario == nil
                            ? "every budget item must exist, all in one scenario"
                            : "every budget item must belong to the scenario")
                }
                let shares =
                    amounts
                    ?? BudgetRules.distribute(found.amount, weights: items.map { byID[$0]!.budgeted })
                let total = shares.reduce(Decimal(0), +)
                guard total <= found.amount else {
                    throw BudgetError(
                        .invalidInput, "the allocations add up to \(total), more than the expense's \(found.amount)")
                }
                let allocations = zip(items, shares).map {
                    Allocation(scenarioID: target, expenseID: expense, budgetItemID: $0, amount: $1)
                }
                try await transaction.replaceAllocations(scenario: target, expenses: [expense], with: allocations)
                return allocations
            }
        }
    }

    /// Changes a budget item's budget and re-splits, in its scenario, every expense allocated to it across that
    /// expense's items in proportion to their budgets, to the cent.
    public func setBudgeted(item: UUID, to amount: Decimal, as actor: Actor) async throws -> [Allocation] {
        try await authorized("budget.set_budgeted", .budgetEdit, actor) {
            let amount = try Money.validated(amount, "budgeted")
            return try await repository.withBudgetLock(couple: couple, as: actor) { transaction in
                guard let found = try await transaction.item(item) else { throw BudgetRecord.item.notFound }
                try await transaction.setItemBudgeted(item, amount)
                let expenseIDs = Array(Set(try await transaction.allocations(item: item).map(\.expenseID)))
                guard !expenseIDs.isEmpty else { return [] }
                let current = try await transaction.allocations(scenario: found.scenarioID, expenses: expenseIDs)
                let budgets = Dictionary(
                    try await transaction.items(Array(Set(current.map(\.budgetItemID)))).map { ($0.id, $0.budgeted) },
                    uniquingKeysWith: { first, _ in first })
                let amounts = Dictionary(
                    try await transaction.expenses(expenseIDs).map { ($0.id, $0.amount) },
                    uniquingKeysWith: { first, _ in first })
                var replaced: [Allocation] = []
                for (expenseID, allocations) in Dictionary(grouping: current, by: \.expenseID) {
                    guard let total = amounts[expenseID] else { continue }
                    let ordered = allocations.sorted { $0.budgetItemID.uuidString < $1.budgetItemID.uuidString }
                    let shares = BudgetRules.distribute(
                        total, weights: ordered.map { budgets[$0.budgetItemID] ?? 0 })
                    replaced += zip(ordered, shares).map {
                        Allocation(
                            scenarioID: found.scenarioID, expenseID: expenseID, budgetItemID: $0.budgetItemID,
                            amount: $1)
                    }
                }
                try await transaction.replaceAllocations(
                    scenario: found.scenarioID, expenses: expenseIDs, with: replaced)
                return replaced
            }
        }
    }

    /// Changes an expense's amount and scales its allocations in `scenario` (nil: in every scenario) in
    /// proportion to their current amounts, so that they add up to the new amount exactly.
    public func setAmount(expense: UUID, to amount: Decimal, scenario: UUID? = nil, as actor: Actor) async throws
        -> [Allocation]
    {
        try await authorized("budget.set_amount", .expensesEdit, actor) {
            let amount = try Money.validated(amount, "amount")
            return try await repository.withBudgetLock(couple: couple, as: actor) { transaction in
                guard try await transaction.expense(expense) != nil else { throw BudgetRecord.expense.notFound }
                try await transaction.setExpenseAmount(expense, amount)
                let current = try await transaction.allocations(scenario: scenario, expenses: [expense])
                var replaced: [Allocation] = []
                for (scenarioID, allocations) in Dictionary(grouping: current, by: \.scenarioID) {
                    let ordered = allocations.sorted { $0.budgetItemID.uuidString < $1.budgetItemID.uuidString }
                    let shares = BudgetRules.distribute(amount, weights: ordered.map(\.amount))
                    let scaled = zip(ordered, shares).map {
                        Allocation(
                            scenarioID: scenarioID, expenseID: expense, budgetItemID: $0.budgetItemID, amount: $1)
                    }
                    try await transaction.replaceAllocations(scenario: scenarioID, expenses: [expense], with: scaled)
                    replaced += scaled
                }
                return replaced
            }
        }
    }

    // MARK: Deleting

    /// Deletes a scenario, folder, item, expense, payment or gift with what depends on it (see `BudgetRecord`),
    /// under the couple's budget lock, so that no recalculation runs while it goes. Needs the permission that
    /// edits records of that kind.
    public func delete(_ record: BudgetRecord, id: UUID, as actor: Actor) async throws -> Deletion {
        let permission: BudgetPermission =
            switch record {
            case .scenario, .folder, .item: .budgetEdit
            case .expense, .payment: .expensesEdit
            case .gift: .giftsEdit
            }
        return try await authorized("budget.delete", permission, actor) {
            try await repository.withBudgetLock(couple: couple, as: actor) { try await $0.delete(record, id: id) }
            return Deletion(deleted: record, id: id)
        }
    }

    // MARK: Rules

    /// Runs the operation `name`, timed in the metrics, once `actor` holds `permission` (or `other`).
    private func authorized<Value>(
        _ name: String, _ permission: BudgetPermission, or other: BudgetPermission? = nil, _ actor: Actor,
        _ body: () async throws -> Value
    ) async throws -> Value {
        try await metrics.measure(name) {
            try await require(permission, or: other, actor)
            return try await body()
        }
    }

    /// Refuses `actor` unless they hold `permission`, or `other` when one is given.
    private func require(_ permission: BudgetPermission, or other: BudgetPermission? = nil, _ actor: Actor)
        async throws
    {
        guard case .user(let user) = actor else { return }  // the operator may do everything
        let needed = [permission] + (other.map { [$0] } ?? [])
        do {
            for permission in needed where try await checker.allows(permission.rawValue, user: user, couple: couple) {
                return
            }
        } catch let error as any CodedError {
            throw BudgetError(error)
        }
        let names = needed.map(\.rawValue).joined(separator: " or ")
        throw BudgetError(.permissionDenied, "permission denied: this needs \(names) in the couple")
    }

    /// A label items and expenses are grouped and shown by (a category, an event, a vendor), trimmed as a name
    /// is, so that "Food " groups with "Food"; one that shows nothing (`isBlank`) is no label, "", as if cleared.
    private static func label(_ text: String, _ field: String, limit: Int = 100) throws(BudgetError) -> String {
        guard text.storedLength <= limit else {
            throw BudgetError(.invalidInput, "\(field) must be at most \(limit) characters, not \(text.storedLength)")
        }
        do { try refuseControlCharacters(text, field) } catch { throw BudgetError(error) }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return isBlank(trimmed) ? "" : trimmed
    }
}

/// The permissions that guard the budget (policies/policy.json grants them to roles).
enum BudgetPermission: String {
    case budgetView = "budget.view"
    case budgetEdit = "budget.edit"
    case expensesView = "expenses.view"
    case expensesEdit = "expenses.edit"
    case giftsView = "gifts.view"
    case giftsEdit = "gifts.edit"
}
