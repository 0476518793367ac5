import Collaboration
import Foundation
import Testing

@testable import Budget

private func money(_ text: String) -> Decimal { Decimal(string: text)! }

@Suite("Budget arithmetic")
struct BudgetRulesTests {
    @Test(
        "largest remainder: shares add up to the total exactly, to the cent",
        arguments: [
            ("100.00", ["1", "1", "1"], ["33.34", "33.33", "33.33"]),
            ("0.01", ["1", "1"], ["0.01", "0.00"]),
            ("0.01", ["1", "3"], ["0.00", "0.01"]),
            ("10.00", ["0", "0"], ["5.00", "5.00"]),
            ("99.99", ["500", "300", "200"], ["49.99", "30.00", "20.00"]),
            ("9999999999.99", ["9999999999.99", "0.01"], ["9999999999.98", "0.01"]),
            ("0", ["1", "2"], ["0", "0"]),
        ])
    func distribute(total: String, weights: [String], expected: [String]) {
        let shares = BudgetRules.distribute(money(total), weights: weights.map(money))
        #expect(shares == expected.map(money))
        #expect(shares.reduce(0, +) == money(total))
    }

    @Test("random splits always add up exactly and never exceed the total")
    func randomSplits() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let total = Decimal(Int.random(in: 0...10_000_000, using: &generator)) / 100
            let weights = (0..<Int.random(in: 1...7, using: &generator)).map { _ in
                Decimal(Int.random(in: 0...500_000, using: &generator)) / 100
            }
            let shares = BudgetRules.distribute(total, weights: weights)
            #expect(shares.reduce(0, +) == total)
            #expect(shares.allSatisfy { $0 >= 0 && $0 <= total })
        }
    }

    @Test("payment status: unpaid, partial, paid, overpaid, and overdue only while money is owed")
    func paymentStatus() {
        let today = CalendarDay("2026-06-15")!
        let expense = Expense(id: UUID(), name: "Venue", amount: money("1000.00"), dueDate: CalendarDay("2026-06-01"))
        func status(_ amounts: [String], _ expense: Expense = expense) -> PaymentStatus {
            BudgetRules.paymentStatus(
                of: expense,
                payments: amounts.map {
                    ExpensePayment(id: UUID(), expenseID: expense.id, amount: money($0), paidAt: today)
                }, today: today)
        }
        #expect(status([]).status == .unpaid)
        #expect(status([]).isOverdue)
        #expect(status([]).remaining == money("1000.00"))
        let partial = status(["250.00", "100.50"])
        #expect(partial.status == .partial)
        #expect(partial.paid == money("350.50"))
        #expect(partial.remaining == money("649.50"))
        #expect(partial.progress == money("0.3505"))
        #expect(partial.isOverdue)
        #expect(partial.payments == 2)
        let paid = status(["400", "600"])
        #expect(paid.status == .paid && !paid.isOverdue && paid.remaining == 0 && paid.progress == 1)
        let overpaid = status(["1000.01"])
        #expect(overpaid.status == .overpaid && !overpaid.isOverdue && overpaid.remaining == 0)
        var notDue = expense
        notDue.dueDate = CalendarDay("2026-06-15")
        #expect(!status(["1"], notDue).isOverdue)
        notDue.dueDate = nil
        #expect(!status([], notDue).isOverdue)
        let free = Expense(id: UUID(), name: "Favour", amount: 0)
        #expect(status([], free).status == .paid)
    }

    @Test("amounts: negative, fractional cents, too large and malformed input are refused")
    func amounts() throws {
        #expect(try Money.parse("1250", "amount") == 1250)
        #expect(try Money.parse("99.90", "amount") == money("99.90"))
        #expect(try Money.parse(".5", "amount") == money("0.50"))
        #expect(try Money.parse("-0", "amount") == 0 && Money.parse("-0.00", "amount") == 0)
        for bad in [
            "-1", "--0", "-", "-.", "1.001", "1e3", "1,00", "", "12345678901.00", "NaN", "1; DROP TABLE expenses",
            "1.2.3", ".", "1..2", "12.34.", "١٢", "1\u{301}",
        ] {
            #expect(throws: BudgetError.self) { try Money.parse(bad, "amount") }
        }
        #expect(throws: BudgetError.self) { try Money.validated(money("-0.01"), "amount") }
        #expect(throws: BudgetError(.invalidInput, "--amount must not be negative (-5)")) {
            try Money.parse("-5", "--amount")
        }
        #expect(throws: BudgetError(.invalidInput, "amount must not be negative (-99999999999999999999)")) {
            try Money.parse("-99999999999999999999", "amount")
        }
        #expect(throws: BudgetError(.invalidInput, "amount must be at most 9999999999.99 (99999999999999999999)")) {
            try Money.parse("99999999999999999999", "amount")
        }
        #expect(throws: BudgetError(.invalidInput, "amount must be in whole cents (0.0000000000000000000000000000001)"))
        {
            try Money.parse("0.0000000000000000000000000000001", "amount")
        }
        #expect(CalendarDay("2026-02-29") == nil)
        #expect(CalendarDay("2028-02-29") != nil)
        #expect(CalendarDay("2026-13-01") == nil)
        #expect(CalendarDay("2026-1-01") == nil)
        #expect(
            CalendarDay("2026-+2-01") == nil && CalendarDay("+202-01-01") == nil && CalendarDay("2026-02-+1") == nil)
    }

    @Test("whole cents convert exactly; finer amounts round half away from zero; beyond Int64, held to its bounds")
    func cents() {
        let cases: [(Decimal, Int64)] = [
            (0, 0), (money("0.01"), 1), (money("-0.01"), -1), (money("99.9"), 9990), (1250, 125_000),
            (money("9999999999.99"), 999_999_999_999), (Decimal(sign: .plus, exponent: 2, significand: 7), 70_000),
            (Decimal(Int64.max) / 100, Int64.max), (money("0.005"), 1), (money("-0.005"), -1), (money("1.234"), 123),
            // Beyond Int64, held to its bounds (not 0).
            (Decimal(Int64.max) + money("0.005"), Int64.max), (-Decimal(Int64.max) * 10, Int64.min),
        ]
        for (amount, cents) in cases { #expect(Money.cents(amount) == cents, "\(amount)") }
        // Whole cents whatever the exponent (the numeric decoder gives 123.45 as 1234500e-4); anything else is nil.
        let wholes: [(Decimal, Int64?)] = [
            (Decimal(sign: .plus, exponent: -4, significand: 1_234_500), 12_345),
            (Decimal(sign: .minus, exponent: -30, significand: 0), 0),
            (Decimal(sign: .plus, exponent: 40, significand: 0), 0),
            (Decimal(sign: .plus, exponent: -4, significand: 1_234_501), nil), (money("0.005"), nil),
            (Decimal.nan, nil),
            (Decimal(sign: .plus, exponent: 17, significand: 1), nil), (Decimal(Int64.max) + 1, nil),
        ]
        for (amount, cents) in wholes { #expect(Money.wholeCents(amount) == cents, "\(amount)") }
    }

    @Test("the overview adds cents exactly; other scenarios' items, stray rows and unreceived gifts do not count")
    func overviewArithmetic() async {
        let scenario = UUID()
        let venue = BudgetItem(id: UUID(), scenarioID: scenario, name: "Venue", budgeted: money("1000.10"))
        let flowers = BudgetItem(id: UUID(), scenarioID: scenario, name: "Flowers", budgeted: 0)
        let elsewhere = BudgetItem(id: UUID(), scenarioID: UUID(), name: "Other scenario", budgeted: 50)
        let (hall, deposit) = (UUID(), UUID())
        let overview = await BudgetRules.overview(
            scenario: scenario, revision: 7, items: [venue, flowers, elsewhere],
            // Out of item order: the venue's allocations come in two groups, in two parts, which must add up alike.
            allocations: [
                [
                    AllocationCents(expenseID: hall, budgetItemID: venue.id, cents: 33_334),
                    AllocationCents(expenseID: hall, budgetItemID: flowers.id, cents: 999_999_999_999),
                ],
                [
                    AllocationCents(expenseID: deposit, budgetItemID: venue.id, cents: 1),
                    AllocationCents(expenseID: hall, budgetItemID: elsewhere.id, cents: 500),
                ],
            ],
            expenseNames: [hall: "Hall"],
            gifts: [
                Gift(id: UUID(), from: "Gran", amount: money("0.35"), received: true, budgetItemID: venue.id),
                Gift(id: UUID(), from: "Uncle", amount: 100, received: false, budgetItemID: venue.id),
                Gift(id: UUID(), from: "Stray", amount: 100, received: true, budgetItemID: elsewhere.id),
            ])
        #expect(overview.items.map(\.item.id) == [venue.id, flowers.id])
        let line = overview.items[0]
        #expect(line.spent == money("333.35") && line.gifts == money("0.35"))
        #expect(line.effectiveSpent == 333 && line.remaining == money("667.10"))
        #expect(line.expenses.map(\.name) == ["Hall", ""])
        #expect(line.expenses.map(\.allocated) == [money("333.34"), money("0.01")])
        #expect(line.giftLinks.count == 2)
        #expect(
            overview.items[1].spent == money("9999999999.99") && overview.items[1].remaining == money("-9999999999.99"))
        #expect(
            overview.totals
                == BudgetOverview.Totals(
                    budgeted: money("1000.10"), spent: money("10000000333.34"), gifts: money("0.35"),
                    effectiveSpent: money("10000000332.99")))
    }

    @Test("budget ids are written in lower case in JSON, as in the collaboration module")
    func lowerCaseIDs() throws {
        let id = UUID(uuidString: "0F8FAD5B-D9CB-469F-A165-70867728950E")!
        let item = BudgetItem(id: id, scenarioID: id, folderID: id, name: "Venue", budgeted: 100)
        let json = String(decoding: try JSONEncoder().encode(item), as: UTF8.self)
        #expect(json.components(separatedBy: "0f8fad5b-d9cb-469f-a165-70867728950e").count == 4)
        #expect(!json.contains("0F8FAD5B"))
    }

    @Test(
        "money is shown with two decimals, as people write it",
        arguments: [
            ("1500", "1500.00"), ("12.5", "12.50"), ("0", "0.00"), ("-0.05", "-0.05"), ("0.1", "0.10"),
            ("9999999999.99", "9999999999.99"), ("-12.3", "-12.30"),
        ])
    func moneyText(amount: String, text: String) {
        #expect(Money.text(money(amount)) == text)
    }

    @Test("every budget refusal's code names a collaboration code, so the API and the CLI answer it by that code")
    func refusalCodes() {
        for code in BudgetError.Code.allCases {
            let mapped = CollaborationError(BudgetError(code, "refused"))
            #expect(mapped.code.rawValue == code.rawValue && mapped.message == "refused")
        }
    }
}
