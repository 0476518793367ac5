import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Expenses: BudgetNoun {
        static let record = BudgetRecord.expense
        static let about = (
            abstract: "The couple's expenses, and how each is allocated to the items of each scenario.",
            example: "rbac budget expenses add Deposit --couple C --amount 1200 --due 2027-05-01"
        )
        static let verbs: [any ParsableCommand.Type] = [Add.self, SetAmount.self, Edit.self, Allocate.self]

        static let listAbstract = "List the couple's expenses."
        static func list(_ budget: CoupleBudget, _ scope: WholeCouple, page: PageRequest<DueAndName>?, as actor: Actor)
            async throws
            -> [Expense]
        {
            try await budget.expenses(page: page, as: actor)
        }

        static func table(_ expenses: [Expense]) -> Table {
            Table(
                headers: ["ID", "NAME", "VENDOR", "CATEGORY", "AMOUNT", "DUE"],
                rows: expenses.map {
                    [
                        idText($0.id), $0.name, $0.vendor, $0.category, Money.text($0.amount),
                        $0.dueDate?.description ?? "",
                    ]
                })
        }

        static func allocationTable(_ allocations: [Allocation]) -> Table {
            Table(
                headers: ["EXPENSE", "ITEM", "AMOUNT"],
                rows: allocations.map { [idText($0.expenseID), idText($0.budgetItemID), Money.text($0.amount)] })
        }

        /// `--due`, checked to be a date.
        static func day(_ text: String?, _ option: String) throws -> CalendarDay? {
            guard let text else { return nil }
            guard let day = CalendarDay(text) else {
                throw ValidationError("\(option) \(CalendarDay.refusal(text))")
            }
            return day
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add an expense.", discussion: "Example: \(Expenses.about.example)")
            @Argument(help: "Its name.") var name: String
            @Option(parsing: .unconditional, help: "The amount.") var amount: String
            @Option(help: "The vendor.") var vendor = ""
            @Option(help: "The category.") var category = ""
            @Option(help: "When it is due (YYYY-MM-DD).") var due: String?
            @OptionGroup var options: Options

            func validate() throws { _ = try Expenses.day(due, "--due") }

            func run() async throws {
                let amount = try Money.parse(amount, "--amount")
                let due = try Expenses.day(due, "--due")
                try await options.write(Expenses.table) {
                    try await $0.createExpense(
                        named: name, amount: amount, vendor: vendor, dueDate: due, category: category, as: $1)
                }
            }
        }

        struct SetAmount: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-amount", abstract: "Change an expense's amount.",
                discussion: """
                    Its allocations are scaled to add up to the new amount; prints them.

                    Example: rbac budget expenses set-amount E --couple C --amount 1500
                    """)
            @Argument(help: "The expense's id.") var expense: String
            @Option(parsing: .unconditional, help: "The new amount.") var amount: String
            @Option(help: "Scale the allocations of this scenario only (default: every scenario).") var scenario:
                String?
            @OptionGroup var options: Options

            func run() async throws {
                let id = try Parse.id(expense, "expense")
                let amount = try Money.parse(amount, "--amount")
                let scenario = try scenario.map { try Parse.id($0, "scenario") }
                let allocations = try await options.run {
                    try await $0.setAmount(expense: id, to: amount, scenario: scenario, as: $1)
                }
                try options.output.print(allocations, Expenses.allocationTable(allocations).rendered)
            }
        }

        struct Edit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change an expense's name, vendor, category or due date.",
                discussion: "Example: rbac budget expenses edit E --couple C --vendor \"Villa Rosa\" --no-due")
            @Argument(help: "The expense's id.") var expense: String
            @Option(help: "The new name.") var name: String?
            @Option(help: "The vendor.") var vendor: String?
            @Option(help: "The category.") var category: String?
            @Option(help: "When it is due (YYYY-MM-DD).") var due: String?
            @Flag(help: "Remove the due date.") var noDue = false
            @OptionGroup var options: Options

            func validate() throws {
                guard name != nil || vendor != nil || category != nil || due != nil || noDue else {
                    throw ValidationError("give what to change: --name, --vendor, --category, --due or --no-due")
                }
                guard !(noDue && due != nil) else { throw ValidationError("--due and --no-due cannot go together") }
                _ = try Expenses.day(due, "--due")
            }

            func run() async throws {
                let id = try Parse.id(expense, "expense")
                let changes = ExpenseEdit(
                    name: name, vendor: vendor, category: category,
                    dueDate: change(try Expenses.day(due, "--due"), clear: noDue))
                try await options.write(Expenses.table) { try await $0.editExpense(id, changes, as: $1) }
            }
        }

        struct Allocate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Allocate an expense to budget items of a scenario, replacing its allocations there.",
                discussion: """
                    Without --amount, the whole expense is split in proportion to the items' budgets, to the cent.

                    Example: rbac budget expenses allocate E --couple C --item I1 --item I2
                    """)
            @Argument(help: "The expense's id.") var expense: String
            @Option(help: "The items' scenario (default: the one they are in).") var scenario: String?
            @Option(help: "A budget item's id (repeat for several).") var item: [String]
            @Option(
                parsing: .unconditionalSingleValue,
                help: "The amount for each --item, in order (give one per item, or none).")
            var amount: [String] = []
            @OptionGroup var options: Options

            func run() async throws {
                let expense = try Parse.id(expense, "expense")
                let scenario = try scenario.map { try Parse.id($0, "scenario") }
                let items = try item.map { try Parse.id($0, "item") }
                let amounts = amount.isEmpty ? nil : try amount.map { try Money.parse($0, "--amount") }
                let allocations = try await options.run {
                    try await $0.allocate(
                        expense: expense, scenario: scenario, items: items, amounts: amounts, as: $1)
                }
                try options.output.print(allocations, Expenses.allocationTable(allocations).rendered)
            }
        }
    }
}
