import Collaboration
import Foundation
import Hummingbird
import Prometheus
import Synchronization

/// How many requests that may wait on a couple's lock are answered at once, so that neither one couple nor a few
/// can take every database connection: one whose row another session keeps locked holds each request to it for up
/// to `--lock-timeout`, and with it a connection (on Citus, a worker gone silent holds its couples' requests until
/// Citus gives up on it). Without a bound, twenty such requests would leave none for any other couple; with a
/// bound per couple alone, two such couples would leave none for checks. So each couple has `limit` places, and
/// all changes together `total`, fewer than the connections: the rest stay for checks, reads of users, sign-ins
/// and invitation pages, which wait on no couple's lock. A change whose couple its path does not name (accepting an
/// invitation, deleting a user) takes a place among all alone. A request past a bound waits for a place, first come
/// first served, as long as it would wait for a connection in all; then it is answered 503. How many wait is
/// `rbac_requests_waiting_for_turn`: above zero, some couple's requests wait on the database.
final class CoupleAdmission: Sendable {
    let limit: Int
    let total: Int
    let wait: Duration
    private let waitingGauge: Gauge

    /// A line of requests waiting for places: one couple's, or all changes'.
    private enum Line: Hashable {
        case couple(UUID)
        case all
    }
    private struct Places {
        var taken = 0
        var waiting: [(ticket: UInt64, admit: CheckedContinuation<Bool, Never>)] = []
    }
    private struct State {
        var lines: [Line: Places] = [:]
        /// Of every line.
        var waiting = 0
        var tickets: UInt64 = 0
        /// The tickets of the requests waiting, or about to: one given up on before it was put in line is
        /// missing here when it comes to be.
        var pending: Set<UInt64> = []
    }
    private let state = Mutex(State())

    init(
        limit: Int, total: Int, wait: Duration, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
    ) {
        precondition(1 <= limit && limit <= total)
        (self.limit, self.total, self.wait) = (limit, total, wait)
        waitingGauge = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "rbac_requests_waiting_for_turn", unitName: "",
                helpText: "Requests waiting for a place among one couple's or all changes' (503 after 5 s)."))
    }

    /// Runs `body` holding one of the couple's places and one of all (without a couple, one of all alone), taken
    /// within `wait` in all; `unavailable` when they did not come free in time.
    func admitted<T>(_ couple: UUID?, _ body: () async throws -> T) async throws -> T {
        guard await enter(couple) else { throw refusal }
        defer { leave(couple) }
        return try await body()
    }

    /// The answer to a request that found no place in time.
    var refusal: CollaborationError {
        CollaborationError(
            .unavailable,
            """
            requests are waiting on the database (\(limit) of one couple and \(total) changes in all answered at \
            once); try again shortly
            """)
    }

    /// Takes one of the couple's places, then one of all, waiting up to `wait` in all; false, holding neither,
    /// when they did not come free in time.
    func enter(_ couple: UUID?) async -> Bool {
        let deadline = ContinuousClock.now + wait
        if let couple, !(await take(.couple(couple), limit, until: deadline)) { return false }
        guard await take(.all, total, until: deadline) else {
            if let couple { give(.couple(couple)) }
            return false
        }
        return true
    }

    /// Gives back the places `enter` took: each to the longest waiting for it, if any.
    func leave(_ couple: UUID?) {
        give(.all)
        if let couple { give(.couple(couple)) }
    }

    /// How many of the couple's requests wait for one of its places.
    func waiting(_ couple: UUID) -> Int {
        state.withLock { $0.lines[.couple(couple)]?.waiting.count ?? 0 }
    }

    /// How many requests wait for one of all places (holding their couple's, if any).
    var waitingForAny: Int {
        state.withLock { $0.lines[.all]?.waiting.count ?? 0 }
    }

    private func take(_ line: Line, _ limit: Int, until deadline: ContinuousClock.Instant) async -> Bool {
        let ticket: UInt64? = state.withLock { state in
            if state.lines[line, default: Places()].taken < limit {
                state.lines[line, default: Places()].taken += 1
                return nil
            }
            state.tickets += 1
            state.pending.insert(state.tickets)
            return state.tickets
        }
        guard let ticket else { return true }
        let timer = Task {
            try await Task.sleep(until: deadline, clock: .continuous)
            giveUp(line, ticket)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { admit in
                // A place given back since the count above is taken here; else the turn comes from `give`.
                let admitted: Bool? = state.withLock { state in
                    guard state.pending.contains(ticket) else { return false }
                    guard state.lines[line, default: Places()].taken >= limit else {
                        state.pending.remove(ticket)
                        state.lines[line, default: Places()].taken += 1
                        return true
                    }
                    state.lines[line, default: Places()].waiting.append((ticket, admit))
                    counted(waiting: 1, in: &state)
                    return nil
                }
                if let admitted { admit.resume(returning: admitted) }
            }
        } onCancel: {
            giveUp(line, ticket)
        }
    }

    private func give(_ line: Line) {
        let next: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard var places = state.lines[line] else { return nil }
            defer { state.lines[line] = places.taken == 0 ? nil : places }
            guard places.waiting.isEmpty else {
                let next = places.waiting.removeFirst()
                state.pending.remove(next.ticket)
                counted(waiting: -1, in: &state)
                return next.admit
            }
            places.taken -= 1
            return nil
        }
        next?.resume(returning: true)
    }

    /// Notes, under the lock, `change` more requests waiting in some line, as the gauge shows them.
    private func counted(waiting change: Int, in state: inout State) {
        state.waiting += change
        waitingGauge.set(Int64(state.waiting))
    }

    /// Ends the wait of `ticket`, if it still waits (or is about to).
    private func giveUp(_ line: Line, _ ticket: UInt64) {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard state.pending.remove(ticket) != nil,
                let index = state.lines[line]?.waiting.firstIndex(where: { $0.ticket == ticket })
            else { return nil }
            counted(waiting: -1, in: &state)
            return state.lines[line]?.waiting.remove(at: index).admit
        }
        waiter?.resume(returning: false)
    }
}

/// Admits a request through `CoupleAdmission`: to a route of one couple (`/v1/couples/{couple}/...`) among that
/// couple's and all; with `outsideCouples`, to any other route among all alone (a path whose couple is no id
/// included, for the route to refuse). Without it, such a request goes on unbounded: the checks and reads.
struct CoupleAdmissionMiddleware<Context: RequestContext>: RouterMiddleware {
    let admission: CoupleAdmission
    let outsideCouples: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let couple = context.parameters.get("couple").flatMap(UUID.init(parsing:))
        guard couple != nil || outsideCouples else { return try await next(request, context) }
        guard await admission.enter(couple) else { throw APIError(admission.refusal) }
        defer { admission.leave(couple) }
        return try await next(request, context)
    }
}
