import Foundation
import Hummingbird
import Testing

@testable import Budget
@testable import Server

/// The overview route writes its JSON by hand; it must be the very bytes JSONEncoder writes.
@Suite("Overview JSON")
struct OverviewJSONTests {
    /// Every ASCII character (the control characters, quote, backslash and slash among them) and some that are
    /// not ASCII: an accent, a line separator, a byte order mark, an emoji, a combining mark.
    static let characters: [Character] =
        (0..<0x80).map { Character(Unicode.Scalar(UInt8($0))) } + ["é", "\u{2028}", "\u{FEFF}", "😀", "e\u{301}", "日"]

    static func text(_ generator: inout some RandomNumberGenerator) -> String {
        String(
            (0..<Int.random(in: 0...12, using: &generator)).map { _ in characters.randomElement(using: &generator)! })
    }

    /// Whole cents as the overview makes them (exponent -2) and as the numeric decoder does (123.45 as
    /// 1234500e-4), and amounts finer than a cent.
    static func amount(_ generator: inout some RandomNumberGenerator) -> Decimal {
        let divisor: Int64 = [1, 100, 10_000_000].randomElement(using: &generator)!
        let cents = Int64.random(in: -999_999_999_999...999_999_999_999, using: &generator) / divisor
        let sign: FloatingPointSign = cents < 0 ? .minus : .plus
        return switch Int.random(in: 0..<3, using: &generator) {
        case 0: Decimal(sign: sign, exponent: -2, significand: Decimal(cents.magnitude))
        case 1: Decimal(sign: sign, exponent: -4, significand: Decimal(cents.magnitude * 100))
        default: Decimal(sign: sign, exponent: -3, significand: Decimal(cents.magnitude * 10 + 7))
        }
    }

    static func overview(_ generator: inout some RandomNumberGenerator) -> BudgetOverview {
        let scenario = UUID()
        let lines = (0..<Int.random(in: 0...4, using: &generator)).map { _ in
            BudgetOverview.Line(
                item: BudgetItem(
                    id: UUID(), scenarioID: scenario, folderID: Bool.random(using: &generator) ? UUID() : nil,
                    name: text(&generator), category: text(&generator), event: text(&generator),
                    budgeted: amount(&generator)),
                spent: amount(&generator), gifts: amount(&generator), effectiveSpent: amount(&generator),
                remaining: amount(&generator),
                expenses: (0..<Int.random(in: 0...3, using: &generator)).map { _ in
                    BudgetOverview.ExpenseLink(expenseID: UUID(), name: text(&generator), allocated: amount(&generator))
                },
                giftLinks: (0..<Int.random(in: 0...2, using: &generator)).map { _ in
                    BudgetOverview.GiftLink(
                        giftID: UUID(), from: text(&generator), amount: amount(&generator),
                        received: Bool.random(using: &generator))
                })
        }
        return BudgetOverview(
            scenarioID: scenario, revision: Int64.random(in: 0...Int64.max, using: &generator), items: lines,
            totals: BudgetOverview.Totals(
                budgeted: amount(&generator), spent: amount(&generator), gifts: amount(&generator),
                effectiveSpent: amount(&generator)))
    }

    @Test("500 random overviews, with every ASCII character in their text: the bytes JSONEncoder writes")
    func sameBytes() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let overview = Self.overview(&generator)
            // Bytes, not Strings: String equality would take "é" written as e + U+0301 for a precomposed "é".
            let written = Array(OverviewJSON.body(overview).readableBytesView)
            let encoded = Array(try PermissionAPIController.encoder.encode(overview))
            #expect(written == encoded, "\(String(decoding: written, as: UTF8.self))")
        }
    }
}
