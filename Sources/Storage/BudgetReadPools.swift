import Foundation
import Postgres
import Synchronization

/// Where a couple's budget is read (decision 0012). On a Citus cluster: on the worker that holds the couple's
/// budget shards, through a pool of its own, so that the rows come from where they are stored instead of
/// through the coordinator. On plain PostgreSQL, or before the budget is distributed: on the one server.
/// Writes stay on the coordinator, whose transactions reach the workers.
public final class BudgetReadPools: Sendable {
    private let coordinator: PostgresConnectionPool
    private let maxConnectionsPerWorker: Int
    private let state = Mutex(State())

    private struct Node: Hashable, Sendable {
        let host: String
        let port: Int
    }

    private struct State {
        var workers: [Node: PostgresConnectionPool] = [:]
        /// Each couple's node as last looked up (nil: the coordinator), and when.
        var nodes: [UUID: (node: Node?, at: ContinuousClock.Instant)] = [:]
    }

    /// How long a couple's node is taken as known. A read sent to a node that no longer holds the shard (after
    /// a rebalance) is still answered: Citus there routes it on, as the coordinator would.
    static let lookupLifetime: Duration = .seconds(60)
    /// At most this many couples' nodes are remembered; past it, the list starts again.
    static let remembered = 100_000

    public init(coordinator: PostgresConnectionPool, maxConnectionsPerWorker: Int = 8) {
        self.coordinator = coordinator
        self.maxConnectionsPerWorker = maxConnectionsPerWorker
    }

    /// The pool that reads `couple`'s budget: looked up on the coordinator at most once a minute per couple.
    public func pool(for couple: UUID) async throws -> PostgresConnectionPool {
        let now = ContinuousClock.now
        if let known = state.withLock({ $0.nodes[couple] }), now - known.at < Self.lookupLifetime {
            return pool(known.node)
        }
        let node = try await coordinator.query(
            PostgresQuery("SELECT host, port FROM rbac.budget_node(\(couple))").prepared(as: "budget_node")
        ).first.map { Node(host: try $0.decode("host"), port: try $0.decode("port")) }
        state.withLock { state in
            if state.nodes.count >= Self.remembered { state.nodes.removeAll(keepingCapacity: true) }
            state.nodes[couple] = (node, now)
        }
        return pool(node)
    }

    private func pool(_ node: Node?) -> PostgresConnectionPool {
        guard let node else { return coordinator }
        return state.withLock { state in
            if let pool = state.workers[node] { return pool }
            let pool = PostgresConnectionPool(
                configuration: coordinator.configuration.reaching(host: node.host, port: node.port),
                maxConnections: maxConnectionsPerWorker, acquireTimeout: coordinator.acquireTimeout)
            state.workers[node] = pool
            return pool
        }
    }

    /// Closes the workers' pools; the coordinator's is its owner's to close.
    public func close() async {
        let workers = state.withLock { state in
            defer { state.workers = [:] }
            return Array(state.workers.values)
        }
        for pool in workers { await pool.close() }
    }
}
