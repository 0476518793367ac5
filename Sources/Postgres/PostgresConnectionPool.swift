import Synchronization

/// A bounded set of connections shared by concurrent tasks.
///
/// - At most `maxConnections` are open at once; a task that finds none free waits up to `acquireTimeout`, then
///   gets a `.poolTimeout` error.
/// - An idle connection handed out is checked by its first statement, on its own queue: if the server dropped it,
///   for example in a restart, that statement sends nothing, the connection is discarded, and `body` runs again
///   on another one, which prepares its statements again on first use.
public final class PostgresConnectionPool: Sendable {
    public let configuration: PostgresConfiguration
    public let maxConnections: Int
    public let acquireTimeout: Duration

    private let state = Mutex(State())
    private let counter = StatementCounter()

    /// How many connections are open (idle, leased or being opened) and idle now, and how many tasks wait for
    /// one: what `/metrics` shows, since a task that waits too long fails (`.poolTimeout`).
    public var usage: (open: Int, idle: Int, waiting: Int) {
        state.withLock { ($0.open, $0.idle.count, $0.waiters.count) }
    }

    /// How many statements this pool's connections have sent (not counting the preparation of named ones):
    /// what tests and benchmarks use to prove a fixed number of round trips.
    public var statementsSent: Int { counter.count.load(ordering: .relaxed) }

    private struct State {
        var idle: [PostgresConnection] = []
        /// Connections counted against the limit: idle, leased, or being opened.
        var open = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var isClosed = false
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Grant, any Error>
        let timer: Task<Void, Never>
    }

    /// What a task waiting for the pool is handed: an idle connection, or room to open one.
    private enum Grant: Sendable {
        case connection(PostgresConnection)
        case slot
    }

    public init(configuration: PostgresConfiguration, maxConnections: Int = 8, acquireTimeout: Duration = .seconds(10))
    {
        precondition(maxConnections > 0, "a pool needs room for at least one connection")
        self.configuration = configuration
        self.maxConnections = maxConnections
        self.acquireTimeout = acquireTimeout
    }

    /// Runs `body` with a connection leased from the pool and returns it afterwards.
    public func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        while true {
            let connection = try await acquire()
            do {
                let value = try await body(connection)
                await release(connection)
                return value
            } catch is StaleConnection {
                // Nothing ran on it: discard it and run `body` on another (or a new) connection.
                await release(connection)
            } catch {
                await release(connection)
                // The idle connections reach the server the way this one did, and each handed out while the server
                // or the path to it is gone would cost its statement the same wait (tcp_user_timeout) before it
                // failed too; closed, they leave the next statement to open a connection, which finds the server
                // back or fails within connect_timeout.
                if connection.isLost { await closeIdle() }
                throw error
            }
        }
    }

    /// Runs `body` in a transaction on a pooled connection; see `PostgresConnection.withTransaction`.
    public func withTransaction<T: Sendable>(
        isolation: PostgresConnection.IsolationLevel = .readCommitted, maxAttempts: Int = 5,
        opening: [PostgresQuery] = [], _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            try await connection.withTransaction(
                isolation: isolation, maxAttempts: maxAttempts, opening: opening, body)
        }
    }

    /// Runs one statement on a pooled connection.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withConnection { try await $0.query(query) }
    }

    /// Closes idle connections and refuses new leases; leased connections close when they come back.
    public func close() async {
        let waiters = state.withLock { state in
            state.isClosed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters {
            waiter.timer.cancel()
            waiter.continuation.resume(throwing: Self.closedError)
        }
        await closeIdle()
    }

    private func closeIdle() async {
        let idle = state.withLock { state in
            defer { state.idle = [] }
            state.open -= state.idle.count
            return state.idle
        }
        for connection in idle { await connection.close() }
    }

    // MARK: Leasing

    private func acquire() async throws -> PostgresConnection {
        switch try await reserve() {
        case .connection(let connection):
            connection.verifyBeforeNextStatement()
            return connection
        case .slot:
            break
        }
        do {
            return try await PostgresConnection.connect(configuration, counter: counter)
        } catch {
            releaseSlot()
            throw error
        }
    }

    private func release(_ connection: PostgresConnection) async {
        guard connection.isReusable else {
            await connection.close()
            releaseSlot()
            return
        }
        let (waiter, closeIt) = state.withLock { state -> (Waiter?, Bool) in
            if state.isClosed {
                state.open -= 1
                return (nil, true)
            }
            if !state.waiters.isEmpty { return (state.waiters.removeFirst(), false) }
            state.idle.append(connection)
            return (nil, false)
        }
        if closeIt { await connection.close() }
        if let waiter {
            waiter.timer.cancel()
            waiter.continuation.resume(returning: .connection(connection))
        }
    }

    /// Gives up a counted connection that was closed or never opened; a waiter, if any, may open one instead.
    private func releaseSlot() {
        let waiter = state.withLock { state -> Waiter? in
            if !state.waiters.isEmpty, !state.isClosed { return state.waiters.removeFirst() }
            state.open -= 1
            return nil
        }
        if let waiter {
            waiter.timer.cancel()
            waiter.continuation.resume(returning: .slot)
        }
    }

    private func reserve() async throws -> Grant {
        let id = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
                let immediate = state.withLock { state -> Result<Grant, any Error>? in
                    if state.isClosed { return .failure(Self.closedError) }
                    if let connection = state.idle.popLast() { return .success(.connection(connection)) }
                    if state.open < maxConnections {
                        state.open += 1
                        return .success(.slot)
                    }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    let timeout = acquireTimeout
                    let timer = Task { [weak self] in
                        guard (try? await Task.sleep(for: timeout)) != nil else { return }
                        self?.removeWaiter(
                            id,
                            error: PostgresError(
                                .poolTimeout,
                                message:
                                    "no database connection became free within \(timeout) (pool of \(self?.maxConnections ?? 0))"
                            ))
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation, timer: timer))
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            removeWaiter(id, error: CancellationError())
        }
    }

    private func removeWaiter(_ id: UInt64, error: any Error) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        guard let waiter else { return }
        waiter.timer.cancel()
        waiter.continuation.resume(throwing: error)
    }

    private static let closedError = PostgresError(.closed, message: "the connection pool was closed")
}
