import ArgumentParser
import Foundation
import Postgres

/// Where the database is: `--database-url`, else `DATABASE_URL`, else the standard `PG*` variables, else the
/// local cluster rbac manages itself.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "PostgreSQL URL, e.g. postgres://user@host:5432/db. Default: $DATABASE_URL, then the PG* variables, "
                + "then rbac's own local cluster.",
            valueName: "url"))
    var databaseURL: String?

    /// The configuration to connect with; starts the local cluster when nothing else is configured.
    func configuration() async throws -> PostgresConfiguration {
        let environment = ProcessInfo.processInfo.environment
        let explicit = databaseURL ?? environment["DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
        if let explicit {
            let configuration = PostgresConfiguration(connectionString: explicit)
            do {
                try configuration.validate()
            } catch let error as PostgresError {
                throw CommandFailure(.usage, "\(error.message); expected postgres://user@host:port/database")
            }
            return configuration
        }
        let libpqVariables = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGSERVICE"]
        if libpqVariables.contains(where: { environment[$0]?.isEmpty == false }) {
            return PostgresConfiguration()
        }
        return try await LocalCluster.default().start()
    }

    /// A pool for one CLI command.
    func pool() async throws -> (PostgresConnectionPool, PostgresConfiguration) {
        let configuration = try await configuration()
        return (PostgresConnectionPool(configuration: configuration, maxConnections: 4), configuration)
    }
}

/// `--json` for commands that print data.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON instead of a table.")
    var json = false

    /// Prints `value` as JSON with --json, else `text`, for people.
    func print(_ value: some Encodable, _ text: @autoclosure () -> String) throws {
        if json { try printJSON(value) } else { Swift.print(text()) }
    }
}
