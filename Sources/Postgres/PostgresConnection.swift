import CLibPQ
import Dispatch
import Foundation
import Synchronization

/// One connection to PostgreSQL, owning one libpq `PGconn`.
///
/// Every libpq call runs on a serial dispatch queue that belongs to this connection, never on Swift's
/// cooperative thread pool, so a slow statement blocks only this connection's queue.
public final class PostgresConnection: @unchecked Sendable {
    // Safety: libpq allows one thread at a time per PGconn. `handle`, `preparedStatements` and `isClosed` are
    // touched only by blocks running on `queue`, a serial queue this connection owns (or in deinit, when no
    // other reference exists). `cancelHandle` is a PGcancel, which libpq documents as usable from any thread.
    // `reusable`, `lost` and `verifyOnNextUse` are atomic.
    private let handle: OpaquePointer
    private let cancelHandle: OpaquePointer?
    private let queue: DispatchQueue
    private var preparedStatements: [String: String] = [:]
    private var isClosed = false
    private let reusable = Atomic<Bool>(true)
    private let lost = Atomic<Bool>(false)
    private let verifyOnNextUse = Atomic<Bool>(false)
    /// Counts the statements sent, for the pool that opened this connection.
    private let counter: StatementCounter?

    /// The server process serving this connection (`pg_backend_pid()`).
    public let backendPID: Int32

    private init(handle: OpaquePointer, queue: DispatchQueue, counter: StatementCounter?) {
        self.handle = handle
        self.queue = queue
        self.counter = counter
        self.cancelHandle = PQgetCancel(handle)
        self.backendPID = PQbackendPID(handle)
    }

    deinit {
        if !isClosed { PQfinish(handle) }
        if let cancelHandle { PQfreeCancel(cancelHandle) }
    }

    /// Opens a connection. Blocks a dispatch thread, not the caller's, for up to the configured connect timeout.
    public static func connect(_ configuration: PostgresConfiguration) async throws -> PostgresConnection {
        try await connect(configuration, counter: nil)
    }

    static func connect(_ configuration: PostgresConfiguration, counter: StatementCounter?) async throws
        -> PostgresConnection
    {
        let queue = DispatchQueue(label: "rbac.postgres.connection")
        let handle: UncheckedHandle = try await withCheckedThrowingContinuation { continuation in
            queue.async {
                let handle = configuration.withConnectParameters { keys, values in
                    PQconnectdbParams(keys, values, 1)
                }
                guard let handle else {
                    continuation.resume(
                        throwing: PostgresError(.connection, message: "libpq could not allocate a connection"))
                    return
                }
                guard PQstatus(handle) == CONNECTION_OK else {
                    let message = String(cString: PQerrorMessage(handle)).asOneLine
                    PQfinish(handle)
                    continuation.resume(throwing: PostgresError(.connection, message: message))
                    return
                }
                // Notices (e.g. "relation already exists, skipping") are not errors; libpq's default prints them.
                PQsetNoticeProcessor(handle, { _, _ in }, nil)
                continuation.resume(returning: UncheckedHandle(pointer: handle))
            }
        }
        return PostgresConnection(handle: handle.pointer, queue: queue, counter: counter)
    }

    // MARK: Statements

    /// Runs one statement and returns its rows (results arrive in binary format).
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await onQueue { cancellation in try self.run(query, cancellation: cancellation) }
    }

    /// Runs `body` on the connection's thread with a `Session`, through which it runs statements synchronously:
    /// for a loop of statements that should not hop between threads, each one waiting for a task to resume.
    /// The body blocks the connection's queue, never the caller's thread.
    public func withSession<T: Sendable>(_ body: @escaping @Sendable (Session) throws -> T) async throws -> T {
        try await onQueue { cancellation in try body(Session(connection: self, cancellation: cancellation)) }
    }

    /// The connection, for the body of `withSession` only: it runs on the connection's queue.
    public struct Session {
        fileprivate let connection: PostgresConnection
        fileprivate let cancellation: CancellationState

        /// Runs one statement and returns its rows, as `PostgresConnection.query`.
        public func query(_ query: PostgresQuery) throws -> PostgresRows {
            try connection.run(query, cancellation: cancellation)
        }

        /// Whether the connection is open, outside a transaction, and has nothing unread: what the pool checks
        /// before it hands out an idle connection, without a round trip. A server that dropped the connection
        /// leaves its goodbye unread.
        public var isSound: Bool { connection.isSound() }
    }

    /// Runs one statement and returns the number of rows it affected.
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.query(query).affectedRows
    }

    /// Runs a script of several statements separated by semicolons (the simple query protocol), such as a
    /// migration file. A script takes no parameters; its rows are discarded.
    public func runScript(_ script: PostgresQuery) async throws {
        guard script.bindings.count == 0, script.statementName == nil else {
            throw PostgresError(.invalidQuery, message: "a script takes no parameters and cannot be prepared")
        }
        _ = try await onQueue { cancellation in
            try self.ensureOpen()
            try cancellation.begin()
            defer { cancellation.end() }
            let mayCommit = self.mayCommit(script.sql)
            guard PQsendQuery(self.handle, script.sql) == 1 else { throw self.connectionError() }
            self.counter?.count.add(1, ordering: .relaxed)
            cancellation.sent(self.cancelHandle)
            return try self.unconfirmedIf(mayCommit) { try self.collectResult(cancellation: cancellation) }
        }
    }

    /// Runs `statements` in one round trip (libpq's pipeline mode), each as a query of its own. Their rows are
    /// discarded; the first error is thrown, and the statements after it do not run.
    public func pipeline(_ statements: [PostgresQuery]) async throws {
        guard statements.allSatisfy({ $0.statementName == nil }) else {
            throw PostgresError(.invalidQuery, message: "a pipeline's statements cannot be prepared")
        }
        try await onQueue { cancellation in
            // Without a BEGIN of its own, the pipeline is one transaction committed at its sync.
            let mayCommit =
                self.mayCommit(statements.first?.sql ?? "")
                && statements.first?.sql.prefix(5).uppercased() != "BEGIN"
            try self.unconfirmedIf(mayCommit) { try self.runPipeline(statements, cancellation: cancellation) }
        }
    }

    // MARK: Transactions

    public enum IsolationLevel: Sendable {
        case readCommitted, repeatableRead, serializable
    }

    /// Runs `body` in a transaction and commits it. A serialization failure (40001) or deadlock (40P01) rolls
    /// back and runs the whole closure again, up to `maxAttempts` times in all; any other error rolls back and
    /// is rethrown.
    ///
    /// `opening` runs first in each attempt, in the round trip that begins the transaction (`pipeline`): what
    /// the rest relies on, such as a lock or who acts.
    public func withTransaction<T: Sendable>(
        isolation: IsolationLevel = .readCommitted, maxAttempts: Int = 5, opening: [PostgresQuery] = [],
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let begin =
            switch isolation {
            case .readCommitted: "BEGIN ISOLATION LEVEL READ COMMITTED"
            case .repeatableRead: "BEGIN ISOLATION LEVEL REPEATABLE READ"
            case .serializable: "BEGIN ISOLATION LEVEL SERIALIZABLE"
            }
        var attempt = 1
        while true {
            do {
                try await pipeline([PostgresQuery(unsafeSQL: begin)] + opening)
                let value = try await body(self)
                try await execute("COMMIT")
                return value
            } catch let error as StaleConnection {
                throw error  // nothing was sent: the pool runs it all on another connection
            } catch {
                await rollback()
                guard let failure = error as? PostgresError, failure.isTransactionRetryable, attempt < maxAttempts
                else {
                    throw error
                }
                attempt += 1
                // Jittered backoff, so that the transactions that collided do not collide again.
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 * attempt))))
            }
        }
    }

    /// Rolls back whatever transaction is open, even when the task is cancelled; errors are ignored because the
    /// pool discards a connection left inside a transaction.
    private func rollback() async {
        _ = try? await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            queue.async {
                continuation.resume(
                    with: Result {
                        _ = try self.run("ROLLBACK", cancellation: CancellationState())
                    })
            }
        }
    }

    // MARK: Health

    /// Asks the next statement to check first, on the connection's queue and without a round trip, that the
    /// connection is still sound; if it is not, that statement throws `StaleConnection` without sending
    /// anything. The pool asks this of every idle connection it hands out, so the check costs no extra hop.
    func verifyBeforeNextStatement() {
        verifyOnNextUse.store(true, ordering: .releasing)
    }

    /// Runs on `queue`. An idle connection has nothing to read, so a readable socket means the server sent
    /// something unasked, typically the goodbye of a server that shut down or restarted, and the connection is
    /// not trusted. A transaction left open fails the check too.
    private func isSound() -> Bool {
        guard !isClosed, PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) == PQTRANS_IDLE else {
            return false
        }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// A duplicate of the connection's socket descriptor (-1 once closed), so that another thread can `poll`
    /// it for input without touching the connection. The caller closes it.
    public func duplicateSocket() async -> Int32 {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: self.isClosed ? -1 : dup(PQsocket(self.handle))) }
        }
    }

    /// Whether the last statement left the connection open and outside a transaction (no I/O; for the pool).
    var isReusable: Bool { reusable.load(ordering: .acquiring) }

    /// Whether the link to the server broke in the last statement: the server ended the connection, or it went
    /// quiet past tcp_user_timeout (no I/O; for the pool).
    var isLost: Bool { lost.load(ordering: .acquiring) }

    public func close() async {
        await withCheckedContinuation { continuation in
            queue.async {
                if !self.isClosed {
                    self.isClosed = true
                    PQfinish(self.handle)
                }
                continuation.resume()
            }
        }
    }

    // MARK: Notifications

    /// LISTENs on `channels` and streams the notifications that arrive. The connection is then dedicated to
    /// the stream: it is closed when the stream ends, and the stream ends with an error if the connection drops.
    ///
    /// The socket is watched for input, and also polled every `pollInterval`, so a dropped connection is
    /// noticed even when no readable event reports it.
    ///
    /// Each read of the socket happens inside `reading`, on the connection's queue: its argument reads and
    /// returns what arrived, which is then also streamed. A caller that must act on a notification before
    /// anyone could see the socket empty again (a cache that must not answer meanwhile) acts inside `reading`,
    /// where no scheduler stands between the read and the act.
    public func notifications(
        channels: [String], pollInterval: Duration = .seconds(1),
        reading: @escaping @Sendable (_ read: () -> [PostgresNotification]) -> Void = { _ = $0() }
    ) async throws -> AsyncThrowingStream<PostgresNotification, any Error> {
        for channel in channels {
            try await execute("LISTEN \(identifier: channel)")
        }
        let (stream, continuation) = AsyncThrowingStream<PostgresNotification, any Error>.makeStream()
        queue.async {
            let readable = DispatchSource.makeReadSource(fileDescriptor: PQsocket(self.handle), queue: self.queue)
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            let sources = ListenerSources(readable: readable, timer: timer)
            let drain = {
                if !self.drainNotifications(into: continuation, reading: reading) { sources.cancel() }
            }
            readable.setEventHandler(handler: drain)
            timer.setEventHandler(handler: drain)
            readable.setCancelHandler {
                if !self.isClosed {
                    self.isClosed = true
                    PQfinish(self.handle)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in sources.cancel() }
            let milliseconds =
                pollInterval.components.seconds * 1000 + pollInterval.components.attoseconds / 1_000_000_000_000_000
            let interval = DispatchTimeInterval.milliseconds(Int(max(milliseconds, 10)))
            timer.schedule(deadline: .now() + interval, repeating: interval)
            readable.resume()
            timer.resume()
            // Notifications that arrived together with the LISTEN results are already buffered.
            drain()
        }
        return stream
    }

    /// Reads what the socket has, inside `reading`, and yields every buffered notification. Returns false once
    /// the connection is gone, after finishing the stream with the error. Runs on `queue`.
    private func drainNotifications(
        into continuation: AsyncThrowingStream<PostgresNotification, any Error>.Continuation,
        reading: (() -> [PostgresNotification]) -> Void
    ) -> Bool {
        guard !isClosed else { return false }
        var sound = true
        var read = false
        var batch: [PostgresNotification] = []
        let readOnce = { () -> [PostgresNotification] in
            guard !read else { return [] }
            read = true
            sound = PQconsumeInput(self.handle) == 1 && PQstatus(self.handle) == CONNECTION_OK
            while sound, let notify = PQnotifies(self.handle) {
                batch.append(
                    PostgresNotification(
                        channel: String(cString: notify.pointee.relname),
                        payload: String(cString: notify.pointee.extra),
                        senderPID: notify.pointee.be_pid))
                PQfreemem(notify)
            }
            return batch
        }
        reading(readOnce)
        _ = readOnce()  // in case `reading` did not read
        for notification in batch { continuation.yield(notification) }
        guard sound else {
            continuation.finish(throwing: connectionError())
            return false
        }
        return true
    }

    // MARK: Running on the connection's queue

    /// Runs `body` on the connection's queue. If the task is cancelled meanwhile, a statement in flight is
    /// cancelled on the server (`PQcancel`) and the call throws `CancellationError`.
    private func onQueue<T: Sendable>(_ body: @escaping @Sendable (CancellationState) throws -> T) async throws -> T {
        let cancellation = CancellationState()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                queue.async {
                    continuation.resume(
                        with: Result {
                            if self.verifyOnNextUse.exchange(false, ordering: .acquiring), !self.isSound() {
                                self.reusable.store(false, ordering: .releasing)
                                throw StaleConnection()
                            }
                            return try body(cancellation)
                        })
                }
            }
        } onCancel: {
            cancellation.cancel(self.cancelHandle)
        }
    }

    /// Runs on `queue`.
    private func run(_ query: PostgresQuery, cancellation: CancellationState) throws -> PostgresRows {
        try ensureOpen()
        if let name = query.statementName {
            try prepareIfNeeded(name: name, query: query)
        }
        try cancellation.begin()
        defer { cancellation.end() }
        let mayCommit = mayCommit(query.sql)
        try send(query)
        counter?.count.add(1, ordering: .relaxed)
        cancellation.sent(cancelHandle)
        return try unconfirmedIf(mayCommit) { try collectResult(cancellation: cancellation) }
    }

    /// Whether `sql`, about to be sent, may commit: the connection is outside a transaction (it commits on its
    /// own), or it is a COMMIT. Runs on `queue`.
    private func mayCommit(_ sql: String) -> Bool {
        PQtransactionStatus(handle) == PQTRANS_IDLE || sql == "COMMIT"
    }

    /// Runs `body`, which reads what was sent, and marks a failure that ended the session `unconfirmed` when what
    /// was sent `mayCommit`: it may have been done. Runs on `queue`.
    private func unconfirmedIf<T>(_ mayCommit: Bool, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch var error as PostgresError where mayCommit && error.endsSession {
            error.unconfirmed = true
            throw error
        }
    }

    /// Sends one statement (as prepared when it names one), without waiting for its results. Runs on `queue`.
    private func send(_ query: PostgresQuery) throws {
        let sent = query.bindings.withParameterPointers { count, types, values, lengths, formats in
            if let name = query.statementName {
                return PQsendQueryPrepared(
                    handle, name, count, values, lengths, formats, PostgresFormat.binary.rawValue)
            }
            return PQsendQueryParams(
                handle, query.sql, count, types, values, lengths, formats, PostgresFormat.binary.rawValue)
        }
        guard sent == 1 else { throw connectionError() }
    }

    /// Runs on `queue`.
    private func runPipeline(_ statements: [PostgresQuery], cancellation: CancellationState) throws {
        try ensureOpen()
        try cancellation.begin()
        defer { cancellation.end() }
        // A failure to send or to read the pipeline's end is the connection's, which leaves it unusable
        // (`connectionError`): the pool does not hand it out again, wherever its pipeline stopped.
        guard PQenterPipelineMode(handle) == 1 else { throw connectionError() }
        for statement in statements { try send(statement) }
        guard PQpipelineSync(handle) == 1 else { throw connectionError() }
        counter?.count.add(1, ordering: .relaxed)
        cancellation.sent(cancelHandle)
        // The statements' results, those after a failed one aborted; then the sync.
        var failure: PostgresError?
        for _ in statements {
            // Read before the `??`, whose right side would not run once a failure is kept: every statement's
            // results must be read to reach the sync.
            let failed = readResults().failure
            failure = failure ?? failed
        }
        let end = PQgetResult(handle).map { PostgresResult(pointer: $0) }
        guard let end, PQresultStatus(end.pointer) == PGRES_PIPELINE_SYNC, PQexitPipelineMode(handle) == 1 else {
            throw connectionError()
        }
        try settle(failure, cancellation: cancellation)
    }

    /// Runs on `queue`.
    private func prepareIfNeeded(name: String, query: PostgresQuery) throws {
        if let known = preparedStatements[name] {
            guard known == query.sql else {
                throw PostgresError(
                    .invalidQuery, message: "prepared statement \"\(name)\" was already prepared with other SQL")
            }
            return
        }
        let types = query.bindings.types.map(\.rawValue)
        let sent = types.withUnsafeBufferPointer { types in
            PQsendPrepare(handle, name, query.sql, Int32(types.count), types.baseAddress)
        }
        guard sent == 1 else { throw connectionError() }
        _ = try collectResult(cancellation: nil)
        preparedStatements[name] = query.sql
    }

    /// Reads every result of the statement just sent; returns the last one or throws the first error.
    /// Runs on `queue`.
    private func collectResult(cancellation: CancellationState?) throws -> PostgresRows {
        let (last, failure) = readResults()
        try settle(failure, cancellation: cancellation)
        guard let last else { throw connectionError() }
        return PostgresRows(result: last)
    }

    /// Reads one statement's results, up to the null that ends them: the last that is not an error, and the
    /// first error. Runs on `queue`.
    private func readResults() -> (last: PostgresResult?, failure: PostgresError?) {
        var last: PostgresResult?
        var failure: PostgresError?
        while let pointer = PQgetResult(handle) {
            let result = PostgresResult(pointer: pointer)
            switch PQresultStatus(pointer) {
            case PGRES_BAD_RESPONSE, PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
                if failure == nil { failure = serverError(result) }
            default:
                last = result
            }
        }
        return (last, failure)
    }

    /// Once a round trip's results are read: notes whether the connection may go back to the pool, and throws
    /// `failure`, as a `CancellationError` when it is the cancellation the task asked for. Runs on `queue`.
    private func settle(_ failure: PostgresError?, cancellation: CancellationState?) throws {
        let connected = PQstatus(handle) == CONNECTION_OK
        lost.store(!connected, ordering: .releasing)
        reusable.store(connected && PQtransactionStatus(handle) == PQTRANS_IDLE, ordering: .releasing)
        if let failure {
            if cancellation?.isCancelled == true, failure.sqlState == .queryCanceled { throw CancellationError() }
            throw failure
        }
    }

    private func ensureOpen() throws {
        guard !isClosed else { throw PostgresError(.closed, message: "the connection was closed") }
    }

    private func serverError(_ result: PostgresResult) -> PostgresError {
        func field(_ code: Int32) -> String? {
            PQresultErrorField(result.pointer, code).map { String(cString: $0) }
        }
        guard PQstatus(handle) == CONNECTION_OK else { return connectionError() }
        guard let state = field(rbac_PG_DIAG_SQLSTATE) else {
            let message = String(cString: PQresultErrorMessage(result.pointer)).trimmingTrailingNewlines
            return PostgresError(.connection, message: message.isEmpty ? "no response from the server" : message)
        }
        return PostgresError(
            .server, sqlState: SQLState(state), message: field(rbac_PG_DIAG_MESSAGE_PRIMARY) ?? "",
            detail: field(rbac_PG_DIAG_MESSAGE_DETAIL), hint: field(rbac_PG_DIAG_MESSAGE_HINT),
            schema: field(rbac_PG_DIAG_SCHEMA_NAME), table: field(rbac_PG_DIAG_TABLE_NAME),
            column: field(rbac_PG_DIAG_COLUMN_NAME), constraint: field(rbac_PG_DIAG_CONSTRAINT_NAME))
    }

    private func connectionError() -> PostgresError {
        reusable.store(false, ordering: .releasing)
        lost.store(true, ordering: .releasing)
        let message = String(cString: PQerrorMessage(handle)).asOneLine
        return PostgresError(.connection, message: message.isEmpty ? "the connection to the server was lost" : message)
    }
}

/// A notification delivered by `NOTIFY channel, 'payload'`.
public struct PostgresNotification: Sendable, Hashable {
    public let channel: String
    public let payload: String
    public let senderPID: Int32
}

/// How many statements a pool's connections have sent.
final class StatementCounter: Sendable {
    let count = Atomic<Int>(0)
}

/// Thrown, only to the pool, by the first statement on a pooled connection that the server dropped while it
/// was idle; nothing was sent.
struct StaleConnection: Error {}

/// A `PGconn` pointer handed from the queue that opened it to the connection that will own it.
private struct UncheckedHandle: @unchecked Sendable {
    // Safety: passed once, from the block that created it to the initialiser; never used concurrently.
    let pointer: OpaquePointer
}

/// The two dispatch sources of a notification stream, cancelled together.
private struct ListenerSources: @unchecked Sendable {
    // Safety: DispatchSource.cancel may be called from any thread, any number of times; nothing else is used.
    let readable: any DispatchSourceRead
    let timer: any DispatchSourceTimer

    func cancel() {
        timer.cancel()
        readable.cancel()
    }
}

/// Cancellation of one operation on a connection: a flag, plus whether a statement is in flight, so that
/// `cancel` sends `PQcancel` only while the server is working on this operation's statement.
final class CancellationState: Sendable {
    private struct State {
        var cancelled = false
        var inFlight = false
    }
    private let state = Mutex(State())

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Marks a statement as about to be sent; throws if cancellation came first.
    func begin() throws {
        try state.withLock { state in
            if state.cancelled { throw CancellationError() }
            state.inFlight = true
        }
    }

    /// Called once the statement is on its way: a cancellation that came while it was being sent may have
    /// reached the server before the statement did, so it is sent again.
    func sent(_ cancelHandle: OpaquePointer?) {
        if isCancelled { Self.sendCancel(cancelHandle) }
    }

    func end() {
        state.withLock { $0.inFlight = false }
    }

    func cancel(_ cancelHandle: OpaquePointer?) {
        let inFlight = state.withLock { state in
            state.cancelled = true
            return state.inFlight
        }
        if inFlight { Self.sendCancel(cancelHandle) }
    }

    private static func sendCancel(_ cancelHandle: OpaquePointer?) {
        guard let cancelHandle else { return }
        var errorBuffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancelHandle, &errorBuffer, Int32(errorBuffer.count))
    }
}
