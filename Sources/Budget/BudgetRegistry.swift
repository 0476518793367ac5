import Foundation
import Synchronization

/// Hands out one `CoupleBudget` actor per couple: made on first use, dropped once idle for `idleAfter`, and at
/// most `capacity` of them kept (the least recently used idle ones go first). An actor with work in flight is
/// never dropped, so a couple never has two at once in this process.
public final class BudgetRegistry: Sendable {
    public let capacity: Int
    public let idleAfter: Duration
    private let make: @Sendable (UUID) -> CoupleBudget
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex<[UUID: Entry]>([:])

    private struct Entry {
        let budget: CoupleBudget
        var inFlight: Int
        var lastUsed: ContinuousClock.Instant
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
    }

    /// Runs `body` with the couple's actor.
    public func with<T>(
        _ couple: UUID, isolation: isolated (any Actor)? = #isolation, _ body: (CoupleBudget) async throws -> T
    ) async throws -> T {
        let budget = checkOut(couple)
        defer { checkIn(couple) }
        return try await body(budget)
    }

    /// How many couples have an actor now.
    public var count: Int { state.withLock { $0.count } }

    private func checkOut(_ couple: UUID) -> CoupleBudget {
        let now = now()
        return state.withLock { entries in
            if var entry = entries[couple] {
                entry.inFlight += 1
                entry.lastUsed = now
                entries[couple] = entry
                return entry.budget
            }
            let budget = make(couple)
            entries[couple] = Entry(budget: budget, inFlight: 1, lastUsed: now)
            evict(&entries, now: now)
            return budget
        }
    }

    private func checkIn(_ couple: UUID) {
        let now = now()
        state.withLock { entries in
            entries[couple]?.inFlight -= 1
            entries[couple]?.lastUsed = now
        }
    }

    /// Drops idle actors unused for `idleAfter`, then the least recently used idle ones beyond `capacity`.
    private func evict(_ entries: inout [UUID: Entry], now: ContinuousClock.Instant) {
        let idle = entries.filter { $0.value.inFlight == 0 }.sorted { $0.value.lastUsed < $1.value.lastUsed }
        var excess = entries.count - capacity
        for (couple, entry) in idle {
            guard excess > 0 || now - entry.lastUsed >= idleAfter else { break }
            entries[couple] = nil
            excess -= 1
        }
    }
}
