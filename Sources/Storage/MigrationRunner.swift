import Foundation
import Postgres

/// Applies `sql/` migrations in order, each in its own transaction, and records them in `schema_migrations`.
///
/// A session advisory lock serialises concurrent runners: a second `rbac migrate` waits for the first, then
/// finds nothing left to do.
public struct MigrationRunner: Sendable {
    public let migrations: [Migration]

    public init(migrations: [Migration]) {
        self.migrations = migrations
    }

    public enum State: String, Sendable, Codable {
        case applied, pending
    }

    public struct Status: Sendable, Codable, Equatable {
        public let version: Int
        public let name: String
        public let state: State
        public let appliedAt: Date?
    }

    /// The advisory lock key every runner takes (any constant shared by all runners works).
    static let lockKey: Int64 = 0x7262_6163_6d69_67  // "rbacmig"

    /// Applies pending migrations; returns the ones applied now (empty when the database was up to date).
    /// `progress` is called before each migration is applied.
    @discardableResult
    public func migrate(
        _ pool: PostgresConnectionPool, progress: @Sendable (Migration) -> Void = { _ in }
    ) async throws -> [Migration] {
        try await pool.withConnection { connection in
            try await withLock(connection) {
                let applied = try await verifiedAppliedVersions(connection)
                var done: [Migration] = []
                for migration in migrations where applied[migration.version] == nil {
                    progress(migration)
                    try await connection.withTransaction { connection in
                        try await connection.runScript(PostgresQuery(unsafeSQL: migration.sql))
                        try await connection.execute(
                            """
                            INSERT INTO schema_migrations (version, name, checksum)
                            VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                            """)
                    }
                    done.append(migration)
                }
                return done
            }
        }
    }

    /// Each known migration, applied or pending. Throws if an applied one was changed or is unknown.
    public func status(_ pool: PostgresConnectionPool) async throws -> [Status] {
        try await pool.withConnection { connection in
            try await withLock(connection) {
                let applied = try await verifiedAppliedVersions(connection)
                return migrations.map { migration in
                    Status(
                        version: migration.version, name: migration.name,
                        state: applied[migration.version] == nil ? .pending : .applied,
                        appliedAt: applied[migration.version])
                }
            }
        }
    }

    private func withLock<T: Sendable>(_ connection: PostgresConnection, _ body: () async throws -> T) async throws -> T
    {
        try await connection.execute("SELECT pg_advisory_lock(\(Self.lockKey))")
        do {
            let value = try await body()
            try await connection.execute("SELECT pg_advisory_unlock(\(Self.lockKey))")
            return value
        } catch {
            _ = try? await connection.execute("SELECT pg_advisory_unlock(\(Self.lockKey))")
            throw error
        }
    }

    /// Applied versions with their time, after checking every applied checksum against the files.
    private func verifiedAppliedVersions(_ connection: PostgresConnection) async throws -> [Int: Date] {
        try await connection.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
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
}
