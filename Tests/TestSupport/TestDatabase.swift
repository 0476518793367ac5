import Foundation
import Postgres

/// Databases on the disposable server that `scripts/with-postgres` starts for the tests.
///
/// Each test gets a database of its own, so tests run in parallel without seeing each other's rows.
public enum TestDatabase {
    /// The disposable server, from the PG* variables `scripts/with-postgres` sets. Throws (the test fails, it is
    /// not skipped) when the tests were started some other way.
    public static func server(database: String = "postgres") throws -> PostgresConfiguration {
        guard ProcessInfo.processInfo.environment["RBAC_TEST_CLUSTER"] != nil else {
            throw TestSetupError(
                "no disposable PostgreSQL server: run the tests with scripts/test (or scripts/with-postgres swift test)"
            )
        }
        return PostgresConfiguration(connectionString: "dbname=\(database)", applicationName: "rbac-tests")
    }

    /// The workers' ports when the server is a Citus coordinator (`scripts/citus-cluster` sets
    /// RBAC_CITUS_WORKERS); empty on plain PostgreSQL.
    public static let citusWorkers: [Int] =
        (ProcessInfo.processInfo.environment["RBAC_CITUS_WORKERS"] ?? "").split(separator: " ").compactMap {
            Int($0)
        }

    /// Runs `body` with the configuration of a new database, and drops the database afterwards: an empty one,
    /// or a copy of `template`. On a Citus coordinator the database is a Citus database: the extension on every
    /// node, the workers added.
    public static func withFresh<T>(
        from template: DatabaseTemplate? = nil, _ body: (PostgresConfiguration) async throws -> T
    ) async throws -> T {
        let name = "test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        do {
            if let template {
                try await DatabaseTemplates.shared.copy(template, to: name)
            } else {
                try await changingDatabases { try await settingUp { try await createEmpty(name) } }
            }
            let value = try await body(try server(database: name))
            try await changingDatabases { try await drop(name) }
            return value
        } catch {
            try? await changingDatabases { try await drop(name) }
            throw error
        }
    }

    /// Every test starts by making its database, and the tests start together. Made all at once, the copies
    /// keep the server, and the threads that wait on it, busy for seconds, while tests that already run time a
    /// staleness bound of 200 ms or a connect timeout against them. So a few at a time.
    private static let databaseChanges = Gate(limit: 4)

    /// Runs `body`, which creates, copies or drops a database, when fewer than four others do.
    static func changingDatabases<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await databaseChanges.through(body)
    }

    /// Runs `setUp` (migrations, say) alone on Citus, where setting databases up at once fails; at once
    /// elsewhere.
    @discardableResult
    public static func settingUp<T: Sendable>(_ setUp: @Sendable () async throws -> T) async throws -> T {
        citusWorkers.isEmpty ? try await setUp() : try await CitusDatabases.shared.serially(setUp)
    }

    /// Runs `body` with a pool on a new database: an empty one, or a copy of `template`.
    public static func withFreshPool<T>(
        from template: DatabaseTemplate? = nil, maxConnections: Int = 4,
        _ body: (PostgresConnectionPool) async throws -> T
    ) async throws -> T {
        try await withFresh(from: template) { configuration in
            let pool = PostgresConnectionPool(configuration: configuration, maxConnections: maxConnections)
            return try await ensuring {
                try await body(pool)
            } finally: {
                await pool.close()
            }
        }
    }

    /// Creates the empty database `name`; on a Citus coordinator a Citus database: the extension on every node,
    /// the workers added. Callers run it inside `settingUp`.
    static func createEmpty(_ name: String) async throws {
        let admin = try await PostgresConnection.connect(try server())
        try await ensuring {
            try await admin.execute("CREATE DATABASE \(identifier: name)")
        } finally: {
            await admin.close()
        }
        if !citusWorkers.isEmpty { try await CitusDatabases.shared.create(name) }
    }

    /// Runs `body` on the disposable server and then, on Citus, on each worker, connected as the administrator
    /// to its `postgres` database.
    static func onEachNode(_ body: (PostgresConnection) async throws -> Void) async throws {
        for node in [try server()] + citusWorkers.map({ CitusDatabases.worker($0, database: "postgres") }) {
            let admin = try await PostgresConnection.connect(node)
            try await ensuring {
                try await body(admin)
            } finally: {
                await admin.close()
            }
        }
    }

    /// Ends every session on `name`, on every node, and lets no new one in. On Citus each node's maintenance
    /// daemon connects to the database on every node, and starts again on a node as soon as a session there
    /// loads Citus: sessions ended one node at a time come back.
    static func closeToSessions(_ name: String) async throws {
        try await onEachNode { admin in
            if try await admin.query("SELECT 1 FROM pg_database WHERE datname = \(name)").count == 1 {
                try await admin.execute("ALTER DATABASE \(identifier: name) ALLOW_CONNECTIONS false")
            }
        }
        try await onEachNode { admin in
            let ended = try await eventually(within: .seconds(30), every: .milliseconds(20)) {
                try await admin.query(
                    "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = \(name)"
                )[0].decode("n", as: Int.self) == 0
            }
            guard ended else { throw TestSetupError("sessions on the database \(name) did not end") }
        }
    }

    private static func drop(_ name: String) async throws {
        try await closeToSessions(name)
        try await onEachNode { try await $0.execute("DROP DATABASE IF EXISTS \(identifier: name)") }
    }
}

/// Makes and removes the Citus side of test databases. Tests set their databases up one at a time on Citus
/// (`TestDatabase.settingUp`): registering the same workers, and creating the same roles on every node, from
/// many databases at once fails there.
actor CitusDatabases {
    static let shared = CitusDatabases()
    private let setups = Gate(limit: 1)

    /// Runs `body` when no other setup runs.
    func serially<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await setups.through(body)
    }

    static func worker(_ port: Int, database: String) -> PostgresConfiguration {
        PostgresConfiguration(
            connectionString: "host=127.0.0.1 port=\(port) user=postgres dbname=\(database)",
            applicationName: "rbac-tests")
    }

    func create(_ name: String) async throws {
        for port in TestDatabase.citusWorkers {
            let admin = try await PostgresConnection.connect(Self.worker(port, database: "postgres"))
            try await admin.execute("CREATE DATABASE \(identifier: name)")
            await admin.close()
            let database = try await PostgresConnection.connect(Self.worker(port, database: name))
            try await database.execute("CREATE EXTENSION citus")
            await database.close()
        }
        let coordinator = try await PostgresConnection.connect(try TestDatabase.server(database: name))
        try await coordinator.execute("CREATE EXTENSION citus")
        // Four shards a table instead of 32: distributing is then quick enough to do for each test.
        try await coordinator.execute("ALTER DATABASE \(identifier: name) SET citus.shard_count = 4")
        let port: Int = try await coordinator.query("SELECT current_setting('port')::int AS port")[0].decode("port")
        try await coordinator.execute("SELECT citus_set_coordinator_host('127.0.0.1', \(Int32(port)))")
        for port in TestDatabase.citusWorkers {
            try await coordinator.execute("SELECT citus_add_node('127.0.0.1', \(Int32(port)))")
        }
        await coordinator.close()
    }
}

/// Lets at most `limit` bodies run at once; the others wait their turn, suspended, holding no thread.
actor Gate {
    private let limit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = limit }

    func through<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if running < limit {
            running += 1
        } else {
            // The one leaving hands its place over, so `running` stays as it is.
            await withCheckedContinuation { waiting.append($0) }
        }
        defer {
            if waiting.isEmpty { running -= 1 } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}

public struct TestSetupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Releases a group of tasks together: each `arrive()` waits until `count` tasks have arrived. If they have not
/// all arrived within `timeout` (one failed before reaching it, say), everyone is released anyway, so a broken
/// test fails on its assertions instead of hanging.
public actor Barrier {
    private let count: Int
    private let timeout: Duration
    private var arrived = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(count: Int, timeout: Duration = .seconds(30)) {
        self.count = count
        self.timeout = timeout
    }

    public func arrive() async {
        arrived += 1
        if arrived >= count {
            releaseAll()
            return
        }
        if arrived == 1 {
            let timeout = timeout
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                await self?.releaseAll()
            }
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func releaseAll() {
        let released = waiting
        waiting = []
        for continuation in released { continuation.resume() }
    }
}

/// The repository root, for tests that run the project's scripts.
public let repositoryRoot: URL = {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
    }
    fatalError("Package.swift not found above \(#filePath)")
}()
