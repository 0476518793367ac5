import Foundation
import Postgres

/// Brings a database to the files of `sql/`: the numbered migrations not yet applied, in order, then the
/// definition files of `sql/functions/` (all of them after any migration, else those whose checksum changed),
/// all in one transaction, recorded in `schema_migrations` and `schema_definitions`. Nothing changes when any
/// part fails. A run with nothing new runs no statement on the product's tables.
///
/// A session advisory lock serialises concurrent runners: a second `rbac migrate` waits for the first, then
/// finds nothing left to do.
public struct MigrationRunner: Sendable {
    public let migrations: [Migration]
    public let definitions: [Definition]
    /// `citus/distribute.sql`: distributes the budget and the couple's audit log on a Citus coordinator.
    public let distribution: String?

    public init(migrations: [Migration], definitions: [Definition] = [], distribution: String? = nil) {
        self.migrations = migrations
        self.definitions = definitions
        self.distribution = distribution
    }

    /// The migrations of `directory` (`sql/`), the definitions of its `functions/` and the distribution step of
    /// its `citus/`.
    public static func load(from directory: URL) throws -> MigrationRunner {
        MigrationRunner(
            migrations: try Migration.load(from: directory),
            definitions: try Definition.load(from: directory.appendingPathComponent(Definition.directoryName)),
            distribution: try? String(
                contentsOf: directory.appendingPathComponent(Self.distributionFileName), encoding: .utf8))
    }

    public static let distributionFileName = "citus/distribute.sql"

    public enum State: String, Sendable, Codable {
        case applied, pending
    }

    /// A migration (with its version) or a definition file (without), applied or pending.
    public struct Status: Sendable, Codable, Equatable {
        public let version: Int?
        public let fileName: String
        public let state: State
        public let appliedAt: Date?
    }

    /// What one run applied.
    public struct Applied: Sendable, Equatable {
        public var migrations: [Migration] = []
        public var definitions: [Definition] = []
        /// Whether the distribution step ran.
        public var distributed = false

        public var isEmpty: Bool { migrations.isEmpty && definitions.isEmpty && !distributed }
        public var fileNames: [String] {
            migrations.map(\.fileName) + definitions.map(\.fileName) + (distributed ? [distributionFileName] : [])
        }
    }

    /// The advisory lock key every runner takes (any constant shared by all runners works).
    static let lockKey: Int64 = 0x7262_6163_6d69_67  // "rbacmig"

    /// Applies what is pending, then with `distribute`, or after new migrations on a database distributed
    /// before, the distribution step (which changes nothing on a database it already distributed), in the same
    /// transaction; `progress` is called with each file's name before it is applied. With `lockTimeout`, a
    /// statement that waits longer for a lock fails the run (`SQLState.lockNotAvailable`; see `limitLockWaits`).
    @discardableResult
    public func migrate(
        _ pool: PostgresConnectionPool, distribute: Bool = false, lockTimeout: Duration? = nil,
        progress: @Sendable (String) -> Void = { _ in }
    ) async throws -> Applied {
        guard !distribute || distribution != nil else { throw MigrationError.noDistribution }
        return try await pool.withConnection { connection in
            try await withLock(connection) {
                let applied = try await verifiedAppliedVersions(connection)
                let definitionsApplied = try await appliedDefinitions(connection)
                var run = Applied()
                run.migrations = migrations.filter { applied[$0.version] == nil }
                // A migration may drop or re-create what a definition made (a table and its triggers), so
                // after one every definition is applied again.
                let changed = definitions.filter {
                    !run.migrations.isEmpty || definitionsApplied[$0.fileName]?.checksum != $0.checksum
                }
                // The privileges file takes EXECUTE from PUBLIC on every function and grants each role what it
                // calls: a function another file made or re-made has neither until it runs again.
                run.definitions = definitions.filter {
                    changed.contains($0) || (!changed.isEmpty && $0.fileName == Definition.privilegesFileName)
                }
                if run.isEmpty && !distribute { return run }
                try await connection.withTransaction { connection in
                    try await Self.limitLockWaits(to: lockTimeout, on: connection)
                    for table in Self.bookkeeping { try await connection.execute(PostgresQuery(unsafeSQL: table)) }
                    for migration in run.migrations {
                        progress(migration.fileName)
                        try await Self.run(migration.sql, on: connection)
                        try await connection.execute(
                            """
                            INSERT INTO schema_migrations (version, name, checksum)
                            VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                            """)
                    }
                    for definition in run.definitions {
                        progress(definition.fileName)
                        try await Self.run(definition.sql, on: connection)
                        try await connection.execute(
                            """
                            INSERT INTO schema_definitions (file_name, checksum) VALUES (\(definition.fileName), \(definition.checksum))
                            ON CONFLICT (file_name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()
                            """)
                    }
                    // The policy's row-level security scripts secure tables a migration may have added or made
                    // again: marked stale with the migration, they run on the policy's next apply even when this
                    // process ends before it.
                    if !run.migrations.isEmpty, try await Self.exists("applied_policy", on: connection) {
                        try await connection.execute(
                            "UPDATE applied_policy SET scripts_checksum = \(AccessPolicy.staleScripts)")
                    }
                    // A release's migration may add a budget table: on a database already distributed,
                    // distributing again places it beside the others, so upgrading needs no flag.
                    var distributing = distribute
                    if distribution != nil && !distribute && !run.migrations.isEmpty {
                        distributing = try await connection.query(
                            "SELECT rbac.distributed('audit_log') AS distributed")[0].decode("distributed")
                    }
                    if distributing, let distribution {
                        progress(Self.distributionFileName)
                        try await Self.run(distribution, on: connection)
                        run.distributed = true
                    }
                }
                return run
            }
        }
    }

    /// Each known migration and definition file, applied or pending. Throws if an applied migration was
    /// changed or is unknown.
    public func status(_ pool: PostgresConnectionPool) async throws -> [Status] {
        try await pool.withConnection { connection in
            try await withLock(connection) {
                let applied = try await verifiedAppliedVersions(connection)
                let definitionsApplied = try await appliedDefinitions(connection)
                let pendingMigration = migrations.contains { applied[$0.version] == nil }
                return migrations.map { migration in
                    Status(
                        version: migration.version, fileName: migration.fileName,
                        state: applied[migration.version] == nil ? .pending : .applied,
                        appliedAt: applied[migration.version])
                }
                    + definitions.map { definition in
                        let record = definitionsApplied[definition.fileName]
                        let current = !pendingMigration && record?.checksum == definition.checksum
                        return Status(
                            version: nil, fileName: definition.fileName, state: current ? .applied : .pending,
                            appliedAt: record?.appliedAt)
                    }
            }
        }
    }

    /// The migrations of these files that the database has not applied, read without a lock or a write: what a
    /// server of this release checks before it serves. A database that a later release migrated further has
    /// none pending, whatever else it holds.
    public func pending(_ pool: PostgresConnectionPool) async throws -> [Migration] {
        let applied = try await pool.withConnection { connection -> Set<Int> in
            guard try await Self.exists("schema_migrations", on: connection) else { return [] }
            let versions = try await connection.query("SELECT version FROM schema_migrations")
            return Set(try versions.map { try $0.decode("version") })
        }
        return migrations.filter { !applied.contains($0.version) }
    }

    /// The tables that record what was applied. Made when something is first applied, not before: a login
    /// that may not create tables (an operator's, which is no superuser) still finds nothing to do, or the
    /// status, without being refused.
    private static let bookkeeping = [
        """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version integer PRIMARY KEY,
            name text NOT NULL,
            checksum text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS schema_definitions (
            file_name text PRIMARY KEY,
            checksum text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )
        """,
    ]

    static func exists(_ table: String, on connection: PostgresConnection) async throws -> Bool {
        try await connection.query("SELECT to_regclass(\(table)) IS NOT NULL AS present")[0].decode("present")
    }

    /// Runs a file's statements one at a time (see `SQLStatements`).
    static func run(_ sql: String, on connection: PostgresConnection) async throws {
        for statement in SQLStatements.split(sql) {
            try await connection.runScript(PostgresQuery(unsafeSQL: statement))
        }
    }

    /// Bounds how long the rest of the transaction waits for each lock another session holds. A migration's
    /// `ALTER TABLE` waiting behind a transaction left open in psql queues every later query of that table, a
    /// check's too, behind itself: giving up, and changing nothing, keeps the service answering. Taken after
    /// the advisory lock, which a concurrent run waits out for as long as the first one takes. `SET LOCAL`, and
    /// on Citus carried to the workers, as `Acting` carries serve's.
    static func limitLockWaits(to timeout: Duration?, on connection: PostgresConnection) async throws {
        guard let timeout else { return }
        try await connection.execute("SET LOCAL citus.propagate_set_commands = local")
        try await connection.execute(
            "SET LOCAL lock_timeout = \(literal: PostgresConfiguration.milliseconds(timeout))")
    }

    private func withLock<T: Sendable>(_ connection: PostgresConnection, _ body: () async throws -> T) async throws -> T
    {
        try await connection.execute("SELECT pg_advisory_lock(\(Self.lockKey))")
        return try await ensuring(body) {
            try await connection.execute("SELECT pg_advisory_unlock(\(Self.lockKey))")
        }
    }

    /// Applied versions with their time, after checking every applied checksum against the files.
    private func verifiedAppliedVersions(_ connection: PostgresConnection) async throws -> [Int: Date] {
        guard try await Self.exists("schema_migrations", on: connection) else { return [:] }
        let rows = try await connection.query(
            "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version")
        let files = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        var applied: [Int: Date] = [:]
        for row in rows {
            let version = try row.decode("version", as: Int.self)
            let checksum = try row.decode("checksum", as: String.self)
            guard let file = files[version] else {
                throw MigrationError.unknownApplied(version: version, name: try row.decode("name"))
            }
            guard file.checksum == checksum else {
                throw MigrationError.changedAfterApply(
                    fileName: file.fileName, appliedChecksum: checksum, fileChecksum: file.checksum)
            }
            applied[version] = try row.decode("applied_at", as: Date.self)
        }
        return applied
    }

    /// The checksum and time each definition file was last applied with.
    private func appliedDefinitions(_ connection: PostgresConnection) async throws -> [String: (
        checksum: String, appliedAt: Date
    )] {
        guard try await Self.exists("schema_definitions", on: connection) else { return [:] }
        var applied: [String: (checksum: String, appliedAt: Date)] = [:]
        for row in try await connection.query("SELECT file_name, checksum, applied_at FROM schema_definitions") {
            applied[try row.decode("file_name")] = (try row.decode("checksum"), try row.decode("applied_at"))
        }
        return applied
    }
}
