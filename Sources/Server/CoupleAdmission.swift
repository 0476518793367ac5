import Collaboration
import Foundation
import Hummingbird
import Synchronization

/// How many requests of one couple are answered at once, so that no couple can take every database connection:
/// one whose row another session keeps locked holds each request to it for up to `--lock-timeout`, and with it a
/// connection, and without a bound twenty such requests left none for any other couple. A request past the
/// bound waits for a place, first come first served, as long as it would wait for a connection; then it is
/// answered 503.
final class CoupleAdmission: Sendable {
    let limit: Int
    let wait: Duration

    private struct Places {
        var taken = 0
        var waiting: [(ticket: UInt64, admit: CheckedContinuation<Bool, Never>)] = []
    }
    private struct State {
        var couples: [UUID: Places] = [:]
        var tickets: UInt64 = 0
        /// The tickets of the requests waiting, or about to: one given up on before it was put in line is
        /// missing here when it comes to be.
        var pending: Set<UInt64> = []
    }
    private let state = Mutex(State())

    init(limit: Int, wait: Duration) {
        precondition(limit >= 1)
        (self.limit, self.wait) = (limit, wait)
    }

    /// Takes one of the couple's places, waiting up to `wait` for one; false when none came free.
    func enter(_ couple: UUID) async -> Bool {
        let ticket: UInt64? = state.withLock { state in
            if state.couples[couple, default: Places()].taken < limit {
                state.couples[couple, default: Places()].taken += 1
                return nil
            }
            state.tickets += 1
            state.pending.insert(state.tickets)
            return state.tickets
        }
        guard let ticket else { return true }
        let timer = Task { [wait] in
            try await Task.sleep(for: wait)
            giveUp(couple, ticket)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { admit in
                // A place given back since the count above is taken here; else the turn comes from `leave`.
                let admitted: Bool? = state.withLock { state in
                    guard state.pending.contains(ticket) else { return false }
                    guard state.couples[couple, default: Places()].taken >= limit else {
                        state.pending.remove(ticket)
                        state.couples[couple, default: Places()].taken += 1
                        return true
                    }
                    state.couples[couple, default: Places()].waiting.append((ticket, admit))
                    return nil
                }
                if let admitted { admit.resume(returning: admitted) }
            }
        } onCancel: {
            giveUp(couple, ticket)
        }
    }

    /// Gives back a place `enter` took: to the longest waiting, if any.
    func leave(_ couple: UUID) {
        let next: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard var places = state.couples[couple] else { return nil }
            defer { state.couples[couple] = places.taken == 0 ? nil : places }
            guard places.waiting.isEmpty else {
                let next = places.waiting.removeFirst()
                state.pending.remove(next.ticket)
                return next.admit
            }
            places.taken -= 1
            return nil
        }
        next?.resume(returning: true)
    }

    /// How many of the couple's requests wait for a place.
    func waiting(_ couple: UUID) -> Int {
        state.withLock { $0.couples[couple]?.waiting.count ?? 0 }
    }

    /// Ends the wait of `ticket`, if it still waits (or is about to).
    private func giveUp(_ couple: UUID, _ ticket: UInt64) {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard state.pending.remove(ticket) != nil,
                let index = state.couples[couple]?.waiting.firstIndex(where: { $0.ticket == ticket })
            else { return nil }
            return state.couples[couple]?.waiting.remove(at: index).admit
        }
        waiter?.resume(returning: false)
    }
}

/// Admits a request to a route of one couple (`/v1/couples/{couple}/...`) through `CoupleAdmission`; a path whose
/// couple is no id goes on, for the route to refuse.
struct CoupleAdmissionMiddleware<Context: RequestContext>: RouterMiddleware {
    let admission: CoupleAdmission

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let couple = context.parameters.get("couple").flatMap(UUID.init(uuidString:)) else {
            return try await next(request, context)
        }
        guard await admission.enter(couple) else {
            throw APIError(
                CollaborationError(
                    .unavailable,
                    "this couple's requests are waiting on the database (\(admission.limit) answered at once); "
                        + "try again shortly"))
        }
        defer { admission.leave(couple) }
        return try await next(request, context)
    }
}
