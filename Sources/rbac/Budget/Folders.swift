import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Folders: RenamableNoun {
        static let record = BudgetRecord.folder
        static let about = (
            abstract: "Folders of a scenario's items (file an item with rbac budget items add|edit --folder).",
            example: "rbac budget folders add Reception --couple C"
        )
        static let verbs: [any ParsableCommand.Type] = [Add.self, RBAC.BudgetCommand.Rename<Self>.self]

        static let listAbstract = "List a scenario's folders."
        static func list(_ budget: CoupleBudget, _ scope: InScenario, page: PageRequest<String>?, as actor: Actor)
            async throws
            -> [Folder]
        {
            try await budget.folders(scenario: try await scope.id(in: budget, as: actor), page: page, as: actor)
        }

        static func rename(_ budget: CoupleBudget, _ id: UUID, to name: String, as actor: Actor) async throws -> Folder
        {
            try await budget.renameFolder(id, to: name, as: actor)
        }

        static func table(_ folders: [Folder]) -> Table {
            Table(headers: ["ID", "NAME"], rows: folders.map { [idText($0.id), $0.name] })
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a folder to a scenario.", discussion: "Example: \(Folders.about.example)")
            @Argument(help: "Its name.") var name: String
            @OptionGroup var options: Options
            @OptionGroup var scenario: InScenario

            func run() async throws {
                try await options.write(Folders.table) {
                    try await $0.createFolder(named: name, scenario: try await scenario.id(in: $0, as: $1), as: $1)
                }
            }
        }
    }
}
