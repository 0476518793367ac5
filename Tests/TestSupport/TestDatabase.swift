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

    /// Runs `body` with the configuration of a new, empty database, and drops the database afterwards.
    public static func withFresh<T>(_ body: (PostgresConfiguration) async throws -> T) async throws -> T {
        let name = "test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try await PostgresConnection.connect(try server())
        try await admin.execute("CREATE DATABASE \(identifier: name)")
        do {
            let value = try await body(try server(database: name))
            try await drop(name, using: admin)
            return value
        } catch {
            try? await drop(name, using: admin)
            throw error
        }
    }

    /// Runs `body` with a pool on a new, empty database.
    public static func withFreshPool<T>(
        maxConnections: Int = 4, _ body: (PostgresConnectionPool) async throws -> T
    ) async throws -> T {
        try await withFresh { configuration in
            let pool = PostgresConnectionPool(configuration: configuration, maxConnections: maxConnections)
            do {
                let value = try await body(pool)
                await pool.close()
                return value
            } catch {
                await pool.close()
                throw error
            }
        }
    }

    private static func drop(_ name: String, using admin: PostgresConnection) async throws {
        try await admin.execute("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
        await admin.close()
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
