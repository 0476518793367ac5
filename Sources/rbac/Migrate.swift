import ArgumentParser
import Foundation
import Postgres
import Storage

extension RBAC {
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply the database migrations in sql/ and the access policy in policies/, or show their status.",
            discussion: """
                Each migration runs in its own transaction and is recorded with its checksum. Running again \
                applies only what is new; an applied migration whose file changed is refused (exit 4). \
                Concurrent runs are safe: they wait for each other.
                """)

        @Flag(help: "List each migration as applied or pending; change nothing.")
        var status = false

        @OptionGroup var label: OperatorLabelOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            var configuration: PostgresConfiguration?
            do {
                let migrations = try Migration.load(from: try ProjectFiles.directory("sql"))
                let policy = try AccessPolicy.load(from: try ProjectFiles.directory("policies"))
                let runner = MigrationRunner(migrations: migrations)
                let (pool, resolved) = try await database.pool(operatorLabel: label.recorded)
                configuration = resolved
                defer { Task { await pool.close() } }
                if status {
                    try printStatus(try await runner.status(pool))
                } else {
                    let applied = try await runner.migrate(pool) { migration in
                        FileHandle.standardError.write(Data("applying \(migration.fileName)\n".utf8))
                    }
                    try await policy.apply(pool, force: false)
                    try printApplied(applied, all: migrations, database: resolved)
                }
            } catch {
                throw CommandFailure(error, database: configuration)
            }
        }

        private func printStatus(_ statuses: [MigrationRunner.Status]) throws {
            if output.json {
                try printJSON(statuses)
                return
            }
            let rows = statuses.map { status in
                [
                    String(format: "%04d", status.version), status.name, status.state.rawValue,
                    status.appliedAt.map { $0.formatted(.iso8601) } ?? "",
                ]
            }
            print(Table(headers: ["VERSION", "NAME", "STATE", "APPLIED AT"], rows: rows).rendered)
        }

        private func printApplied(_ applied: [Migration], all: [Migration], database: PostgresConfiguration) throws {
            struct Report: Encodable {
                let applied: [String]
                let version: Int
            }
            let version = all.last?.version ?? 0
            if output.json {
                try printJSON(Report(applied: applied.map(\.fileName), version: version))
            } else if applied.isEmpty {
                print("The database is up to date (version \(version)): \(database.redactedDescription)")
            } else {
                let noun = applied.count == 1 ? "migration" : "migrations"
                print(
                    "Applied \(applied.count) \(noun); the database is at version \(version): \(database.redactedDescription)"
                )
            }
        }
    }
}
