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
///
/// The idle actors are kept in the order they fell idle, so that dropping the least recently used one, or those
/// idle too long, reads only what it drops: it happens under the lock every budget request takes, for each new
/// couple once the registry is full, where reading every actor would hold that lock for all of them.
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
        /// Its neighbours in the list of idle actors, while it is idle: the one that fell idle before it and
        /// the one after.
        var older: UUID?
        var newer: UUID?
    }

    private struct State {
        var entries: [UUID: Entry] = [:]
        /// The ends of the list of idle actors, least recently used first. An actor joins it at its `lastUsed`,
        /// read under the lock, so the list is in the order of that instant.
        var oldestIdle: UUID?
        var newestIdle: UUID?
        var lastSweep: ContinuousClock.Instant

        /// Puts `couple`, which just fell idle, at the new end of the list; `entry` is its entry, to be stored
        /// by the caller.
        mutating func appendIdle(_ couple: UUID, _ entry: inout Entry) {
            entry.older = newestIdle
            if let newest = newestIdle { entries[newest]!.newer = couple } else { oldestIdle = couple }
            newestIdle = couple
        }

        /// Takes the idle actor whose entry is `entry` out of the list, as it gets work or is dropped; its own
        /// links are left for the caller to clear or drop.
        mutating func unlink(_ entry: Entry) {
            if let older = entry.older { entries[older]!.newer = entry.newer } else { oldestIdle = entry.newer }
            if let newer = entry.newer { entries[newer]!.older = entry.older } else { newestIdle = entry.older }
        }

        /// Drops the least recently used idle actor, if any actor is idle.
        mutating func dropOldestIdle() {
            guard let oldest = oldestIdle, let entry = entries.removeValue(forKey: oldest) else { return }
            unlink(entry)
        }
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
        state.withLock { sweep(&$0, now: now()) }
    }

    /// How many couples have an actor now.
    public var count: Int { state.withLock { $0.entries.count } }

    private func checkOut(_ couple: UUID) -> CoupleBudget {
        state.withLock { state in
            let now = now()
            if now - state.lastSweep >= idleAfter / 4 { sweep(&state, now: now) }
            if var entry = state.entries[couple] {
                if entry.inFlight == 0 {
                    state.unlink(entry)
                    (entry.older, entry.newer) = (nil, nil)
                }
                entry.inFlight += 1
                entry.lastUsed = now
                state.entries[couple] = entry
                return entry.budget
            }
            let budget = make(couple)
            state.entries[couple] = Entry(budget: budget, inFlight: 1, lastUsed: now)
            if state.entries.count > capacity { state.dropOldestIdle() }
            return budget
        }
    }

    private func checkIn(_ couple: UUID) {
        state.withLock { state in
            var entry = state.entries[couple]!
            entry.inFlight -= 1
            entry.lastUsed = now()
            if entry.inFlight == 0 { state.appendIdle(couple, &entry) }
            state.entries[couple] = entry
        }
    }

    /// Drops the actors idle for `idleAfter` or longer: the oldest end of the list, up to the first idle for less.
    private func sweep(_ state: inout State, now: ContinuousClock.Instant) {
        while let oldest = state.oldestIdle, now - state.entries[oldest]!.lastUsed >= idleAfter {
            state.dropOldestIdle()
        }
        state.lastSweep = now
    }
}
