import ArgumentParser
import Budget
import Collaboration
import Foundation
import Storage

extension RBAC {
    struct BudgetCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "budget",
            abstract: "A couple's budget: scenarios, items, expenses, allocations, payments, gifts and the overview.",
            discussion: """
                Amounts are decimal numbers with at most two places (1250, 99.90); dates are YYYY-MM-DD. \
                Every command acts as the operator, or with --actor as a member whose permissions apply \
                (budget.view / budget.edit / expenses.view / expenses.edit / gifts.view / gifts.edit); limits \
                is the operator's alone. Listings print every row, or with --limit one page in id order \
                (--after the last id of the page before).

                  rbac budget scenarios --couple C --create Main --primary
                  rbac budget folders --couple C --scenario S --add Reception
                  rbac budget folders --couple C --rename F --name "Evening party"
                  rbac budget items --couple C --scenario S --add Venue --budgeted 5000
                  rbac budget expenses --couple C --add Deposit --amount 1200 --due 2026-05-01
                  rbac budget allocate --couple C --scenario S --expense E --item I1 --item I2
                  rbac budget overview --couple C --scenario S --json
                  rbac budget delete expense E --couple C
                  rbac budget expenses --couple C --limit 500
                  rbac budget limits --couple C
                """,
            subcommands: [
                Overview.self, Scenarios.self, Clone.self, Folders.self, Items.self, Categories.self, Expenses.self,
                Allocate.self, Payments.self, Gifts.self, Delete.self, Limits.self,
            ])

        /// The options every budget command takes.
        struct Common: ParsableArguments {
            @Option(help: "The couple's id.") var couple: String
            @OptionGroup var actor: ActorOptions
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws { _ = try Parse.couple(couple) }

            /// Runs `body` with the couple's budget actor and the acting person.
            func run<T>(_ body: (CoupleBudget, Actor) async throws -> T) async throws -> T {
                try await CommandContext.run(database) { context in
                    let budget = CoupleBudget(
                        couple: try Parse.couple(couple), repository: PostgresBudgetRepository(pool: context.pool),
                        checker: PermissionChecker(repository: context.repository))
                    return try await body(budget, try await context.actor(actor))
                }
            }
        }

        struct Overview: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Per budget item: budgeted, spent, gifts, effective spend; and totals.")
            @OptionGroup var common: Common
            @Option(help: "The scenario's id.") var scenario: String

            func run() async throws {
                let scenario = try Parse.id(scenario, "scenario")
                let overview = try await common.run { try await $0.overview(scenario: scenario, as: $1) }
                if common.output.json { return try printJSON(overview) }
                let rows = overview.items.map {
                    [
                        $0.item.name, Money.text($0.item.budgeted), Money.text($0.spent), Money.text($0.gifts),
                        Money.text($0.effectiveSpent), Money.text($0.remaining),
                    ]
                }
                let totals = overview.totals
                print(
                    Table(
                        headers: ["ITEM", "BUDGETED", "SPENT", "GIFTS", "EFFECTIVE", "REMAINING"],
                        rows: rows + [
                            [
                                "total", Money.text(totals.budgeted), Money.text(totals.spent),
                                Money.text(totals.gifts),
                                Money.text(totals.effectiveSpent), Money.text(totals.budgeted - totals.effectiveSpent),
                            ]
                        ]
                    ).rendered)
            }
        }

        struct Scenarios: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "List scenarios, create one (--create), make one primary (--make-primary) or rename one (--rename)."
            )
            @OptionGroup var common: Common
            @Option(help: "Create a scenario with this name.") var create: String?
            @Flag(help: "With --create: make the new scenario the primary one.") var primary = false
            @Option(help: "Make this scenario (id) the primary one.") var makePrimary: String?
            @Option(help: "Rename this scenario (id) to --name.") var rename: String?
            @Option(help: "With --rename: the new name.") var name: String?
            @OptionGroup var page: PageOptions

            func validate() throws {
                try page.refuse(with: [
                    ("--create", create != nil), ("--make-primary", makePrimary != nil), ("--rename", rename != nil),
                ])
                guard [create, makePrimary, rename].compactMap({ $0 }).count <= 1 else {
                    throw ValidationError("give one of --create, --make-primary and --rename")
                }
                guard (rename == nil) == (name == nil) else { throw ValidationError("--rename and --name go together") }
                guard !primary || create != nil else {
                    throw ValidationError("--primary goes with --create; to make a scenario primary: --make-primary ID")
                }
            }

            func run() async throws {
                let makePrimary = try makePrimary.map { try Parse.id($0, "scenario") }
                let rename = try rename.map { try Parse.id($0, "scenario") }
                let scenarios = try await common.run { budget, actor -> Listing<Scenario> in
                    if let create {
                        return .written(try await budget.createScenario(named: create, primary: primary, as: actor))
                    }
                    if let makePrimary { return .written(try await budget.setPrimaryScenario(makePrimary, as: actor)) }
                    if let rename, let name {
                        return .written(try await budget.renameScenario(rename, to: name, as: actor))
                    }
                    return .listed(try await page.read(id: \.id) { try await budget.scenarios(page: $0, as: actor) })
                }
                try common.output.print(
                    scenarios,
                    Table(
                        headers: ["ID", "NAME", "PRIMARY"],
                        rows: scenarios.rows.map {
                            [$0.id.uuidString.lowercased(), $0.name, $0.isPrimary ? "yes" : ""]
                        }
                    ).rendered)
            }
        }

        struct Clone: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Copy a scenario with its folders, items and allocations, atomically.")
            @OptionGroup var common: Common
            @Option(help: "The scenario to copy.") var scenario: String
            @Option(help: "The copy's name.") var name: String

            func run() async throws {
                let source = try Parse.id(scenario, "scenario")
                let copy = try await common.run { try await $0.cloneScenario(source, named: name, as: $1) }
                try common.output.print(
                    copy, "Cloned into scenario \"\(copy.name)\" \(copy.id.uuidString.lowercased())")
            }
        }

        struct Items: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "List a scenario's items, or add one (--add), change one's budget (--set) or its details (--edit).",
                discussion: "Changing an item's budget re-splits its expenses by the items' budgets.")
            @OptionGroup var common: Common
            @Option(help: "The scenario's id (not needed with --edit).") var scenario: String?
            @Option(help: "Add an item with this name.") var add: String?
            @Option(help: "Change the budget of this item (id).") var set: String?
            @Option(help: "Change the details of this item (id): --name, --category, --event, --folder or --no-folder.")
            var edit: String?
            @Option(parsing: .unconditional, help: "With --add or --set: the amount budgeted.") var budgeted: String?
            @Option(help: "With --edit: the new name.") var name: String?
            @Option(help: "With --add or --edit: the category.") var category: String?
            @Option(help: "With --add or --edit: the event.") var event: String?
            @Option(help: "With --add or --edit: the folder (id) to file it in.") var folder: String?
            @Flag(help: "With --edit: take it out of its folder.") var noFolder = false
            @OptionGroup var page: PageOptions

            func validate() throws {
                try page.refuse(with: [("--add", add != nil), ("--edit", edit != nil)])
                guard scenario != nil || edit != nil else {
                    throw ValidationError("--scenario is needed, except with --edit")
                }
                guard [add, set, edit].compactMap({ $0 }).count <= 1 else {
                    throw ValidationError("give one of --add, --set and --edit")
                }
                guard (add == nil && set == nil) || budgeted != nil else {
                    throw ValidationError("--add and --set need --budgeted")
                }
                guard add != nil || edit != nil || (category == nil && event == nil && folder == nil) else {
                    throw ValidationError("--category, --event and --folder go with --add or --edit")
                }
                guard edit != nil || (name == nil && !noFolder) else {
                    throw ValidationError("--name and --no-folder go with --edit")
                }
                guard !(noFolder && folder != nil) else {
                    throw ValidationError("--folder and --no-folder cannot go together")
                }
            }

            func run() async throws {
                let scenario = try scenario.map { try Parse.id($0, "scenario") }
                let amount = try budgeted.map { try Money.parse($0, "--budgeted") }
                let setID = try set.map { try Parse.id($0, "item") }
                let editID = try edit.map { try Parse.id($0, "item") }
                let folder = try folder.map { try Parse.id($0, "folder") }
                let items = try await common.run { budget, actor -> Listing<BudgetItem> in
                    if let add, let amount, let scenario {
                        return .written(
                            try await budget.createItem(
                                named: add, scenario: scenario, budgeted: amount, folder: folder,
                                category: category ?? "", event: event ?? "", as: actor))
                    }
                    if let editID {
                        let changes = ItemEdit(
                            name: name, category: category, event: event,
                            folder: change(folder, clear: noFolder))
                        return .written(try await budget.editItem(editID, changes, as: actor))
                    }
                    if let setID, let amount { _ = try await budget.setBudgeted(item: setID, to: amount, as: actor) }
                    guard let scenario else { return .listed([]) }  // validate() requires it unless --edit
                    return .listed(
                        try await page.read(id: \.id) {
                            try await budget.items(scenario: scenario, page: $0, as: actor)
                        }
                    )
                }
                try common.output.print(
                    items,
                    Table(
                        headers: ["ID", "NAME", "CATEGORY", "EVENT", "FOLDER", "BUDGETED"],
                        rows: items.rows.map {
                            [
                                $0.id.uuidString.lowercased(), $0.name, $0.category, $0.event,
                                $0.folderID?.uuidString.lowercased() ?? "", Money.text($0.budgeted),
                            ]
                        }
                    ).rendered)
            }
        }

        struct Folders: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "List a scenario's folders, add one (--add) or rename one (--rename); file items with rbac budget items --folder."
            )
            @OptionGroup var common: Common
            @Option(help: "The scenario's id (not needed with --rename).") var scenario: String?
            @Option(help: "Add a folder with this name.") var add: String?
            @Option(help: "Rename this folder (id) to --name.") var rename: String?
            @Option(help: "With --rename: the new name.") var name: String?
            @OptionGroup var page: PageOptions

            func validate() throws {
                try page.refuse(with: [("--add", add != nil), ("--rename", rename != nil)])
                guard scenario != nil || rename != nil else {
                    throw ValidationError("--scenario is needed, except with --rename")
                }
                guard add == nil || rename == nil else { throw ValidationError("give one of --add and --rename") }
                guard (rename == nil) == (name == nil) else { throw ValidationError("--rename and --name go together") }
            }

            func run() async throws {
                let scenario = try scenario.map { try Parse.id($0, "scenario") }
                let rename = try rename.map { try Parse.id($0, "folder") }
                let folders = try await common.run { budget, actor -> Listing<Folder> in
                    if let rename, let name {
                        return .written(try await budget.renameFolder(rename, to: name, as: actor))
                    }
                    guard let scenario else { return .listed([]) }  // validate() requires it unless --rename
                    if let add {
                        return .written(try await budget.createFolder(named: add, scenario: scenario, as: actor))
                    }
                    return .listed(
                        try await page.read(id: \.id) {
                            try await budget.folders(scenario: scenario, page: $0, as: actor)
                        })
                }
                try common.output.print(
                    folders,
                    Table(
                        headers: ["ID", "NAME"], rows: folders.rows.map { [$0.id.uuidString.lowercased(), $0.name] }
                    )
                    .rendered)
            }
        }

        struct Categories: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The events and categories a scenario's items are grouped by, each once.")
            @OptionGroup var common: Common
            @Option(help: "The scenario's id.") var scenario: String

            func run() async throws {
                let scenario = try Parse.id(scenario, "scenario")
                let grouping = try await common.run { try await $0.eventCategories(scenario: scenario, as: $1) }
                try common.output.print(
                    grouping,
                    Table(
                        headers: ["KIND", "NAME"],
                        rows: grouping.events.map { ["event", $0] } + grouping.categories.map { ["category", $0] }
                    ).rendered)
            }
        }

        struct Expenses: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "List expenses, or add one (--add), change one's amount (--set) or its details (--edit).")
            @OptionGroup var common: Common
            @Option(help: "Add an expense with this name.") var add: String?
            @Option(help: "Change the amount of this expense (id).") var set: String?
            @Option(help: "Change the details of this expense (id): --name, --vendor, --category, --due or --no-due.")
            var edit: String?
            @Option(parsing: .unconditional, help: "With --add or --set: the amount.") var amount: String?
            @Option(help: "With --edit: the new name.") var name: String?
            @Option(help: "With --add or --edit: the vendor.") var vendor: String?
            @Option(help: "With --add or --edit: the category.") var category: String?
            @Option(help: "With --add or --edit: the due date (YYYY-MM-DD).") var due: String?
            @Flag(help: "With --edit: remove the due date.") var noDue = false
            @Option(help: "With --set: scale the allocations of this scenario only (default: every scenario).")
            var scenario: String?
            @OptionGroup var page: PageOptions

            func validate() throws {
                try page.refuse(with: [("--add", add != nil), ("--edit", edit != nil)])
                guard [add, set, edit].compactMap({ $0 }).count <= 1 else {
                    throw ValidationError("give one of --add, --set and --edit")
                }
                guard (add == nil && set == nil) || amount != nil else {
                    throw ValidationError("--add and --set need --amount")
                }
                guard edit != nil || (name == nil && !noDue) else {
                    throw ValidationError("--name and --no-due go with --edit")
                }
                guard add != nil || edit != nil || (vendor == nil && category == nil && due == nil) else {
                    throw ValidationError("--vendor, --category and --due go with --add or --edit")
                }
                guard !(noDue && due != nil) else { throw ValidationError("--due and --no-due cannot go together") }
                if let due, CalendarDay(due) == nil {
                    throw ValidationError("--due \(quoted(due)) is not a date (YYYY-MM-DD)")
                }
            }

            func run() async throws {
                let amount = try amount.map { try Money.parse($0, "--amount") }
                let setID = try set.map { try Parse.id($0, "expense") }
                let editID = try edit.map { try Parse.id($0, "expense") }
                let scenario = try scenario.map { try Parse.id($0, "scenario") }
                let dueDate = due.flatMap(CalendarDay.init)
                let expenses = try await common.run { budget, actor -> Listing<Expense> in
                    if let add, let amount {
                        return .written(
                            try await budget.createExpense(
                                named: add, amount: amount, vendor: vendor ?? "", dueDate: dueDate,
                                category: category ?? "", as: actor))
                    }
                    if let editID {
                        let changes = ExpenseEdit(
                            name: name, vendor: vendor, category: category,
                            dueDate: change(dueDate, clear: noDue))
                        return .written(try await budget.editExpense(editID, changes, as: actor))
                    }
                    if let setID, let amount {
                        _ = try await budget.setAmount(expense: setID, to: amount, scenario: scenario, as: actor)
                    }
                    return .listed(try await page.read(id: \.id) { try await budget.expenses(page: $0, as: actor) })
                }
                try common.output.print(
                    expenses,
                    Table(
                        headers: ["ID", "NAME", "VENDOR", "CATEGORY", "AMOUNT", "DUE"],
                        rows: expenses.rows.map {
                            [
                                $0.id.uuidString.lowercased(), $0.name, $0.vendor, $0.category, Money.text($0.amount),
                                $0.dueDate?.description ?? "",
                            ]
                        }
                    ).rendered)
            }
        }

        struct Allocate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Allocate an expense to budget items of a scenario, replacing its allocations there.",
                discussion:
                    "Without --amount, the whole expense is split in proportion to the items' budgets, to the cent.")
            @OptionGroup var common: Common
            @Option(help: "The scenario's id.") var scenario: String
            @Option(help: "The expense's id.") var expense: String
            @Option(help: "A budget item's id (repeat for several).") var item: [String] = []
            @Option(
                parsing: .unconditionalSingleValue,
                help: "The amount for each --item, in order (give one per item, or none).")
            var amount: [String] = []

            func run() async throws {
                let scenario = try Parse.id(scenario, "scenario")
                let expense = try Parse.id(expense, "expense")
                let items = try item.map { try Parse.id($0, "item") }
                let amounts = amount.isEmpty ? nil : try amount.map { try Money.parse($0, "--amount") }
                let allocations = try await common.run {
                    try await $0.allocate(expense: expense, scenario: scenario, items: items, amounts: amounts, as: $1)
                }
                try common.output.print(
                    allocations,
                    Table(
                        headers: ["ITEM", "AMOUNT"],
                        rows: allocations.map { [$0.budgetItemID.uuidString.lowercased(), Money.text($0.amount)] }
                    ).rendered)
            }
        }

        struct Payments: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "Every expense's payment status; one expense's payments (--expense); or record one (--amount).")
            @OptionGroup var common: Common
            @Option(help: "List this expense's payments (id), or with --amount record one against it.") var expense:
                String?
            @Option(parsing: .unconditional, help: "With --expense: record a payment of this amount.") var amount:
                String?
            @Option(help: "With --amount: when it was paid (YYYY-MM-DD; default today).") var paidAt: String?
            @OptionGroup var page: PageOptions

            func validate() throws {
                guard amount == nil || expense != nil else { throw ValidationError("--amount needs --expense") }
                guard paidAt == nil || amount != nil else { throw ValidationError("--paid-at needs --amount") }
                if let paidAt, CalendarDay(paidAt) == nil {
                    throw ValidationError("--paid-at \(quoted(paidAt)) is not a date (YYYY-MM-DD)")
                }
            }

            func run() async throws {
                let expense = try expense.map { try Parse.id($0, "expense") }
                let amount = try amount.map { try Money.parse($0, "--amount") }
                if let expense, amount == nil {
                    let payments = try await common.run { budget, actor in
                        try await page.read(id: \.id) {
                            try await budget.payments(expense: expense, page: $0, as: actor)
                        }
                    }
                    return try common.output.print(
                        payments,
                        Table(
                            headers: ["ID", "AMOUNT", "PAID"],
                            rows: payments.map {
                                [$0.id.uuidString.lowercased(), Money.text($0.amount), "\($0.paidAt)"]
                            }
                        ).rendered)
                }
                let statuses = try await common.run { budget, actor -> [PaymentStatus] in
                    if let expense, let amount {
                        _ = try await budget.recordPayment(
                            expense: expense, amount: amount, paidAt: paidAt.flatMap(CalendarDay.init), as: actor)
                    }
                    return try await page.read(id: \.expenseID) {
                        try await budget.paymentStatuses(page: $0, as: actor)
                    }
                }
                try common.output.print(
                    statuses,
                    Table(
                        headers: ["EXPENSE", "AMOUNT", "PAID", "REMAINING", "STATUS", "DUE", "OVERDUE"],
                        rows: statuses.map {
                            [
                                $0.name, Money.text($0.amount), Money.text($0.paid), Money.text($0.remaining),
                                $0.status.rawValue,
                                $0.dueDate?.description ?? "", $0.isOverdue ? "yes" : "",
                            ]
                        }
                    ).rendered)
            }
        }

        struct Gifts: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List gifts and money owed, add one (--add FROM --amount), or change one (--edit).",
                discussion: "Money owed is marked as come in with --edit G --received.")
            @OptionGroup var common: Common
            @Option(help: "Add a gift from this person.") var add: String?
            @Option(help: "Change this gift (id): --from, --amount, --received or --owed, --item or --no-item.")
            var edit: String?
            @Option(help: "With --edit: who it is from.") var from: String?
            @Option(parsing: .unconditional, help: "With --add or --edit: the amount.") var amount: String?
            @Flag(help: "With --add or --edit: received (an added gift is otherwise owed).") var received = false
            @Flag(help: "With --edit: still owed.") var owed = false
            @Option(help: "With --add or --edit: the budget item (id) it goes towards.") var item: String?
            @Flag(help: "With --edit: set against no budget item.") var noItem = false
            @OptionGroup var page: PageOptions

            func validate() throws {
                try page.refuse(with: [("--add", add != nil), ("--edit", edit != nil)])
                guard add == nil || edit == nil else { throw ValidationError("give one of --add and --edit") }
                guard add == nil || amount != nil else { throw ValidationError("--add needs --amount") }
                guard add != nil || edit != nil || (amount == nil && item == nil && !received) else {
                    throw ValidationError("--amount, --received and --item go with --add or --edit")
                }
                guard edit != nil || (from == nil && !owed && !noItem) else {
                    throw ValidationError("--from, --owed and --no-item go with --edit")
                }
                guard !(received && owed) else { throw ValidationError("--received and --owed cannot go together") }
                guard !(noItem && item != nil) else { throw ValidationError("--item and --no-item cannot go together") }
            }

            func run() async throws {
                let amount = try amount.map { try Money.parse($0, "--amount") }
                let item = try item.map { try Parse.id($0, "item") }
                let editID = try edit.map { try Parse.id($0, "gift") }
                let gifts = try await common.run { budget, actor -> Listing<Gift> in
                    if let add, let amount {
                        return .written(
                            try await budget.recordGift(
                                from: add, amount: amount, received: received, budgetItem: item, as: actor))
                    }
                    if let editID {
                        let changes = GiftEdit(
                            from: from, amount: amount, received: received ? true : owed ? false : nil,
                            budgetItem: change(item, clear: noItem))
                        return .written(try await budget.editGift(editID, changes, as: actor))
                    }
                    return .listed(try await page.read(id: \.id) { try await budget.gifts(page: $0, as: actor) })
                }
                try common.output.print(
                    gifts,
                    Table(
                        headers: ["ID", "FROM", "AMOUNT", "RECEIVED", "ITEM"],
                        rows: gifts.rows.map {
                            [
                                $0.id.uuidString.lowercased(), $0.from, Money.text($0.amount), $0.received ? "yes" : "",
                                $0.budgetItemID?.uuidString.lowercased() ?? "",
                            ]
                        }
                    ).rendered)
            }
        }

        struct Limits: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "How many rows of each budget table a couple may hold; with --couple, how many it does.",
                discussion: """
                    A write that would take a couple past a limit adds nothing and fails (exit 4). The limits \
                    hold for every couple; --set changes them, all or none, and prints them.

                      rbac budget limits --couple C
                      rbac budget limits --set budget_items=50000 --set expenses=200000
                    """)
            @Option(help: "Also show how many rows this couple (id) holds.") var couple: String?
            @Option(
                name: .customLong("set"),
                help: ArgumentHelp("Change a table's limit (repeatable).", valueName: "table=rows"))
            var changes: [String] = []
            @OptionGroup var label: OperatorLabelOptions
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws {
                if let couple { _ = try Parse.couple(couple) }
                _ = try parsedChanges()
            }

            /// The --set options as (table, rows).
            private func parsedChanges() throws -> [(table: String, maxRows: Int)] {
                try changes.map { change in
                    let parts = change.split(separator: "=", maxSplits: 1).map(String.init)
                    guard parts.count == 2, !parts[0].isEmpty else {
                        throw ValidationError("--set takes table=rows, e.g. budget_items=50000, not \(quoted(change))")
                    }
                    guard let rows = Int(parts[1]), (0...Int(Int32.max)).contains(rows) else {
                        throw ValidationError(
                            "--set \(parts[0]): the limit must be a whole number from 0 to \(Int32.max), not \(quoted(parts[1]))"
                        )
                    }
                    return (parts[0], rows)
                }
            }

            func run() async throws {
                let couple = try couple.map(Parse.couple)
                let changes = try parsedChanges()
                let limits = try await CommandContext.run(database, operatorLabel: label.recorded) { context in
                    let repository = PostgresBudgetRepository(pool: context.pool)
                    if !changes.isEmpty { try await repository.setRowLimits(changes) }
                    return try await repository.rowLimits(couple: couple)
                }
                try output.print(
                    limits,
                    Table(
                        headers: ["TABLE", "LIMIT"] + (couple == nil ? [] : ["ROWS"]),
                        rows: limits.map { [$0.table, String($0.maxRows)] + ($0.rows.map { [String($0)] } ?? []) }
                    ).rendered)
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Delete a scenario, folder, item, expense, payment or gift, with what depends on it.",
                discussion: """
                    A scenario goes with its folders, items and their allocations (never the primary one); a \
                    folder's items stay, in no folder; an item goes with its allocations; an expense with its \
                    payments and allocations. Gifts set against a deleted item stay, unlinked. Needs budget.edit \
                    (expenses.edit for expenses and payments, gifts.edit for gifts).
                    """)
            @Argument(help: "What kind of record to delete.") var record: BudgetRecord
            @Argument(help: "Its id.") var id: String
            @OptionGroup var common: Common

            func run() async throws {
                let id = try Parse.id(id, record.rawValue)
                let deletion = try await common.run { try await $0.delete(record, id: id, as: $1) }
                try common.output.print(deletion, "Deleted \(record.rawValue) \(id.uuidString.lowercased())")
            }
        }
    }
}

extension BudgetRecord: ExpressibleByArgument {}

/// An edit's value for a field that can also be cleared (`--no-...`): nil keeps the field, `.some(nil)` clears it.
private func change<T>(_ value: T?, clear: Bool) -> T?? {
    clear ? .some(nil) : value.map { .some($0) }
}
