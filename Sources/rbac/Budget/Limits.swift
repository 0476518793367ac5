import ArgumentParser
import Budget
import Collaboration
import Foundation
import Storage

extension RBAC.BudgetCommand {
    struct Limits: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "How many rows of each budget table a couple may hold (the operator's).",
            discussion: """
                A write that would take a couple past a limit adds nothing and fails (exit 4). The limits hold \
                for every couple.

                Example: rbac budget limits set budget_items=50000 expenses=200000
                """,
            subcommands: [List.self, Set.self])

        static func repository(_ context: CommandContext) -> any BudgetRepository {
            PostgresBudgetRepository(pool: context.pool)
        }

        static func print(_ limits: [BudgetRowLimit], withRows: Bool, _ output: OutputOptions) throws {
            try output.print(
                limits,
                Table(
                    headers: ["TABLE", "LIMIT"] + (withRows ? ["ROWS"] : []),
                    rows: limits.map { [$0.table, String($0.maxRows)] + ($0.rows.map { [String($0)] } ?? []) }
                ).rendered)
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The limits; with --couple, how many rows that couple holds.",
                discussion: "Example: rbac budget limits list --couple C")
            @Option(help: "Also show how many rows this couple (id) holds.") var couple: String?
            @OptionGroup var options: OperatorOptions

            func validate() throws { _ = try couple.map(Parse.couple) }

            func run() async throws {
                let couple = try couple.map(Parse.couple)
                let limits = try await options.run {
                    try await Limits.repository($0).rowLimits(couple: couple)
                }
                try Limits.print(limits, withRows: couple != nil, options.output)
            }
        }

        struct Set: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change limits, all or none, and print them.",
                discussion: "Example: rbac budget limits set gifts_and_owed=2000")
            @Argument(help: ArgumentHelp("A table's new limit.", valueName: "table=rows")) var changes: [String]
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                guard !changes.isEmpty else { throw ValidationError("give at least one table=rows") }
                _ = try parsedChanges()
            }

            private func parsedChanges() throws -> [(table: String, maxRows: Int)] {
                try changes.map { change in
                    let parts = change.split(separator: "=", maxSplits: 1).map(String.init)
                    guard parts.count == 2, !parts[0].isEmpty else {
                        throw ValidationError("a limit is table=rows, e.g. budget_items=50000, not \(quoted(change))")
                    }
                    guard parts[1].isDigits, let rows = Int(parts[1]), (0...Int(Int32.max)).contains(rows) else {
                        throw ValidationError(
                            "\(parts[0]): the limit must be a whole number from 0 to \(Int32.max), not \(quoted(parts[1]))"
                        )
                    }
                    return (parts[0], rows)
                }
            }

            func run() async throws {
                let changes = try parsedChanges()
                let limits = try await options.run {
                    let repository = Limits.repository($0)
                    try await repository.setRowLimits(changes)
                    return try await repository.rowLimits(couple: nil)
                }
                try Limits.print(limits, withRows: false, options.output)
            }
        }
    }
}
