import Foundation
import Postgres

/// Tests of what a Citus worker that does not answer takes with it (scripts/citus-cluster).
extension TestDatabase {
    /// What `make` makes, for a couple it returns, on each worker (a couple's shards land on either): the first
    /// worker's and the second's.
    public static func onEachWorker<T>(
        _ pool: PostgresConnectionPool, _ make: (PostgresConnectionPool) async throws -> (UUID, T)
    )
        async throws -> (first: T, second: T)
    {
        var onWorker: [Int: T] = [:]
        for _ in 0..<40 where onWorker.count < citusWorkers.count {
            let (couple, made) = try await make(pool)
            let port: Int = try await pool.query("SELECT port FROM rbac.budget_node(\(couple))")[0].decode("port")
            if onWorker[port] == nil { onWorker[port] = made }
        }
        guard Set(onWorker.keys) == Set(citusWorkers) else {
            throw TestSetupError("40 couples did not land on every worker: \(onWorker.keys.sorted())")
        }
        return (onWorker[citusWorkers[0]]!, onWorker[citusWorkers[1]]!)
    }

    /// Runs `body` with the first worker down for this database alone: its node, in this database's metadata,
    /// moves to a port nothing listens on (the other tests' databases keep theirs), and back afterwards; or,
    /// `silent`, to one that takes connections and never answers, as a worker whose host hangs. `body` is given
    /// the node's name while it is down (host:port).
    public static func withFirstWorkerDown(
        _ pool: PostgresConnectionPool, silent: Bool = false, _ body: (String) async throws -> Void
    ) async throws {
        // Closed at once, the port refuses; left open and never accepted from, it takes connections and says
        // nothing.
        let away = try listeningOnLoopback()
        if !silent { close(away.socket) }
        func moveNode(from: Int, to: Int) async throws {
            try await pool.query(
                """
                SELECT citus_update_node(nodeid, '127.0.0.1', \(Int32(to))) FROM pg_dist_node
                WHERE nodeport = \(Int32(from))
                """)
        }
        let downPort = citusWorkers[0]
        try await ensuring {
            try await moveNode(from: downPort, to: Int(away.port))
            try await body("127.0.0.1:\(away.port)")
        } finally: {
            // Refusing from here on, so that moving the node back does not wait out Citus's timeout on it.
            if silent { close(away.socket) }
            try await moveNode(from: Int(away.port), to: downPort)
        }
    }
}
