import Foundation
import Tenancy

/// The budget's arithmetic, free of storage: what the services and the in-memory tests share.
public enum BudgetRules {
    /// Splits `total` into shares proportional to `weights`, in whole cents, by largest remainder: each share
    /// is rounded down, and the cents left over go one each to the shares with the largest remainders (the
    /// earlier share on a tie). The shares always add up to `total` exactly. All-zero weights split evenly.
    public static func distribute(_ total: Decimal, weights: [Decimal]) -> [Decimal] {
        guard !weights.isEmpty else { return [] }
        let totalCents = Int128(Money.cents(total))
        var weightCents = weights.map { Int128(max(Money.cents($0), 0)) }
        if weightCents.allSatisfy({ $0 == 0 }) { weightCents = weightCents.map { _ in 1 } }
        let weightSum = weightCents.reduce(0, +)
        var shares = weightCents.map { totalCents * $0 / weightSum }
        let remainders = weightCents.map { totalCents * $0 % weightSum }
        let leftover = Int(totalCents - shares.reduce(0, +))
        let order = remainders.indices.sorted {
            remainders[$0] > remainders[$1] || (remainders[$0] == remainders[$1] && $0 < $1)
        }
        for index in order.prefix(leftover) { shares[index] += 1 }
        return shares.map { Money.fromCents(Int64($0)) }
    }

    /// The payment position of `expense` after `payments` (its own), on `today`.
    public static func paymentStatus(of expense: Expense, payments: [ExpensePayment], today: CalendarDay)
        -> PaymentStatus
    {
        let paid = payments.reduce(Decimal(0)) { $0 + $1.amount }
        let state: PaymentStatus.State =
            if paid > expense.amount { .overpaid } else if paid == expense.amount { .paid } else if paid == 0 {
                .unpaid
            } else { .partial }
        var progress = expense.amount == 0 ? Decimal(1) : paid / expense.amount
        var rounded = Decimal()
        NSDecimalRound(&rounded, &progress, 4, .plain)
        let open = state == .unpaid || state == .partial
        return PaymentStatus(
            expenseID: expense.id, name: expense.name, amount: expense.amount, paid: paid,
            remaining: max(expense.amount - paid, 0), progress: rounded, status: state, dueDate: expense.dueDate,
            isOverdue: open && expense.dueDate.map { $0 < today } == true, payments: payments.count)
    }

    /// The overview of one scenario: per item its budget, what its allocations spend, the received gifts set
    /// against it, and the effective spend (spent minus gifts); plus totals. `allocations` comes in parts, each
    /// grouped by item as `BudgetRepository.allocationCents` reads them, and the parts are tallied in parallel.
    /// All the arithmetic is in integer cents.
    public static func overview(
        scenario: UUID, revision: Int64, items: [BudgetItem], allocations: [[AllocationCents]],
        expenseNames: [UUID: String], gifts: [Gift]
    ) async -> BudgetOverview {
        let tallies = await withTaskGroup(of: (part: Int, tallies: [ItemTally]).self) { group in
            for (part, allocations) in allocations.enumerated() {
                group.addTask { (part, tally(allocations, expenseNames: expenseNames)) }
            }
            var tallies = [[ItemTally]](repeating: [], count: allocations.count)
            for await tallied in group { tallies[tallied.part] = tallied.tallies }
            return tallies
        }
        let items = items.filter { $0.scenarioID == scenario }
        let lineOf = Dictionary(items.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
        var spent = [Int64](repeating: 0, count: items.count)
        var expenseLinks = [[BudgetOverview.ExpenseLink]](repeating: [], count: items.count)
        for tally in tallies.joined() {
            guard let line = lineOf[tally.item] else { continue }
            spent[line] += tally.cents
            if expenseLinks[line].isEmpty {
                expenseLinks[line] = tally.links
            } else {
                expenseLinks[line] += tally.links
            }
        }
        var giftLinks = [[BudgetOverview.GiftLink]](repeating: [], count: items.count)
        var received = [Int64](repeating: 0, count: items.count)
        for gift in gifts {
            guard let line = gift.budgetItemID.flatMap({ lineOf[$0] }) else { continue }
            giftLinks[line].append(
                BudgetOverview.GiftLink(giftID: gift.id, from: gift.from, amount: gift.amount, received: gift.received))
            if gift.received { received[line] += Money.cents(gift.amount) }
        }
        // In cents too: each Decimal addition or subtraction would cost some hundred nanoseconds.
        var budgeted: Int64 = 0
        let lines = items.indices.map { line in
            let item = items[line]
            let itemBudgeted = Money.cents(item.budgeted)
            let effective = spent[line] - received[line]
            budgeted += itemBudgeted
            return BudgetOverview.Line(
                item: item, spent: Money.fromCents(spent[line]), gifts: Money.fromCents(received[line]),
                effectiveSpent: Money.fromCents(effective), remaining: Money.fromCents(itemBudgeted - effective),
                expenses: expenseLinks[line], giftLinks: giftLinks[line])
        }
        let (totalSpent, totalGifts) = (spent.reduce(0, +), received.reduce(0, +))
        return BudgetOverview(
            scenarioID: scenario, revision: revision, items: lines,
            totals: BudgetOverview.Totals(
                budgeted: Money.fromCents(budgeted), spent: Money.fromCents(totalSpent),
                gifts: Money.fromCents(totalGifts), effectiveSpent: Money.fromCents(totalSpent - totalGifts)))
    }

    /// One run of one item's allocations: what they add up to, and their expense links in order.
    private struct ItemTally: Sendable {
        let item: UUID
        let cents: Int64
        let links: [BudgetOverview.ExpenseLink]
    }

    /// Tallies allocations grouped by item: each group costs one sum and one array of links.
    private static func tally(_ allocations: [AllocationCents], expenseNames: [UUID: String]) -> [ItemTally] {
        var tallies: [ItemTally] = []
        var start = allocations.startIndex
        while start < allocations.endIndex {
            let item = allocations[start].budgetItemID
            let end = allocations[start...].firstIndex { $0.budgetItemID != item } ?? allocations.endIndex
            let group = allocations[start..<end]
            tallies.append(
                ItemTally(
                    item: item, cents: group.reduce(0) { $0 + $1.cents },
                    links: group.map {
                        BudgetOverview.ExpenseLink(
                            expenseID: $0.expenseID, name: expenseNames[$0.expenseID] ?? "",
                            allocated: Money.fromCents($0.cents))
                    }))
            start = end
        }
        return tallies
    }
}

public struct PaymentStatus: Sendable, Hashable, Codable, ListedRow {
    public enum State: String, Sendable, Codable {
        case unpaid, partial, paid, overpaid
    }

    public let expenseID: UUID
    public let name: String
    public let amount: Decimal
    public let paid: Decimal
    /// What is still to pay; zero once paid or overpaid.
    public let remaining: Decimal
    /// Paid over amount, to four places (1 for a zero-amount expense).
    public let progress: Decimal
    public let status: State
    public let dueDate: CalendarDay?
    /// Unpaid or partly paid after its due date.
    public let isOverdue: Bool
    public let payments: Int

    /// Where its expense stands among the expenses.
    public var cursor: PageCursor<DueAndName> {
        PageCursor(id: expenseID, key: DueAndName(dueDate: dueDate, name: name))
    }
}

public struct BudgetOverview: Sendable, Hashable, Codable {
    public struct Totals: Sendable, Hashable, Codable {
        public var budgeted: Decimal
        public var spent: Decimal
        public var gifts: Decimal
        public var effectiveSpent: Decimal
    }

    public struct ExpenseLink: Sendable, Hashable, Codable {
        public let expenseID: UUID
        public let name: String
        public let allocated: Decimal
    }

    public struct GiftLink: Sendable, Hashable, Codable {
        public let giftID: UUID
        public let from: String
        public let amount: Decimal
        public let received: Bool
    }

    public struct Line: Sendable, Hashable, Codable {
        public let item: BudgetItem
        public let spent: Decimal
        /// Received gifts set against the item.
        public let gifts: Decimal
        public let effectiveSpent: Decimal
        /// Budgeted minus effective spend (negative when over budget).
        public let remaining: Decimal
        public let expenses: [ExpenseLink]
        public let giftLinks: [GiftLink]
    }

    public let scenarioID: UUID
    /// The couple's budget revision this overview was read at.
    public let revision: Int64
    public let items: [Line]
    public let totals: Totals
}
