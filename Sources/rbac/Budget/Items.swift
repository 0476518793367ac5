import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Items: BudgetNoun {
        static let record = BudgetRecord.item
        static let about = (
            abstract: "A scenario's budget items: what the couple plans to spend on.",
            example: "rbac budget items add Venue --couple C --budgeted 5000"
        )
        static let verbs: [any ParsableCommand.Type] = [Add.self, SetBudget.self, Edit.self]

        static let listAbstract = "List a scenario's items."
        static func list(_ budget: CoupleBudget, _ scope: InScenario, page: PageRequest<String>?, as actor: Actor)
            async throws
            -> [BudgetItem]
        {
            try await budget.items(scenario: try await scope.id(in: budget, as: actor), page: page, as: actor)
        }

        static func table(_ items: [BudgetItem]) -> Table {
            Table(
                headers: ["ID", "NAME", "CATEGORY", "EVENT", "FOLDER", "BUDGETED"],
                rows: items.map {
                    [idText($0.id), $0.name, $0.category, $0.event, idText($0.folderID), Money.text($0.budgeted)]
                })
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add an item to a scenario.", discussion: "Example: \(Items.about.example)")
            @Argument(help: "Its name.") var name: String
            @OptionGroup var options: Options
            @OptionGroup var scenario: InScenario
            @Option(parsing: .unconditional, help: "The amount budgeted.") var budgeted: String
            @Option(help: "Its category.") var category = ""
            @Option(help: "Its event.") var event = ""
            @Option(help: "The folder (id) to file it in.") var folder: String?

            func run() async throws {
                let amount = try Money.parse(budgeted, "--budgeted")
                let folder = try folder.map { try Parse.id($0, "folder") }
                try await options.write(Items.table) {
                    try await $0.createItem(
                        named: name, scenario: try await scenario.id(in: $0, as: $1), budgeted: amount, folder: folder,
                        category: category, event: event, as: $1)
                }
            }
        }

        struct SetBudget: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-budget", abstract: "Change an item's budget.",
                discussion: """
                    Its expenses are split again over their items by the items' budgets; prints the new split.

                    Example: rbac budget items set-budget I --couple C --budgeted 6500
                    """)
            @Argument(help: "The item's id.") var item: String
            @Option(parsing: .unconditional, help: "The amount budgeted.") var budgeted: String
            @OptionGroup var options: Options

            func run() async throws {
                let id = try Parse.id(item, "item")
                let amount = try Money.parse(budgeted, "--budgeted")
                let allocations = try await options.run { try await $0.setBudgeted(item: id, to: amount, as: $1) }
                try options.output.print(allocations, Expenses.allocationTable(allocations).rendered)
            }
        }

        struct Edit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change an item's name, category, event or folder.",
                discussion: "Example: rbac budget items edit I --couple C --category Venue --folder F")
            @Argument(help: "The item's id.") var item: String
            @Option(help: "The new name.") var name: String?
            @Option(help: "The category.") var category: String?
            @Option(help: "The event.") var event: String?
            @Option(help: "The folder (id) to file it in.") var folder: String?
            @Flag(help: "Take it out of its folder.") var noFolder = false
            @OptionGroup var options: Options

            func validate() throws {
                guard name != nil || category != nil || event != nil || folder != nil || noFolder else {
                    throw ValidationError("give what to change: --name, --category, --event, --folder or --no-folder")
                }
                guard !(noFolder && folder != nil) else {
                    throw ValidationError("--folder and --no-folder cannot go together")
                }
            }

            func run() async throws {
                let id = try Parse.id(item, "item")
                let folder = try folder.map { try Parse.id($0, "folder") }
                let changes = ItemEdit(
                    name: name, category: category, event: event, folder: change(folder, clear: noFolder))
                try await options.write(Items.table) { try await $0.editItem(id, changes, as: $1) }
            }
        }
    }
}
