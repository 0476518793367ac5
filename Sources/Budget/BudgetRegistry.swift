import Foundation
import Synchronization

/// Hands out one `CoupleBudget` actor per couple: made on first use, dropped once idle for `idleAfter`, and at
/// most `capacity` of them kept (the least recently used idle one goes first). An actor with work in flight is
/// never dropped, so a couple never has two at once in this process.
///
/// Idle actors (and the overviews they cache) are swept out by the registry's own traffic, whichever couple
/// it is for: at most once a quarter of `idleAfter`, so one is dropped at most 1.25 × `idleAfter` after its
/// last use while any couple is served. Without traffic, `sweepIdle()` does it (the HTTP service calls it every
/// quarter of `idleAfter`).
public final class BudgetRegistry: Sendable {
    public let capacity: Int
    public let idleAfter: Duration
    private let make: @Sendable (UUID) -> CoupleBudget
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state: Mutex<State>

    private struct Entry {
        let budget: CoupleBudget
        var inFlight: Int
        var lastUsed: ContinuousClock.Instant
    }

    private struct State {
        var entries: [UUID: Entry] = [:]
        var lastSweep: ContinuousClock.Instant
    }

    public init(
        capacity: Int = 10_000, idleAfter: Duration = .seconds(300),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        make: @escaping @Sendable (UUID) -> CoupleBudget
    ) {
        precondition(capacity > 0, "a registry needs room for at least one couple")
        self.capacity = capacity
        self.idleAfter = idleAfter
        self.now = now
        self.make = make
        state = Mutex(State(lastSweep: now()))
    }

    /// Runs `body` with the couple's actor.
    public func with<T>(
        _ couple: UUID, isolation: isolated (any Actor)? = #isolation, _ body: (CoupleBudget) async throws -> T
    ) async throws -> T {
        let budget = checkOut(couple)
        defer { checkIn(couple) }
        return try await body(budget)
    }

    /// Drops the actors idle for `idleAfter` or longer, whether or not any couple is being served.
    public func sweepIdle() {
        let now = now()
        state.withLock { sweep(&$0, now: now) }
    }

    /// How many couples have an actor now.
    public var count: Int { state.withLock { $0.entries.count } }

    private func checkOut(_ couple: UUID) -> CoupleBudget {
        let now = now()
        return state.withLock { state in
            if now - state.lastSweep >= idleAfter / 4 { sweep(&state, now: now) }
            if var entry = state.entries[couple] {
                entry.inFlight += 1
                entry.lastUsed = now
                state.entries[couple] = entry
                return entry.budget
            }
            let budget = make(couple)
            state.entries[couple] = Entry(budget: budget, inFlight: 1, lastUsed: now)
            if state.entries.count > capacity { dropLeastRecentlyUsedIdle(&state.entries) }
            return budget
        }
    }

    private func checkIn(_ couple: UUID) {
        let now = now()
        state.withLock { state in
            state.entries[couple]?.inFlight -= 1
            state.entries[couple]?.lastUsed = now
        }
    }

    /// Drops the actors idle for `idleAfter` or longer.
    private func sweep(_ state: inout State, now: ContinuousClock.Instant) {
        state.entries = state.entries.filter { $0.value.inFlight > 0 || now - $0.value.lastUsed < idleAfter }
        state.lastSweep = now
    }

    /// Drops the idle actor used least recently, if any actor is idle.
    private func dropLeastRecentlyUsedIdle(_ entries: inout [UUID: Entry]) {
        let oldest = entries.lazy.filter { $0.value.inFlight == 0 }.min { $0.value.lastUsed < $1.value.lastUsed }
        if let oldest { entries[oldest.key] = nil }
    }
}
