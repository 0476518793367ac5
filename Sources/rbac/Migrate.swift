import ArgumentParser
import Foundation
import Postgres
import Storage
import Synchronization

extension RBAC {
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply the database migrations in sql/ and the access policy in policies/, or show their status.",
            discussion: """
                New migrations (sql/NNNN_*.sql) run in order, then the definitions of functions and triggers \
                (sql/functions/*.sql) whose files changed, all in one transaction, each recorded with its \
                checksum; then policies/, if it changed or a migration ran since it was applied. Running again \
                applies only what is new; an applied migration whose file changed is refused (exit 4), and so is \
                a run in which a file fails, naming it and what it raised: nothing of that run is applied. \
                Concurrent runs are safe: they wait for each other. A statement that waits --lock-timeout for a \
                lock another session holds ends the run (exit 5), rather than hold every query of its table \
                behind it. Applying needs a superuser, or on plain PostgreSQL the database's owner with \
                CREATEROLE as a member of rbac_operator; --status, and a run that finds nothing to apply, need \
                only a login in rbac_operator.

                On a Citus coordinator (the citus extension on every node, the workers added), --citus then \
                distributes the budget and each couple's audit log by couple (sql/citus/distribute.sql), in \
                the same transaction; the rest stays on the coordinator. On a database distributed before, a \
                plain rbac migrate distributes what new migrations add (a budget table a release adds), and \
                --citus again changes nothing. See docs/decisions/0009.

                Examples:
                  rbac migrate --status
                  rbac migrate --citus
                """)

        @Flag(help: "List each migration, definition file and the policy as applied or pending; change nothing.")
        var status = false

        @Flag(help: "Then distribute the budget and the audit log by couple on this Citus coordinator.")
        var citus = false

        func validate() throws {
            if status && citus { throw ValidationError("give --status or --citus, not both") }
        }

        @OptionGroup var lockWaits: LockTimeoutOptions
        @OptionGroup var options: OperatorOptions

        func run() async throws {
            var configuration: PostgresConfiguration?
            // The file being applied, to name it when it fails.
            let applying = Mutex<String?>(nil)
            var migrated = false
            do {
                let runner = try MigrationRunner.load(from: try ProjectFiles.directory("sql"))
                let policy = try AccessPolicy.load(from: try ProjectFiles.directory("policies"))
                let (pool, resolved) = try await options.database.pool(operatorLabel: options.label.recorded)
                configuration = resolved
                try await ensuring {
                    if status {
                        let migrations = try await runner.status(pool)
                        let pending = migrations.contains { $0.version != nil && $0.state == .pending }
                        try printStatus(migrations + [try await policy.status(pool, pendingMigrations: pending)])
                    } else {
                        try await CommandContext.requireOperator(pool, database: resolved, migrating: true)
                        let applied = try await runner.migrate(
                            pool, distribute: citus, lockTimeout: lockWaits.duration
                        ) { fileName in
                            applying.withLock { $0 = fileName }
                            printError("applying \(fileName)")
                        }
                        applying.withLock { $0 = nil }
                        migrated = !applied.isEmpty
                        let policyApplied = try await policy.apply(
                            pool, force: false, lockTimeout: lockWaits.duration)
                        try printApplied(applied, policyApplied: policyApplied, runner: runner, database: resolved)
                    }
                } finally: {
                    await pool.close()
                }
            } catch let error as PostgresError where error.kind == .server {
                let file = applying.withLock { $0 }
                if let failure = lockWaits.failure(
                    error, during: "applying \(file ?? "the access policy")",
                    undone: file != nil ? "nothing was applied" : migrated ? "only the migrations were" : "it was not")
                {
                    throw failure
                }
                guard let file else { throw CommandFailure(error, database: configuration) }
                // The files are this project's own SQL, and what they raise is written for whoever migrates (a
                // row that stops a migration, a database of the wrong encoding): shown whole, with its hint.
                throw CommandFailure(
                    .conflict,
                    "applying \(file) failed, so nothing was applied: \(error.message)"
                        + (error.hint.map { "; \($0)" } ?? ""))
            } catch {
                throw CommandFailure(error, database: configuration)
            }
        }

        private func printStatus(_ statuses: [MigrationRunner.Status]) throws {
            if options.output.json {
                try printJSON(statuses)
                return
            }
            let rows = statuses.map { status in
                [
                    status.version.map { String(format: "%04d", $0) } ?? "", status.fileName, status.state.rawValue,
                    status.appliedAt.map { $0.formatted(.iso8601) } ?? "",
                ]
            }
            print(Table(headers: ["VERSION", "FILE", "STATE", "APPLIED AT"], rows: rows).rendered)
        }

        private func printApplied(
            _ applied: MigrationRunner.Applied, policyApplied: Bool, runner: MigrationRunner,
            database: PostgresConfiguration
        ) throws {
            struct Report: Encodable {
                let applied: [String]
                let policyApplied: Bool
                let distributed: Bool
                let version: Int
            }
            let version = runner.migrations.last?.version ?? 0
            if options.output.json {
                try printJSON(
                    Report(
                        applied: applied.fileNames, policyApplied: policyApplied, distributed: applied.distributed,
                        version: version))
            } else if applied.isEmpty && !policyApplied {
                print("The database is up to date (version \(version)): \(database.redactedDescription)")
            } else {
                let files = applied.fileNames.count == 1 ? "file" : "files"
                let policy = policyApplied ? " and the access policy" : ""
                print(
                    "Applied \(applied.fileNames.count) \(files)\(policy); the database is at version \(version): \(database.redactedDescription)"
                )
            }
        }
    }
}
