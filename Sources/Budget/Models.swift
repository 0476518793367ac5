import Foundation
import Tenancy

/// A "what-if" version of the budget; a couple has at most one primary scenario.
public struct Scenario: Sendable, Hashable, Codable, Identifiable, ListedRow {
    public let id: UUID
    public let name: String
    public let isPrimary: Bool
    public let createdAt: Date

    public init(id: UUID, name: String, isPrimary: Bool, createdAt: Date) {
        self.id = id
        self.name = name
        self.isPrimary = isPrimary
        self.createdAt = createdAt
    }

    /// Where it stands among the scenarios, oldest first.
    public var cursor: PageCursor<Date> { PageCursor(id: id, key: createdAt) }
}

/// A group of budget items within a scenario.
public struct Folder: Sendable, Hashable, Codable, Identifiable, ListedRow {
    public let id: UUID
    public let scenarioID: UUID
    public let name: String

    public init(id: UUID, scenarioID: UUID, name: String) {
        self.id = id
        self.scenarioID = scenarioID
        self.name = name
    }

    /// Where it stands among its scenario's folders, by name.
    public var cursor: PageCursor<String> { PageCursor(id: id, key: name) }
}

/// One line of a scenario's budget.
public struct BudgetItem: Sendable, Hashable, Codable, Identifiable, ListedRow {
    public let id: UUID
    public let scenarioID: UUID
    public var folderID: UUID?
    public var name: String
    public var category: String
    public var event: String
    public var budgeted: Decimal

    public init(
        id: UUID, scenarioID: UUID, folderID: UUID? = nil, name: String, category: String = "", event: String = "",
        budgeted: Decimal
    ) {
        self.id = id
        self.scenarioID = scenarioID
        self.folderID = folderID
        self.name = name
        self.category = category
        self.event = event
        self.budgeted = budgeted
    }

    /// Where it stands among its scenario's items, by name.
    public var cursor: PageCursor<String> { PageCursor(id: id, key: name) }
}

/// Something the couple pays for; shared by every scenario, which allocate it to their own items.
public struct Expense: Sendable, Hashable, Codable, Identifiable, ListedRow {
    public let id: UUID
    public var name: String
    public var vendor: String
    public var amount: Decimal
    public var dueDate: CalendarDay?
    public var category: String

    public init(
        id: UUID, name: String, vendor: String = "", amount: Decimal, dueDate: CalendarDay? = nil, category: String = ""
    ) {
        self.id = id
        self.name = name
        self.vendor = vendor
        self.amount = amount
        self.dueDate = dueDate
        self.category = category
    }

    /// Where it stands among the expenses.
    public var cursor: PageCursor<DueAndName> { PageCursor(id: id, key: DueAndName(dueDate: dueDate, name: name)) }
}

/// The expenses' order: by due date, those without one last, then by name.
public struct DueAndName: Sendable, Hashable, Codable {
    public let dueDate: CalendarDay?
    public let name: String

    public init(dueDate: CalendarDay?, name: String) {
        self.dueDate = dueDate
        self.name = name
    }
}

public struct ExpensePayment: Sendable, Hashable, Codable, Identifiable, ListedRow {
    public let id: UUID
    public let expenseID: UUID
    public let amount: Decimal
    public let paidAt: CalendarDay

    public init(id: UUID, expenseID: UUID, amount: Decimal, paidAt: CalendarDay) {
        self.id = id
        self.expenseID = expenseID
        self.amount = amount
        self.paidAt = paidAt
    }

    /// Where it stands among its expense's payments, oldest first.
    public var cursor: PageCursor<CalendarDay> { PageCursor(id: id, key: paidAt) }
}

/// How much of an expense one budget item of a scenario carries.
public struct Allocation: Sendable, Hashable, Codable {
    public let scenarioID: UUID
    public let expenseID: UUID
    public let budgetItemID: UUID
    public let amount: Decimal

    public init(scenarioID: UUID, expenseID: UUID, budgetItemID: UUID, amount: Decimal) {
        self.scenarioID = scenarioID
        self.expenseID = expenseID
        self.budgetItemID = budgetItemID
        self.amount = amount
    }
}

/// A gift, or money owed to the couple (not yet received), optionally set against a budget item.
public struct Gift: Sendable, Hashable, Codable, Identifiable, ListedRow {
    public let id: UUID
    public let from: String
    public let amount: Decimal
    public let received: Bool
    public let budgetItemID: UUID?

    public init(id: UUID, from: String, amount: Decimal, received: Bool, budgetItemID: UUID?) {
        self.id = id
        self.from = from
        self.amount = amount
        self.received = received
        self.budgetItemID = budgetItemID
    }

    /// Where it stands among the gifts, by whom from.
    public var cursor: PageCursor<String> { PageCursor(id: id, key: from) }
}

/// Changes to an expense's details; nil leaves a field as it is. Its amount changes through
/// `CoupleBudget.setAmount`, which rescales its allocations.
public struct ExpenseEdit: Sendable, Hashable {
    public var name: String?
    public var vendor: String?
    public var category: String?
    /// nil keeps the due date; `.some(nil)` removes it.
    public var dueDate: CalendarDay??

    public init(name: String? = nil, vendor: String? = nil, category: String? = nil, dueDate: CalendarDay?? = nil) {
        self.name = name
        self.vendor = vendor
        self.category = category
        self.dueDate = dueDate
    }

    public var isEmpty: Bool { name == nil && vendor == nil && category == nil && dueDate == nil }
}

/// Changes to a budget item's details; nil leaves a field as it is. Its budget changes through
/// `CoupleBudget.setBudgeted`, which re-splits its expenses.
public struct ItemEdit: Sendable, Hashable {
    public var name: String?
    public var category: String?
    public var event: String?
    /// nil keeps the folder; `.some(nil)` takes the item out of any folder.
    public var folder: UUID??

    public init(name: String? = nil, category: String? = nil, event: String? = nil, folder: UUID?? = nil) {
        self.name = name
        self.category = category
        self.event = event
        self.folder = folder
    }

    public var isEmpty: Bool { name == nil && category == nil && event == nil && folder == nil }
}

/// Changes to a gift or money owed; nil leaves a field as it is.
public struct GiftEdit: Sendable, Hashable {
    public var from: String?
    public var amount: Decimal?
    /// Money owed that has come in is `true`.
    public var received: Bool?
    /// nil keeps the budget item; `.some(nil)` sets the gift against none.
    public var budgetItem: UUID??

    public init(from: String? = nil, amount: Decimal? = nil, received: Bool? = nil, budgetItem: UUID?? = nil) {
        self.from = from
        self.amount = amount
        self.received = received
        self.budgetItem = budgetItem
    }

    public var isEmpty: Bool { from == nil && amount == nil && received == nil && budgetItem == nil }
}

/// The events and categories a scenario's items are grouped by, each once, sorted.
public struct EventCategories: Sendable, Hashable, Codable {
    public let events: [String]
    public let categories: [String]

    public init(events: [String], categories: [String]) {
        self.events = events
        self.categories = categories
    }
}

/// A kind of budget record that can be deleted. What depends on a record goes with it, as the schema's foreign
/// keys say.
public enum BudgetRecord: String, Sendable, Hashable, Codable, CaseIterable {
    /// With its folders, its items and their allocations; gifts set against its items stay, unlinked. The
    /// primary scenario is never deleted.
    case scenario
    /// Its items stay, in no folder.
    case folder
    /// With its allocations; gifts set against it stay, unlinked.
    case item
    /// With its payments and its allocations in every scenario.
    case expense
    case payment
    case gift

    /// The refusal for an id the couple has no record of this kind under.
    public var notFound: BudgetError {
        BudgetError(.notFound, "no such \(self == .item ? "budget item" : rawValue) in this couple")
    }

    public static let primaryScenarioKept = BudgetError(
        .primaryScenario, "the primary scenario cannot be deleted; make another scenario primary first")
}

/// What a delete removed (what went with it is in the audit log).
public struct Deletion: Sendable, Hashable, Codable {
    public let deleted: BudgetRecord
    public let id: UUID

    public init(deleted: BudgetRecord, id: UUID) {
        self.deleted = deleted
        self.id = id
    }
}

/// Money: `numeric(12,2)` in the database, `Decimal` here, never floating point.
public enum Money {
    /// The largest amount `numeric(12,2)` holds.
    public static let maximum = Decimal(string: "9999999999.99")!

    /// `amount`, if it is a non-negative amount of whole cents within `numeric(12,2)`; else an `invalid_input`
    /// error naming `field`.
    public static func validated(_ amount: Decimal, _ field: String) throws(BudgetError) -> Decimal {
        guard amount >= 0 else { throw BudgetError(.invalidInput, "\(field) must not be negative (\(amount))") }
        guard amount <= maximum else {
            throw BudgetError(.invalidInput, "\(field) must be at most \(maximum) (\(amount))")
        }
        guard Decimal(cents(amount)) / 100 == amount else {
            throw BudgetError(.invalidInput, "\(field) must be in whole cents (\(amount))")
        }
        return amount
    }

    /// Parses an amount people type ("1250", "99.90"); refuses anything else, including exponents, commas and a
    /// second decimal point (`Decimal(string:)` would read `1.2.3` as 1.2). A minus sign is taken only on zero
    /// ("-0", which the HTTP API's JSON takes as 0 too).
    public static func parse(_ text: String, _ field: String) throws(BudgetError) -> Decimal {
        let unsigned = text.hasPrefix("-") ? String(text.dropFirst()) : text
        // 32 digits and a point are read exactly (`Decimal` keeps 38), so an amount too large or too fine is
        // refused as such, not as something that is no amount.
        guard unsigned.utf8.count <= 33, unsigned.wholeMatch(of: /[0-9]+(\.[0-9]*)?|\.[0-9]+/) != nil,
            let amount = Decimal(string: unsigned)
        else {
            throw BudgetError(.invalidInput, "\(field) \(quoted(text)) is not an amount (e.g. 1250 or 99.90)")
        }
        guard unsigned == text || amount == 0 else {
            throw BudgetError(.invalidInput, "\(field) must not be negative (\(text))")
        }
        return try validated(amount, field)
    }

    /// `amount` as people write money, with two decimals: 1500.00, 12.50, -0.05.
    public static func text(_ amount: Decimal) -> String {
        let cents = cents(amount)
        let fraction = cents.magnitude % 100
        return "\(cents < 0 ? "-" : "")\(cents.magnitude / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    /// `amount` in whole cents, rounded half away from zero, and held to Int64's bounds (validated amounts are
    /// far within them).
    public static func cents(_ amount: Decimal) -> Int64 {
        if let cents = wholeCents(amount) { return cents }
        var scaled = amount * 100
        var rounded = Decimal()
        NSDecimalRound(&rounded, &scaled, 0, .plain)
        if let cents = Int64(rounded.description) { return cents }
        return rounded < 0 ? .min : .max
    }

    /// `amount` in cents if it is a whole number of them within Int64, else nil: exact, and with no Decimal
    /// arithmetic (each operation costs some hundreds of nanoseconds), from its significand and exponent. Amounts
    /// read from `numeric(12,2)` are whole cents, whatever exponent their Decimal has.
    public static func wholeCents(_ amount: Decimal) -> Int64? {
        guard !amount.isNaN, amount.significand <= largestExactSignificand else { return nil }
        let significand = NSDecimalNumber(decimal: amount.significand).int64Value
        let scale = amount.exponent + 2
        let cents: Int64
        if scale >= 0 {
            guard scale < powersOfTen.count else { return significand == 0 ? 0 : nil }
            let (scaled, overflow) = significand.multipliedReportingOverflow(by: powersOfTen[scale])
            guard !overflow else { return nil }
            cents = scaled
        } else {
            guard -scale < powersOfTen.count else { return significand == 0 ? 0 : nil }
            let (quotient, remainder) = significand.quotientAndRemainder(dividingBy: powersOfTen[-scale])
            guard remainder == 0 else { return nil }
            cents = quotient
        }
        return amount.sign == .minus ? -cents : cents
    }

    /// 10^0 to 10^18, every power of ten an Int64 holds.
    private static let powersOfTen: [Int64] = (0...18).map { (0..<$0).reduce(1) { power, _ in power * 10 } }
    private static let largestExactSignificand = Decimal(Int64.max)

    /// `cents` / 100, built directly (a Decimal division costs far more).
    static func fromCents(_ cents: Int64) -> Decimal {
        Decimal(sign: cents < 0 ? .minus : .plus, exponent: -2, significand: Decimal(cents.magnitude))
    }
}
