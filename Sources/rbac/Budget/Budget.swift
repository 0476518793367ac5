import ArgumentParser
import Budget
import Collaboration
import Foundation
import Server
import Storage

extension RBAC {
    struct BudgetCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "budget",
            abstract: "A couple's budget: scenarios, folders, items, expenses, payments, gifts and the overview.",
            discussion: """
                Each kind of record is a noun with verbs: list, add, edit, delete, and a few that say more \
                (set-budget, allocate, receive). Amounts are decimal numbers with at most two places (1250, \
                99.90); dates are YYYY-MM-DD. Every command acts as the operator, or with --actor as a member \
                whose permissions apply (budget.view / budget.edit / expenses.view / expenses.edit / \
                gifts.view / gifts.edit); limits are the operator's alone. A listing prints every row, or with \
                --limit one page of it (--after the last id of the page before). What a scenario holds is the \
                primary scenario's unless --scenario names another.

                Example: rbac budget items add Venue --couple C --budgeted 5000
                """,
            subcommands: [
                Overview.self, Scenarios.self, Folders.self, Items.self, Categories.self, Expenses.self,
                Payments.self, Gifts.self, Limits.self,
            ])

        /// The options every budget command takes: the couple, and those of `Acting`, declared here (see there).
        struct Options: Acting {
            @Option(help: "The couple's id.") var couple: String
            @Option(help: actorHelp) var actor: String?
            @OptionGroup var label: OperatorLabelOptions
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws {
                _ = try Parse.couple(couple)
                try validateActor()
            }

            /// Runs `body` with the couple's budget actor and the acting person.
            func run<T>(_ body: (CoupleBudget, Actor) async throws -> T) async throws -> T {
                try await run { (context: CommandContext, actor) in
                    let budget = CoupleBudget(
                        couple: try Parse.couple(couple), repository: PostgresBudgetRepository(pool: context.pool),
                        checker: PermissionChecker(repository: context.repository))
                    return try await body(budget, actor)
                }
            }

            /// Runs a verb that writes one record, and prints it: as JSON with --json, else its row of `table`.
            func write<Row: Encodable>(
                _ table: ([Row]) -> Table, _ body: (CoupleBudget, Actor) async throws -> Row
            ) async throws {
                let row = try await run(body)
                try output.print(row, table([row]).rendered)
            }
        }
    }
}

/// A kind of budget record as a command: `rbac budget <noun> list`, its own verbs, then `delete`.
protocol BudgetNoun: AsyncParsableCommand {
    associatedtype Row: Encodable & ListedRow where Row.OrderKey == Key
    /// What the listing is ordered by (a name, a date), which a page begins after.
    associatedtype Key: PlaceKey
    /// What narrows the listing (a scenario, an expense), as options.
    associatedtype Scope: ListingScope
    static var record: BudgetRecord { get }
    /// The noun's abstract, and an example of its use for the discussion.
    static var about: (abstract: String, example: String) { get }
    /// The verbs between `list` and `delete`.
    static var verbs: [any ParsableCommand.Type] { get }
    static var listAbstract: String { get }
    static func list(_ budget: CoupleBudget, _ scope: Scope, page: PageRequest<Key>?, as actor: Actor) async throws
        -> [Row]
    static func table(_ rows: [Row]) -> Table
}

extension BudgetNoun {
    /// `rbac budget <noun>`: the record kind in the plural.
    static var commandPath: String { "rbac budget \(record.rawValue)s" }

    static var configuration: CommandConfiguration {
        CommandConfiguration(
            abstract: about.abstract, discussion: "Example: \(about.example)",
            subcommands: [RBAC.BudgetCommand.List<Self>.self] + verbs + [RBAC.BudgetCommand.Delete<Self>.self])
    }
}

/// A kind of budget record with a name of its own to change (scenarios, folders).
protocol RenamableNoun: BudgetNoun {
    static func rename(_ budget: CoupleBudget, _ id: UUID, to name: String, as actor: Actor) async throws -> Row
}

extension RBAC.BudgetCommand {
    /// `rbac budget <noun> rename ID --name NAME`, the same for every noun that has one.
    struct Rename<Noun: RenamableNoun>: AsyncParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "rename", abstract: "Rename a \(Noun.record.rawValue).",
                discussion: "Example: \(Noun.commandPath) rename ID --couple C --name \"New name\"")
        }
        @Argument(help: "Its id.") var id: String
        @Option(help: "The new name.") var name: String
        @OptionGroup var options: Options

        func run() async throws {
            let id = try Parse.id(id, Noun.record.rawValue)
            try await options.write(Noun.table) { try await Noun.rename($0, id, to: name, as: $1) }
        }
    }

    /// `rbac budget <noun> delete ID`, the same for every noun.
    struct Delete<Noun: BudgetNoun>: AsyncParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "delete", abstract: "Delete one \(Noun.record.rawValue) and what depends on it.",
                discussion: """
                    A scenario goes with its folders, items and their allocations (never the primary one); a \
                    folder's items stay, in no folder; an item goes with its allocations; an expense with its \
                    payments and allocations. Gifts set against a deleted item stay, unlinked.

                    Example: \(Noun.commandPath) delete ID --couple C
                    """)
        }
        @Argument(help: "Its id.") var id: String
        @OptionGroup var options: Options

        func run() async throws {
            let id = try Parse.id(id, Noun.record.rawValue)
            let deletion = try await options.run { try await $0.delete(Noun.record, id: id, as: $1) }
            try options.output.print(deletion, "Deleted \(Noun.record.rawValue) \(idText(id))")
        }
    }

    /// `rbac budget <noun> list`, the same for every noun: every row, or with --limit one page of them.
    struct List<Noun: BudgetNoun>: AsyncParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "list", abstract: Noun.listAbstract,
                discussion: "Example: \(Noun.commandPath) list --couple C\(Noun.Scope.example) --limit 50")
        }
        @OptionGroup var options: Options
        @OptionGroup var scope: Noun.Scope
        @OptionGroup var page: PageOptions<Noun.Key>

        func run() async throws {
            let rows = try await options.run { budget, actor in
                let scope = try await scope.resolved(in: budget, as: actor)
                return try await page.read(options.output) { try await Noun.list(budget, scope, page: $0, as: actor) }
            }
            try options.output.print(rows, Noun.table(rows).rendered)
        }
    }
}

/// What narrows a budget listing, as options.
protocol ListingScope: ParsableArguments {
    /// Those options in an example, each after a space, as they follow `--couple C` (empty for none).
    static var example: String { get }
    /// The scope with the defaults it takes from the couple's budget filled in: read once, so that every page of
    /// a listing has the same.
    func resolved(in budget: CoupleBudget, as actor: Actor) async throws -> Self
}

extension ListingScope {
    func resolved(in budget: CoupleBudget, as actor: Actor) async throws -> Self { self }
}

/// The scope of a listing of the couple's rows: no option.
struct WholeCouple: ListingScope {
    static let example = ""
}

/// `--scenario`, for what a scenario holds; without it, the couple's primary scenario, the one a couple with a
/// single plan has.
struct InScenario: ListingScope {
    static let example = ""
    @Option(help: "The scenario's id (default: the couple's primary scenario).") var scenario: String?

    func validate() throws { _ = try scenario.map { try Parse.id($0, "scenario") } }

    /// The scenario given, or the couple's primary one.
    func id(in budget: CoupleBudget, as actor: Actor) async throws -> UUID {
        if let scenario { return try Parse.id(scenario, "scenario") }
        guard let primary = try await budget.primaryScenario(as: actor) else {
            throw BudgetError(
                .notFound,
                "the couple has no primary scenario: name one with --scenario, or make one primary "
                    + "(rbac budget scenarios add NAME --primary, or make-primary S)")
        }
        return primary.id
    }

    func resolved(in budget: CoupleBudget, as actor: Actor) async throws -> InScenario {
        var resolved = self
        resolved.scenario = idText(try await id(in: budget, as: actor))
        return resolved
    }
}

/// An edit's value for a field that can also be cleared (`--no-...`): nil keeps the field, `.some(nil)` clears it.
func change<T>(_ value: T?, clear: Bool) -> T?? {
    clear ? .some(nil) : value.map { .some($0) }
}
