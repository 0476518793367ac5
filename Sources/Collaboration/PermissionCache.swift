import CoreMetrics
import Foundation
import Synchronization

/// Each (couple, user)'s permission set, kept in memory for checks, and dropped on every change notice, and
/// not used from the instant the membership it comes from expires (nothing announces an expiry: it is the
/// clock's).
///
/// Loads race with changes, so a load stores its result only if nothing said it may be stale meanwhile:
/// - each couple has a floor, the highest revision a change notice announced; a set read at a lower revision
///   is not stored;
/// - a change to what roles grant (`invalidate(roles:policyRevision:)`) is logged with its policy revision; a set
///   read at an older policy revision for one of those roles is neither stored nor answered from, and sets of
///   other roles stay;
/// - `invalidateAll` (lost notifications) starts a new epoch; a load begun in an older epoch (its `Ticket`) is
///   not stored;
/// - a couple evicted takes its floor with it, so the cache counts change notices: a load begun before the
///   latest notice of any couple it evicted is not stored for a couple it no longer knew the history of. Couples
///   evicted without a notice (most, under cold traffic) disown nothing.
///
/// At most `capacity` couples are kept. Eviction is CLOCK (second chance): each lookup marks its couple, and a
/// new couple takes the slot of the first unmarked one after the hand, clearing marks on its way. It costs a
/// constant amount per insertion on average, and a set looked up again before the hand comes round stays,
/// however much cold traffic passes.
///
/// A large cache is split into shards by couple, each with its own lock, clock and share of the capacity, so
/// that checks on several threads seldom wait for each other, as they would for one lock that every cached check
/// takes. Everything the rules above keep per couple lives in the couple's shard; what concerns every couple
/// (holds, epochs, policy changes) is applied to every shard.
public final class PermissionCache: Sendable {
    /// Taken before a load (`ticket(for:)`); `store` honours it only if nothing in between may have made the load
    /// stale. It is the ticket of one shard, the one whose couples the load is for: nothing in another shard can
    /// make it stale.
    public struct Ticket: Sendable {
        fileprivate let shard: Int
        fileprivate let ticket: Shard.Ticket
    }

    /// Beyond this many policy changes, the next one drops everything: the log stays short to read.
    static let maxRoleChanges = 64

    private let shards: [Shard]
    /// At most this many couples are tracked (rounded up to a whole number per shard); beyond it, one is evicted.
    public let capacity: Int
    /// The clock expiries are read against.
    private let now: @Sendable () -> Date

    /// Without a metrics factory, the process-wide one (`MetricsSystem.bootstrap`; a no-op until bootstrapped).
    /// Without a number of shards, one for every 4,096 couples of capacity, at most 16.
    public init(
        capacity: Int = 100_000, shards: Int? = nil, metrics factory: (any MetricsFactory)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        precondition(capacity > 0, "a cache needs room for at least one couple")
        let count = shards ?? min(16, max(1, capacity / 4096))
        precondition(count > 0, "a cache needs at least one shard")
        self.capacity = capacity
        self.now = now
        let metrics = Shard.Metrics(factory: factory ?? MetricsSystem.factory)
        let share = (capacity + count - 1) / count
        self.shards = (0..<count).map { _ in Shard(capacity: share, metrics: metrics) }
    }

    /// Random couple ids spread evenly over the shards by any two of their bytes. Internal for tests, which
    /// pick couples of one shard.
    func shardIndex(_ couple: UUID) -> Int {
        let bytes = couple.uuid
        return (Int(bytes.0) << 8 | Int(bytes.15)) % shards.count
    }

    private func shard(_ couple: UUID) -> Shard { shards[shardIndex(couple)] }

    /// The cached set, if there is one at `minRevision` or later whose membership has not expired.
    public func lookup(couple: UUID, user: UUID, minRevision: Int64? = nil) -> PermissionSet? {
        shard(couple).lookup(couple: couple, user: user, minRevision: minRevision, now: now)
    }

    /// Makes lookups find nothing until the matching `release`: a change feed holds the cache from before it
    /// reads its socket until it has applied what it read, so no answer comes from a set that a notice already
    /// read says is stale, however long the feed's thread waits for the processor in between.
    public func hold() { for shard in shards { shard.hold() } }

    public func release() { for shard in shards { shard.release() } }

    /// For a load of `couple`'s sets.
    public func ticket(for couple: UUID) -> Ticket { ticket(shard: shardIndex(couple)) }

    /// For a load of the permissions the roles grant, which the first shard keeps.
    public func ticketForKnownPermissions() -> Ticket { ticket(shard: 0) }

    private func ticket(shard index: Int) -> Ticket { Ticket(shard: index, ticket: shards[index].ticket()) }

    /// Keeps a set loaded under `ticket` (taken for `couple`), unless it may be stale. Sets of unknown couples,
    /// and sets past their expiry, are not kept.
    public func store(_ set: PermissionSet, couple: UUID, user: UUID, ticket: Ticket) {
        precondition(ticket.shard == shardIndex(couple), "a ticket taken for another couple's shard")
        guard set.revision != nil, set.expiresAt.map({ $0 > now() }) ?? true else { return }
        shards[ticket.shard].store(set, couple: couple, user: user, ticket: ticket.ticket)
    }

    /// The permissions some role grants, if they were loaded since the policy last changed (kept in the first
    /// shard).
    public func knownPermissions() -> Set<Permission>? { shards[0].knownPermissions() }

    /// Keeps the permissions the roles grant, loaded under `ticket` (`ticketForKnownPermissions`), unless a
    /// policy change or an `invalidateAll` came in between.
    public func storeKnownPermissions(_ known: Set<Permission>, ticket: Ticket) {
        precondition(ticket.shard == 0, "a ticket taken for a couple's shard")
        shards[0].storeKnownPermissions(known, ticket: ticket.ticket)
    }

    /// A membership of `couple` changed, bringing it to `revision` (nil: the couple is gone for good). Sets
    /// loaded at `revision` or later stay: they were read after the change committed, and so show it (a notice
    /// often arrives after a check that read through `min_revision` has loaded the new set).
    public func invalidate(couple: UUID, revision: Int64?) {
        shard(couple).invalidate(couple: couple, revision: revision)
    }

    /// What `roles` grant changed at `policyRevision`; nil: any role's grants may have. Sets of other roles stay.
    /// Every shard hears every change and is emptied together, so their logs fill up together.
    public func invalidate(roles: Set<String>?, policyRevision: Int64) {
        let dropAll = shards.map { $0.invalidate(roles: roles, policyRevision: policyRevision) }.contains(true)
        if dropAll { invalidateAll() }
    }

    /// Forgets everything, and every load in flight.
    public func invalidateAll() { for shard in shards { shard.invalidateAll() } }

    public var count: Int { shards.reduce(0) { $0 + $1.count } }

    /// Couples evicted to make room, since the cache was made.
    public var evictions: Int { shards.reduce(0) { $0 + $1.evictions } }
}

/// One shard of a `PermissionCache`: the rules of its documentation for the couples it holds, under one lock.
private final class Shard: Sendable {
    struct Ticket: Sendable {
        fileprivate let epoch: UInt64
        fileprivate let notices: UInt64
        fileprivate let roleChanges: Int
    }

    /// `rbac_permission_cache_evictions_total` and `rbac_permission_cache_couples`, shared by the shards; with
    /// the checks counted as `cached` and `database` (`rbac_operations_total`), they give the hit rate.
    final class Metrics: Sendable {
        let evicted: CoreMetrics.Counter
        private let tracked: CoreMetrics.Gauge
        /// Couples tracked by every shard together, which the gauge shows.
        private let trackedCouples = Atomic(0)

        init(factory: any MetricsFactory) {
            evicted = CoreMetrics.Counter(label: "rbac_permission_cache_evictions_total", factory: factory)
            tracked = CoreMetrics.Gauge(label: "rbac_permission_cache_couples", factory: factory)
        }

        /// Shards record the total as they change it, each under its own lock. Read again just before it is
        /// recorded, an older total seldom lands after a newer one, and the next change corrects it.
        func tracking(_ change: Int) {
            trackedCouples.add(change, ordering: .relaxed)
            tracked.record(trackedCouples.load(ordering: .relaxed))
        }
    }

    private struct Entry {
        let permissions: Set<Permission>
        let revision: Int64
        let role: String?
        /// The policy revision the permissions are known to be current at (nil: unknown).
        var policyRevision: Int64?
        let expiresAt: Date?
    }

    /// What roles a policy change changed.
    private struct RoleChange {
        let policyRevision: Int64
        let roles: Set<String>
    }

    private struct CoupleState {
        var floor: Int64 = .min
        /// The notice (`State.notices`) that last raised the floor; 0 for none.
        var lastNotice: UInt64 = 0
        /// A load whose ticket counts fewer notices may have missed one this state no longer shows (it was
        /// made after an eviction): it is not stored.
        var uncertainBefore: UInt64
        var users: [UUID: Entry] = [:]
        /// Its place in the clock.
        var slot: Int
    }

    private struct State {
        var epoch: UInt64 = 0
        var couples: [UUID: CoupleState] = [:]
        /// Every permission some role grants; nil until loaded, and after every `invalidateAll`.
        var known: Set<Permission>?
        /// Holds in force (`hold`); while there is one, lookups find nothing.
        var holds = 0
        /// Change notices applied (`invalidate(couple:revision:)`), counted.
        var notices: UInt64 = 0
        /// The latest notice among the couples evicted.
        var evictedNotice: UInt64 = 0
        /// The clock: the couple in each slot, and whether it was looked up since the hand last passed.
        var slots: [UUID] = []
        var marked: [Bool] = []
        var hand = 0
        var evictions = 0
        /// The policy changes heard since the last `invalidateAll`, at most `maxRoleChanges` of them, and the
        /// highest policy revision among them.
        var roleChanges: [RoleChange] = []
        var roleChangesHeard = 0
        var policyRevision: Int64 = .min

        func roleChanged(_ role: String, after policyRevision: Int64) -> Bool {
            roleChanges.contains { $0.policyRevision > policyRevision && $0.roles.contains(role) }
        }
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let metrics: Metrics

    init(capacity: Int, metrics: Metrics) {
        self.capacity = capacity
        self.metrics = metrics
    }

    /// The clock is read only for a set that expires: most never do, and reading it is much of a lookup's cost.
    func lookup(couple: UUID, user: UUID, minRevision: Int64?, now: () -> Date) -> PermissionSet? {
        state.withLock { state in
            guard state.holds == 0, let tracked = state.couples[couple], var entry = tracked.users[user],
                entry.revision >= (minRevision ?? .min)
            else {
                return nil
            }
            if let expiresAt = entry.expiresAt, expiresAt <= now() {
                state.couples[couple]?.users[user] = nil
                return nil
            }
            if let role = entry.role, entry.policyRevision ?? .min < state.policyRevision {
                if state.roleChanged(role, after: entry.policyRevision ?? .min) {
                    state.couples[couple]?.users[user] = nil
                    return nil
                }
                // No change heard since touches its role: current as of the latest heard.
                entry.policyRevision = state.policyRevision
                state.couples[couple]?.users[user] = entry
            }
            // Written only when it changes: a write takes the line from the other core's cache, and both cores
            // look up couples whose marks share a line.
            if !state.marked[tracked.slot] { state.marked[tracked.slot] = true }
            return PermissionSet(
                permissions: entry.permissions, revision: entry.revision, role: entry.role,
                policyRevision: entry.policyRevision, expiresAt: entry.expiresAt)
        }
    }

    func hold() { state.withLock { $0.holds += 1 } }

    func release() { state.withLock { $0.holds -= 1 } }

    func ticket() -> Ticket {
        state.withLock { Ticket(epoch: $0.epoch, notices: $0.notices, roleChanges: $0.roleChangesHeard) }
    }

    /// `set` has a revision and has not expired (`PermissionCache.store`).
    func store(_ set: PermissionSet, couple: UUID, user: UUID, ticket: Ticket) {
        guard let revision = set.revision else { return }
        state.withLock { state in
            guard ticket.epoch == state.epoch else { return }
            let tracked = state.couples[couple]
            guard revision >= tracked?.floor ?? .min,
                ticket.notices >= tracked?.uncertainBefore ?? state.evictedNotice,
                !(set.role.map { state.roleChanged($0, after: set.policyRevision ?? .min) } ?? false)
            else { return }
            if tracked == nil { track(couple, in: &state) }
            state.couples[couple]?.users[user] = Entry(
                permissions: set.permissions, revision: revision, role: set.role, policyRevision: set.policyRevision,
                expiresAt: set.expiresAt)
        }
    }

    func knownPermissions() -> Set<Permission>? { state.withLock { $0.known } }

    func storeKnownPermissions(_ known: Set<Permission>, ticket: Ticket) {
        state.withLock { state in
            guard ticket.epoch == state.epoch, ticket.roleChanges == state.roleChangesHeard else { return }
            state.known = known
        }
    }

    func invalidate(couple: UUID, revision: Int64?) {
        state.withLock { state in
            state.notices &+= 1
            if state.couples[couple] == nil { track(couple, in: &state) }
            guard var tracked = state.couples.removeValue(forKey: couple) else { return }
            tracked.floor = max(tracked.floor, revision ?? .max)
            tracked.lastNotice = state.notices
            tracked.users = tracked.users.filter { $0.value.revision >= tracked.floor }
            state.couples[couple] = tracked
        }
    }

    /// Whether the change overflows the log, which then calls for `invalidateAll`.
    func invalidate(roles: Set<String>?, policyRevision: Int64) -> Bool {
        state.withLock { state in
            state.roleChangesHeard += 1
            state.known = nil
            guard let roles, state.roleChanges.count < PermissionCache.maxRoleChanges else { return true }
            state.roleChanges.append(RoleChange(policyRevision: policyRevision, roles: roles))
            state.policyRevision = max(state.policyRevision, policyRevision)
            return false
        }
    }

    func invalidateAll() {
        let forgotten = state.withLock { state in
            let tracked = state.slots.count
            state.epoch &+= 1
            state.couples = [:]
            state.slots = []
            state.marked = []
            state.hand = 0
            state.known = nil
            // Loads begun from now on read every change heard so far.
            state.roleChanges = []
            return tracked
        }
        metrics.tracking(-forgotten)
    }

    var count: Int { state.withLock { $0.couples.values.reduce(0) { $0 + $1.users.count } } }

    var evictions: Int { state.withLock { $0.evictions } }

    /// Starts tracking `couple`, in a free slot or, when every slot is taken, in the slot of the first couple
    /// after the hand that was not looked up since the hand last passed it.
    private func track(_ couple: UUID, in state: inout State) {
        guard state.slots.count >= capacity else {
            state.couples[couple] = CoupleState(uncertainBefore: state.evictedNotice, slot: state.slots.count)
            state.slots.append(couple)
            state.marked.append(false)
            metrics.tracking(1)
            return
        }
        while state.marked[state.hand] {
            state.marked[state.hand] = false
            state.hand = (state.hand + 1) % state.slots.count
        }
        let slot = state.hand
        if let evicted = state.couples.removeValue(forKey: state.slots[slot]) {
            state.evictedNotice = max(state.evictedNotice, evicted.lastNotice)
            state.evictions += 1
            metrics.evicted.increment()
        }
        state.slots[slot] = couple
        state.couples[couple] = CoupleState(uncertainBefore: state.evictedNotice, slot: slot)
        state.hand = (slot + 1) % state.slots.count
    }
}
