import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Scenarios: AsyncParsableCommand, DeletableBudgetRecord, BudgetListing {
        static let record = BudgetRecord.scenario
        static let configuration = CommandConfiguration(
            abstract: "What-if versions of the budget, one of them primary.",
            discussion: "Example: rbac budget scenarios add Main --couple C --primary",
            subcommands: [
                List<Scenarios>.self, Add.self, Rename.self, MakePrimary.self, Clone.self, Delete<Scenarios>.self,
            ])

        static let listAbstract = "List the couple's scenarios."
        static func id(_ row: Scenario) -> UUID { row.id }
        static func list(_ budget: CoupleBudget, _ scope: WholeCouple, page: PageRequest?, as actor: Actor) async throws
            -> [Scenario]
        {
            try await budget.scenarios(page: page, as: actor)
        }

        static func table(_ scenarios: [Scenario]) -> Table {
            Table(
                headers: ["ID", "NAME", "PRIMARY"],
                rows: scenarios.map { [idText($0.id), $0.name, $0.isPrimary ? "yes" : ""] })
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Add a scenario.")
            @Argument(help: "Its name.") var name: String
            @Flag(help: "Make it the primary scenario.") var primary = false
            @OptionGroup var options: Options

            func run() async throws {
                let scenario = try await options.run {
                    try await $0.createScenario(named: name, primary: primary, as: $1)
                }
                try options.printWritten(scenario, Scenarios.table)
            }
        }

        struct Rename: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Rename a scenario.")
            @Argument(help: "The scenario's id.") var scenario: String
            @Option(help: "The new name.") var name: String
            @OptionGroup var options: Options

            func run() async throws {
                let id = try Parse.id(scenario, "scenario")
                let renamed = try await options.run { try await $0.renameScenario(id, to: name, as: $1) }
                try options.printWritten(renamed, Scenarios.table)
            }
        }

        struct MakePrimary: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "make-primary", abstract: "Make a scenario the primary one.")
            @Argument(help: "The scenario's id.") var scenario: String
            @OptionGroup var options: Options

            func run() async throws {
                let id = try Parse.id(scenario, "scenario")
                let primary = try await options.run { try await $0.setPrimaryScenario(id, as: $1) }
                try options.printWritten(primary, Scenarios.table)
            }
        }

        struct Clone: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Copy a scenario with its folders, items and allocations, atomically.")
            @Argument(help: "The scenario to copy.") var scenario: String
            @Option(help: "The copy's name.") var name: String
            @OptionGroup var options: Options

            func run() async throws {
                let source = try Parse.id(scenario, "scenario")
                let copy = try await options.run { try await $0.cloneScenario(source, named: name, as: $1) }
                try options.printWritten(copy, Scenarios.table)
            }
        }
    }
}
