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
    private let idleWorkerLifetime: Duration
    private let unreachable: @Sendable (String) -> Void
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex(State())

    private struct Node: Hashable, Sendable, CustomStringConvertible {
        let host: String
        let port: Int
        var description: String { "\(host):\(port)" }
    }

    private struct Worker {
        let pool: PostgresConnectionPool
        var used: ContinuousClock.Instant
    }

    private struct State {
        var workers: [Node: Worker] = [:]
        /// When the first worker's pool may have gone idle: the oldest last use plus the lifetime (nil: no
        /// worker). Reads look the pools over only from then on.
        var sweepAt: ContinuousClock.Instant?
        /// Each couple's node as last looked up (nil: the coordinator), and when.
        var nodes: [UUID: (node: Node?, at: ContinuousClock.Instant)] = [:]
        /// Workers this service could not reach, and until when their couples are read through the coordinator.
        var setAside: [Node: ContinuousClock.Instant] = [:]
    }

    /// How long a couple's node is taken as known. A read sent to a node that no longer holds the shard (after
    /// a rebalance) is still answered: Citus there routes it on, as the coordinator would.
    static let lookupLifetime: Duration = .seconds(60)
    /// At most this many couples' nodes are remembered; past it, the list starts again.
    static let remembered = 100_000
    /// How long a worker this service could not reach is left alone before it is tried again.
    public static let setAsideFor: Duration = .seconds(30)
    /// Seconds to wait for a worker's connection before reading through the coordinator instead: libpq's
    /// shortest, as the coordinator answers the same read, only slower.
    static let workerConnectTimeout = 2

    /// `unreachable` hears, once each time it happens, that a worker is set aside and why. A worker's pool
    /// that no read has used for `idleWorkerLifetime` is closed, so that a node that no longer holds any
    /// couple's budget (after a rebalance, or taken out of the cluster) is left no connections; the next read
    /// sent there opens it again. `now` is the clock these lifetimes are measured by.
    public init(
        coordinator: PostgresConnectionPool, maxConnectionsPerWorker: Int = 8,
        idleWorkerLifetime: Duration = .seconds(300), unreachable: @escaping @Sendable (String) -> Void = { _ in },
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.coordinator = coordinator
        self.maxConnectionsPerWorker = maxConnectionsPerWorker
        self.idleWorkerLifetime = idleWorkerLifetime
        self.now = now
        self.unreachable = unreachable
    }

    /// Runs `body`, a read of `couple`'s budget, with the pool where that budget is stored. A worker this
    /// service cannot reach (refused, silent, or its connection lost) is set aside for `setAsideFor`, and its
    /// couples are read through the coordinator meanwhile, which reaches the worker on its own network: the
    /// read is slower, and still answered. Reads only: running one again changes nothing.
    public func read<T: Sendable>(_ couple: UUID, _ body: (PostgresConnectionPool) async throws -> T) async throws
        -> T
    {
        await closeIdleWorkers()
        guard let node = try await node(of: couple), let worker = worker(node) else {
            return try await body(coordinator)
        }
        do {
            return try await body(worker)
        } catch let error as PostgresError where error.kind == .connection {
            setAside(node, because: error)
            return try await body(coordinator)
        }
    }

    /// `couple`'s node (nil: the coordinator), looked up on the coordinator at most once a minute per couple.
    private func node(of couple: UUID) async throws -> Node? {
        let now = self.now()
        if let known = state.withLock({ $0.nodes[couple] }), now - known.at < Self.lookupLifetime {
            return known.node
        }
        let node = try await coordinator.query(
            PostgresQuery("SELECT host, port FROM rbac.budget_node(\(couple))").prepared(as: "budget_node")
        ).first.map { Node(host: try $0.decode("host"), port: try $0.decode("port")) }
        state.withLock { state in
            if state.nodes.count >= Self.remembered { state.nodes.removeAll(keepingCapacity: true) }
            state.nodes[couple] = (node, now)
        }
        return node
    }

    /// The pool of `node`, or nil while it is set aside.
    private func worker(_ node: Node) -> PostgresConnectionPool? {
        let now = self.now()
        return state.withLock { state in
            if let until = state.setAside[node] {
                guard now >= until else { return nil }
                state.setAside[node] = nil
            }
            if let pool = state.workers[node]?.pool {
                state.workers[node]?.used = now
                return pool
            }
            var configuration = coordinator.configuration.reaching(host: node.host, port: node.port)
            configuration.connectTimeout = Self.workerConnectTimeout
            let pool = PostgresConnectionPool(
                configuration: configuration, maxConnections: maxConnectionsPerWorker,
                acquireTimeout: coordinator.acquireTimeout)
            state.workers[node] = Worker(pool: pool, used: now)
            // Any pool already open went idle first, if at all.
            state.sweepAt = state.sweepAt ?? now + idleWorkerLifetime
            return pool
        }
    }

    /// Closes the pools no read has used for `idleWorkerLifetime`, from the first read after each went idle.
    /// Reads look the pools over only once the oldest of them may have gone idle, which a use since then
    /// moves on; a read holds its pool for far less than the lifetime, so none is closed under one.
    private func closeIdleWorkers() async {
        let now = self.now()
        let idle = state.withLock { state -> [PostgresConnectionPool] in
            guard let sweepAt = state.sweepAt, now >= sweepAt else { return [] }
            let idle = state.workers.filter { now - $0.value.used >= idleWorkerLifetime }
            for node in idle.keys { state.workers[node] = nil }
            state.sweepAt = state.workers.values.map(\.used).min().map { $0 + idleWorkerLifetime }
            return idle.values.map(\.pool)
        }
        for pool in idle { await pool.close() }
    }

    private func setAside(_ node: Node, because error: PostgresError) {
        let isNew = state.withLock {
            $0.setAside.updateValue(self.now() + Self.setAsideFor, forKey: node) == nil
        }
        guard isNew else { return }
        unreachable(
            "budget reads of worker \(node) go through the coordinator for \(Self.setAsideFor): \(error)")
    }

    /// Closes the workers' pools; the coordinator's is its owner's to close.
    public func close() async {
        let workers = state.withLock { state in
            defer { state.workers = [:] }
            return state.workers.values.map(\.pool)
        }
        for pool in workers { await pool.close() }
    }
}
