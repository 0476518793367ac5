import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Categories: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The events and categories a scenario's items are grouped by, each once.",
            discussion: "Example: rbac budget categories --couple C")
        @OptionGroup var options: Options
        @OptionGroup var scenario: InScenario

        func run() async throws {
            let grouping = try await options.run {
                try await $0.eventCategories(scenario: try await scenario.id(in: $0, as: $1), as: $1)
            }
            try options.output.print(
                grouping,
                Table(
                    headers: ["KIND", "NAME"],
                    rows: grouping.events.map { ["event", $0] } + grouping.categories.map { ["category", $0] }
                ).rendered)
        }
    }
}
