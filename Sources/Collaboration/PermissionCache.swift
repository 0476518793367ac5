import Foundation
import Synchronization

/// Each (couple, user)'s permission set, kept in memory for checks, and dropped on every change notice.
///
/// Loads race with changes, so a load stores its result only if nothing said it may be stale meanwhile:
/// - each couple has a floor, the highest revision a change notice announced; a set read at a lower revision
///   is not stored;
/// - `invalidateAll` (lost notifications, role changes, eviction) starts a new epoch; a load begun in an older
///   epoch (its `Ticket`) is not stored.
public final class PermissionCache: Sendable {
    /// Taken before a load; `store` honours it only if no `invalidateAll` came in between.
    public struct Ticket: Sendable {
        fileprivate let epoch: UInt64
    }

    private struct Entry {
        let permissions: Set<Permission>
        let revision: Int64
    }

    private struct CoupleState {
        var floor: Int64 = .min
        var users: [UUID: Entry] = [:]
    }

    private struct State {
        var epoch: UInt64 = 0
        var couples: [UUID: CoupleState] = [:]
        /// Every permission some role grants; nil until loaded, and after every `invalidateAll`.
        var known: Set<Permission>?
        /// Holds in force (`hold`); while there is one, lookups find nothing.
        var holds = 0
    }

    private let state = Mutex(State())
    /// At most this many couples are tracked; beyond it, one is evicted.
    public let capacity: Int

    public init(capacity: Int = 100_000) {
        precondition(capacity > 0, "a cache needs room for at least one couple")
        self.capacity = capacity
    }

    /// The cached set, if there is one at `minRevision` or later.
    public func lookup(couple: UUID, user: UUID, minRevision: Int64? = nil) -> PermissionSet? {
        state.withLock { state in
            guard state.holds == 0, let entry = state.couples[couple]?.users[user],
                entry.revision >= (minRevision ?? .min)
            else {
                return nil
            }
            return PermissionSet(permissions: entry.permissions, revision: entry.revision)
        }
    }

    /// Makes lookups find nothing until the matching `release`: a change feed holds the cache from before it
    /// reads its socket until it has applied what it read, so no answer comes from a set that a notice already
    /// read says is stale, however long the feed's thread waits for the processor in between.
    public func hold() { state.withLock { $0.holds += 1 } }

    public func release() { state.withLock { $0.holds -= 1 } }

    public func ticket() -> Ticket { state.withLock { Ticket(epoch: $0.epoch) } }

    /// Keeps a set loaded under `ticket`, unless it may be stale. Sets of unknown couples are not kept.
    public func store(_ set: PermissionSet, couple: UUID, user: UUID, ticket: Ticket) {
        guard let revision = set.revision else { return }
        state.withLock { state in
            guard ticket.epoch == state.epoch, revision >= state.couples[couple]?.floor ?? .min else { return }
            Self.makeRoom(for: couple, in: &state, capacity: capacity)
            state.couples[couple, default: CoupleState()].users[user] = Entry(
                permissions: set.permissions, revision: revision)
        }
    }

    /// The permissions some role grants, if they were loaded since the policy last changed.
    public func knownPermissions() -> Set<Permission>? { state.withLock { $0.known } }

    /// Keeps the permissions the roles grant, loaded under `ticket`, unless an `invalidateAll` came in between.
    public func storeKnownPermissions(_ known: Set<Permission>, ticket: Ticket) {
        state.withLock { state in
            guard ticket.epoch == state.epoch else { return }
            state.known = known
        }
    }

    /// A membership of `couple` changed, bringing it to `revision` (nil: the couple is gone for good).
    public func invalidate(couple: UUID, revision: Int64?) {
        state.withLock { state in
            Self.makeRoom(for: couple, in: &state, capacity: capacity)
            var tracked = state.couples[couple, default: CoupleState()]
            tracked.floor = max(tracked.floor, revision ?? .max)
            tracked.users = [:]
            state.couples[couple] = tracked
        }
    }

    /// Forgets everything, and every load in flight.
    public func invalidateAll() {
        state.withLock { state in
            state.epoch &+= 1
            state.couples = [:]
            state.known = nil
        }
    }

    public var count: Int { state.withLock { $0.couples.values.reduce(0) { $0 + $1.users.count } } }

    /// Evicts one couple when a new one would exceed the capacity. Its floor goes with it, so loads in flight
    /// are disowned too (a new epoch).
    private static func makeRoom(for couple: UUID, in state: inout State, capacity: Int) {
        guard state.couples[couple] == nil, state.couples.count >= capacity else { return }
        state.couples.remove(at: state.couples.startIndex)
        state.epoch &+= 1
    }
}
