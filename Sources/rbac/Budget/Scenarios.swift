import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Scenarios: RenamableNoun {
        static let record = BudgetRecord.scenario
        static let about = (
            abstract: "What-if versions of the budget, one of them primary.",
            example: "rbac budget scenarios add Main --couple C --primary"
        )
        static let verbs: [any ParsableCommand.Type] = [
            Add.self, RBAC.BudgetCommand.Rename<Self>.self, MakePrimary.self, Clone.self,
        ]

        static let listAbstract = "List the couple's scenarios."
        static func list(_ budget: CoupleBudget, _ scope: WholeCouple, page: PageRequest<Date>?, as actor: Actor)
            async throws
            -> [Scenario]
        {
            try await budget.scenarios(page: page, as: actor)
        }

        static func rename(_ budget: CoupleBudget, _ id: UUID, to name: String, as actor: Actor) async throws
            -> Scenario
        {
            try await budget.renameScenario(id, to: name, as: actor)
        }

        static func table(_ scenarios: [Scenario]) -> Table {
            Table(
                headers: ["ID", "NAME", "PRIMARY"],
                rows: scenarios.map { [idText($0.id), $0.name, $0.isPrimary ? "yes" : ""] })
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a scenario.", discussion: "Example: \(Scenarios.about.example)")
            @Argument(help: "Its name.") var name: String
            @Flag(help: "Make it the primary scenario.") var primary = false
            @OptionGroup var options: Options

            func run() async throws {
                try await options.write(Scenarios.table) {
                    try await $0.createScenario(named: name, primary: primary, as: $1)
                }
            }
        }

        struct MakePrimary: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "make-primary", abstract: "Make a scenario the primary one.",
                discussion: "Example: rbac budget scenarios make-primary S --couple C")
            @Argument(help: "The scenario's id.") var scenario: String
            @OptionGroup var options: Options

            func run() async throws {
                let id = try Parse.id(scenario, "scenario")
                try await options.write(Scenarios.table) { try await $0.setPrimaryScenario(id, as: $1) }
            }
        }

        struct Clone: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Copy a scenario with its folders, items and allocations, atomically.",
                discussion: "Example: rbac budget scenarios clone S --couple C --name \"Main, smaller venue\"")
            @Argument(help: "The scenario to copy.") var scenario: String
            @Option(help: "The copy's name.") var name: String
            @OptionGroup var options: Options

            func run() async throws {
                let source = try Parse.id(scenario, "scenario")
                try await options.write(Scenarios.table) { try await $0.cloneScenario(source, named: name, as: $1) }
            }
        }
    }
}
