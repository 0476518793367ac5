import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Overview: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Per budget item: budgeted, spent, gifts, effective spend; and totals.",
            discussion: "Example: rbac budget overview --couple C --json")
        @OptionGroup var options: Options
        @OptionGroup var scenario: InScenario

        func run() async throws {
            let overview = try await options.run {
                try await $0.overview(scenario: try await scenario.id(in: $0, as: $1), as: $1)
            }
            let rows = overview.items.map {
                [
                    $0.item.name, Money.text($0.item.budgeted), Money.text($0.spent), Money.text($0.gifts),
                    Money.text($0.effectiveSpent), Money.text($0.remaining),
                ]
            }
            let totals = overview.totals
            let total = [
                "total", Money.text(totals.budgeted), Money.text(totals.spent), Money.text(totals.gifts),
                Money.text(totals.effectiveSpent), Money.text(totals.budgeted - totals.effectiveSpent),
            ]
            try options.output.print(
                overview,
                Table(headers: ["ITEM", "BUDGETED", "SPENT", "GIFTS", "EFFECTIVE", "REMAINING"], rows: rows + [total])
                    .rendered)
        }
    }
}
