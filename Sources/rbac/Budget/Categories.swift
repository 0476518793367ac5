import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Categories: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The events and categories a scenario's items are grouped by, each once.",
            discussion: "Example: rbac budget categories --couple C --scenario S")
        @OptionGroup var options: Options
        @Option(help: "The scenario's id.") var scenario: String

        func run() async throws {
            let scenario = try Parse.id(scenario, "scenario")
            let grouping = try await options.run { try await $0.eventCategories(scenario: scenario, as: $1) }
            try options.output.print(
                grouping,
                Table(
                    headers: ["KIND", "NAME"],
                    rows: grouping.events.map { ["event", $0] } + grouping.categories.map { ["category", $0] }
                ).rendered)
        }
    }
}
