import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Connection pool", .timeLimit(.minutes(2)))
struct PoolTests {
    /// Runs `body` while another task holds one of `pool`'s connections.
    static func holdingAConnection(_ pool: PostgresConnectionPool, _ body: () async throws -> Void) async throws {
        let (holding, done) = (Barrier(count: 2), Barrier(count: 2))
        let holder = Task {
            try await pool.withConnection { _ in
                await holding.arrive()
                await done.arrive()
            }
        }
        await holding.arrive()
        var failure: (any Error)?
        do { try await body() } catch { failure = error }
        await done.arrive()
        try await holder.value
        if let failure { throw failure }
    }

    @Test("a lease waits at most the acquire timeout, then fails clearly")
    func boundedWait() async throws {
        try await TestDatabase.withFresh { configuration in
            let pool = PostgresConnectionPool(
                configuration: configuration, maxConnections: 1, acquireTimeout: .milliseconds(200))
            try await Self.holdingAConnection(pool) {
                let started = ContinuousClock.now
                let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
                #expect(error?.kind == .poolTimeout)
                #expect(ContinuousClock.now - started >= .milliseconds(200))
            }
            // Once returned, the connection is handed out again.
            #expect(try await pool.query("SELECT 1 AS one")[0].decode("one", as: Int32.self) == 1)
            await pool.close()
        }
    }

    @Test("usage counts the connections open and idle, and the tasks waiting for one")
    func usage() async throws {
        try await TestDatabase.withFresh { configuration in
            let pool = PostgresConnectionPool(
                configuration: configuration, maxConnections: 1, acquireTimeout: .seconds(60))
            #expect(pool.usage == (open: 0, idle: 0, waiting: 0))
            var waiter: Task<PostgresRows, any Error>?
            try await Self.holdingAConnection(pool) {
                #expect(pool.usage == (open: 1, idle: 0, waiting: 0))
                waiter = Task { try await pool.query("SELECT 1") }
                // Until the second lease is queued behind the first.
                while pool.usage.waiting == 0 { await Task.yield() }
                #expect(pool.usage == (open: 1, idle: 0, waiting: 1))
            }
            _ = try await waiter?.value
            #expect(pool.usage == (open: 1, idle: 1, waiting: 0))
            await pool.close()
            #expect(pool.usage == (open: 0, idle: 0, waiting: 0))
        }
    }

    @Test("never more connections than the limit, with many tasks at once")
    func limit() async throws {
        try await TestDatabase.withFresh { configuration in
            let pool = PostgresConnectionPool(configuration: configuration, maxConnections: 3)
            let backends = try await withThrowingTaskGroup(of: Int32.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        try await pool.withConnection { connection in
                            try await connection.query("SELECT pg_sleep(0.01)")
                            return connection.backendPID
                        }
                    }
                }
                return try await group.reduce(into: Set<Int32>()) { $0.insert($1) }
            }
            #expect(backends.count <= 3)
            await pool.close()
        }
    }

    @Test("a connection lost mid-statement takes the idle ones with it, and the next statement opens its own")
    func lostConnectionClosesIdle() async throws {
        try await TestDatabase.withFresh { configuration in
            let pool = PostgresConnectionPool(configuration: configuration, maxConnections: 3)
            // Three connections open at once, then idle.
            let together = Barrier(count: 3)
            let opened = try await withThrowingTaskGroup(of: Int32.self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        try await pool.withConnection { connection in
                            await together.arrive()
                            return connection.backendPID
                        }
                    }
                }
                return try await group.reduce(into: Set<Int32>()) { $0.insert($1) }
            }
            #expect(opened.count == 3)
            // A statement the server refuses leaves its connection, and the others, as they were.
            let refused = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1 / 0") }
            #expect(refused?.kind == .server)
            #expect(pool.usage == (open: 3, idle: 3, waiting: 0))
            let ended = await #expect(throws: PostgresError.self) {
                try await pool.query("SELECT pg_terminate_backend(pg_backend_pid())")
            }
            #expect(ended?.sqlState == .adminShutdown)
            #expect(pool.usage == (open: 0, idle: 0, waiting: 0))
            // Handed one of the idle ones, it would be one of those opened before.
            let next = try await pool.withConnection { $0.backendPID }
            #expect(!opened.contains(next))
            await pool.close()
        }
    }

    @Test("the pool recovers after the server restarts, and prepared statements are prepared again")
    func serverRestart() async throws {
        // A cluster of this test's own, so the restart disturbs no other test.
        try await DisposableCluster.with { cluster in
            let configuration = PostgresConfiguration(connectionString: cluster.url)
            let pool = PostgresConnectionPool(configuration: configuration, maxConnections: 2)
            let check: PostgresQuery = "SELECT pg_backend_pid() AS pid, \(7) AS seven"
            let before = try await pool.query(check.prepared(as: "check"))
            #expect(try before[0].decode("seven", as: Int.self) == 7)

            try await cluster.restart()

            let after = try await pool.query(check.prepared(as: "check"))
            #expect(try after[0].decode("seven", as: Int.self) == 7)
            #expect(try after[0].decode("pid", as: Int32.self) != before[0].decode("pid", as: Int32.self))
            await pool.close()
        }
    }
}
