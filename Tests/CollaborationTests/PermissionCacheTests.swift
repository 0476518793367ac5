import Foundation
import InMemoryRepositories
import Synchronization
import TestSupport
import Testing

@testable import Collaboration

@Suite("Permission cache rules")
struct PermissionCacheTests {
    let couple = UUID()
    let user = UUID()
    let edit = Permission(rawValue: "budget.edit")!

    func set(revision: Int64?) -> PermissionSet { PermissionSet(permissions: [edit], revision: revision) }

    /// Stores a set of a couple never seen before, as cold traffic does, under a ticket taken for it.
    func storeCold(_ cache: PermissionCache) {
        let cold = UUID()
        cache.store(set(revision: 1), couple: cold, user: user, ticket: cache.ticket(for: cold))
    }

    @Test("a stored set is found, and only at its revision or older min_revision")
    func lookup() {
        let cache = PermissionCache()
        cache.store(set(revision: 4), couple: couple, user: user, ticket: cache.ticket(for: couple))
        #expect(cache.lookup(couple: couple, user: user) == set(revision: 4))
        #expect(cache.lookup(couple: couple, user: user, minRevision: 4) == set(revision: 4))
        #expect(cache.lookup(couple: couple, user: user, minRevision: 5) == nil)
        #expect(cache.lookup(couple: couple, user: UUID()) == nil)
    }

    @Test("a set is answered up to the instant its membership expires, and never from then on")
    func expiry() {
        let clock = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let cache = PermissionCache(now: { clock.withLock { $0 } })
        let expiresAt = Date(timeIntervalSince1970: 1_000_060)
        let expiring = PermissionSet(permissions: [edit], revision: 3, role: "planner", expiresAt: expiresAt)
        cache.store(expiring, couple: couple, user: user, ticket: cache.ticket(for: couple))
        clock.withLock { $0 = expiresAt.addingTimeInterval(-0.001) }
        #expect(cache.lookup(couple: couple, user: user) == expiring, "an instant before, the set holds")
        clock.withLock { $0 = expiresAt }
        #expect(cache.lookup(couple: couple, user: user) == nil, "at the instant of expiry, it is not used")
        #expect(cache.count == 0, "and it is gone")
        cache.store(expiring, couple: couple, user: user, ticket: cache.ticket(for: couple))
        #expect(cache.count == 0, "a set loaded before its expiry and stored after it is not kept")
        let lasting = PermissionSet(permissions: [edit], revision: 3, role: "planner")
        cache.store(lasting, couple: couple, user: user, ticket: cache.ticket(for: couple))
        clock.withLock { $0 = .distantFuture }
        #expect(cache.lookup(couple: couple, user: user) == lasting, "a set without an expiry holds until a change")
    }

    @Test("a load that read before a change it heard of afterwards is not stored")
    func floor() {
        let cache = PermissionCache()
        let ticket = cache.ticket(for: couple)
        cache.invalidate(couple: couple, revision: 5)
        cache.store(set(revision: 4), couple: couple, user: user, ticket: ticket)
        #expect(cache.lookup(couple: couple, user: user) == nil)
        cache.store(set(revision: 5), couple: couple, user: user, ticket: cache.ticket(for: couple))
        #expect(cache.lookup(couple: couple, user: user) == set(revision: 5))
        cache.invalidate(couple: couple, revision: 6)
        #expect(cache.lookup(couple: couple, user: user) == nil)
    }

    @Test("a notice that comes after a set loaded at its revision leaves that set, and drops the older ones")
    func lateNotice() {
        let cache = PermissionCache()
        let (fresh, stale) = (UUID(), UUID())
        cache.store(set(revision: 4), couple: couple, user: stale, ticket: cache.ticket(for: couple))
        cache.store(set(revision: 5), couple: couple, user: fresh, ticket: cache.ticket(for: couple))
        cache.invalidate(couple: couple, revision: 5)
        #expect(cache.lookup(couple: couple, user: fresh) == set(revision: 5), "read after the change: it shows it")
        #expect(cache.lookup(couple: couple, user: stale) == nil)
        cache.invalidate(couple: couple, revision: 4)
        #expect(cache.lookup(couple: couple, user: fresh) == set(revision: 5), "a notice older than the floor")
        cache.invalidate(couple: couple, revision: nil)
        #expect(cache.lookup(couple: couple, user: fresh) == nil, "a deleted couple keeps nothing")
    }

    @Test("invalidateAll disowns loads in flight; unknown couples and deleted couples are never stored")
    func epochs() {
        let cache = PermissionCache()
        let ticket = cache.ticket(for: couple)
        cache.invalidateAll()
        cache.store(set(revision: 1), couple: couple, user: user, ticket: ticket)
        #expect(cache.count == 0)
        cache.store(set(revision: nil), couple: couple, user: user, ticket: cache.ticket(for: couple))
        #expect(cache.count == 0)
        cache.invalidate(couple: couple, revision: nil)
        cache.store(set(revision: 99), couple: couple, user: user, ticket: cache.ticket(for: couple))
        #expect(cache.count == 0)
    }

    @Test("the permissions the roles grant are kept until invalidateAll, and a load from before it is not kept")
    func knownPermissions() {
        let cache = PermissionCache()
        let known: Set<Permission> = [edit]
        let stale = cache.ticketForKnownPermissions()
        cache.invalidateAll()
        cache.storeKnownPermissions(known, ticket: stale)
        #expect(cache.knownPermissions() == nil)
        cache.storeKnownPermissions(known, ticket: cache.ticketForKnownPermissions())
        #expect(cache.knownPermissions() == known)
        cache.invalidate(couple: couple, revision: 5)
        #expect(cache.knownPermissions() == known, "a membership change leaves the policy alone")
        cache.invalidateAll()
        #expect(cache.knownPermissions() == nil)
    }

    @Test("a policy change drops the sets of the roles it names, and keeps the others")
    func roleChanges() {
        let cache = PermissionCache()
        let (planner, viewer, outsider) = (UUID(), UUID(), UUID())
        let (ticket, knownTicket) = (cache.ticket(for: couple), cache.ticketForKnownPermissions())
        cache.store(
            PermissionSet(permissions: [edit], revision: 3, role: "planner", policyRevision: 7), couple: couple,
            user: planner, ticket: ticket)
        cache.store(
            PermissionSet(permissions: [], revision: 3, role: "viewer", policyRevision: 7), couple: couple,
            user: viewer, ticket: ticket)
        cache.store(
            PermissionSet(permissions: [], revision: 3, policyRevision: 7), couple: couple, user: outsider,
            ticket: ticket)
        cache.storeKnownPermissions([edit], ticket: knownTicket)

        cache.invalidate(roles: ["planner"], policyRevision: 8)
        #expect(cache.lookup(couple: couple, user: planner) == nil, "the planner's set is stale")
        #expect(cache.lookup(couple: couple, user: viewer)?.policyRevision == 8, "the viewer's holds at 8 too")
        #expect(cache.lookup(couple: couple, user: outsider) != nil, "a non-member holds nothing under any policy")
        #expect(cache.knownPermissions() == nil, "what some role grants may have changed")
        cache.storeKnownPermissions([edit], ticket: knownTicket)
        #expect(cache.knownPermissions() == nil, "a load of the permissions from before the change is not kept")

        // A load that read the planner's role before the change and stores after it.
        cache.store(
            PermissionSet(permissions: [edit], revision: 3, role: "planner", policyRevision: 7), couple: couple,
            user: planner, ticket: cache.ticket(for: couple))
        #expect(cache.lookup(couple: couple, user: planner) == nil)
        // One that read after it; and a change heard after a load that already saw it drops nothing.
        cache.store(
            PermissionSet(permissions: [], revision: 3, role: "planner", policyRevision: 9), couple: couple,
            user: planner, ticket: cache.ticket(for: couple))
        cache.invalidate(roles: ["planner"], policyRevision: 9)
        #expect(cache.lookup(couple: couple, user: planner)?.permissions == [])

        cache.invalidate(roles: nil, policyRevision: 10)
        #expect(cache.count == 0, "a change that names no roles drops every set")
    }

    @Test("past its log of policy changes, the cache drops everything rather than forget one")
    func roleChangeLogBound() {
        let cache = PermissionCache()
        for revision in 1...Int64(PermissionCache.maxRoleChanges) {
            cache.invalidate(roles: ["planner"], policyRevision: revision)
        }
        let viewer = PermissionSet(permissions: [], revision: 1, role: "viewer", policyRevision: 0)
        cache.store(viewer, couple: couple, user: user, ticket: cache.ticket(for: couple))
        #expect(cache.lookup(couple: couple, user: user) != nil)
        cache.invalidate(roles: ["planner"], policyRevision: Int64(PermissionCache.maxRoleChanges) + 1)
        #expect(cache.count == 0)
        // The log starts afresh: a set read at an older revision is current as far as the cache has heard.
        cache.store(viewer, couple: couple, user: user, ticket: cache.ticket(for: couple))
        #expect(cache.lookup(couple: couple, user: user) != nil)
    }

    @Test("the cache holds at most its capacity of couples")
    func capacity() {
        let cache = PermissionCache(capacity: 3)
        for _ in 0..<10 { storeCold(cache) }
        #expect(cache.count <= 3)
        #expect(cache.count >= 1)
    }

    @Test("a couple looked up between evictions stays, however much cold traffic passes")
    func hotSetSurvives() {
        let cache = PermissionCache(capacity: 100)
        cache.store(set(revision: 1), couple: couple, user: user, ticket: cache.ticket(for: couple))
        var misses = 0
        for round in 1...20_000 {
            storeCold(cache)
            if round % 50 == 0, cache.lookup(couple: couple, user: user) == nil { misses += 1 }
        }
        #expect(misses == 0)
        #expect(cache.evictions >= 19_000, "the cold couples took turns in the other slots")
    }

    @Test("evicting couples no notice named disowns no load; evicting one that was named disowns older loads")
    func evictionDisownsOnlyWhatItMust() {
        let cache = PermissionCache(capacity: 4)
        let begun = cache.ticket(for: couple)
        for _ in 0..<10 { storeCold(cache) }
        cache.store(set(revision: 1), couple: couple, user: user, ticket: begun)
        #expect(cache.lookup(couple: couple, user: user) != nil, "cold evictions leave a load in flight alone")

        let named = UUID()
        let beforeNotice = cache.ticket(for: named)
        cache.invalidate(couple: named, revision: 5)
        for _ in 0..<10 { storeCold(cache) }
        cache.store(set(revision: 4), couple: named, user: user, ticket: beforeNotice)
        #expect(cache.lookup(couple: named, user: user) == nil, "its floor went with it: the older load is refused")
        cache.store(set(revision: 5), couple: named, user: user, ticket: cache.ticket(for: named))
        #expect(cache.lookup(couple: named, user: user) == set(revision: 5), "a load begun after the notice is kept")
    }

    @Test("a cache in shards: holds, tickets and policy changes reach every couple, notices only their own")
    func shards() {
        let cache = PermissionCache(capacity: 4000, shards: 4)
        let couples = (0..<200).map { _ in UUID() }
        for couple in couples {
            cache.store(set(revision: 1), couple: couple, user: user, ticket: cache.ticket(for: couple))
        }
        #expect(cache.count == 200, "room for 1,000 a shard holds 200 random couples, however they fall")

        cache.hold()
        #expect(couples.allSatisfy { cache.lookup(couple: $0, user: user) == nil }, "a hold hides every shard")
        cache.release()
        #expect(couples.allSatisfy { cache.lookup(couple: $0, user: user) != nil })

        // A notice for one couple refuses that couple's older load, and no other couple's.
        let loads = ([couples[0]] + (0..<200).map { _ in UUID() }).map { ($0, cache.ticket(for: $0)) }
        cache.invalidate(couple: couples[0], revision: 2)
        for (couple, ticket) in loads { cache.store(set(revision: 1), couple: couple, user: UUID(), ticket: ticket) }
        #expect(cache.count == 199 + 200, "the noticed couple's set went, and its older load was refused")

        let beforeDrop = couples.map { ($0, cache.ticket(for: $0)) }
        cache.invalidateAll()
        for (couple, ticket) in beforeDrop { cache.store(set(revision: 1), couple: couple, user: user, ticket: ticket) }
        #expect(cache.count == 0, "a load begun before invalidateAll is refused in every shard")

        for couple in couples {
            cache.store(set(revision: 1), couple: couple, user: user, ticket: cache.ticket(for: couple))
        }
        let known = Set([edit])
        cache.storeKnownPermissions(known, ticket: cache.ticketForKnownPermissions())
        #expect(cache.knownPermissions() == known)
        cache.invalidate(roles: nil, policyRevision: 1)
        #expect(cache.count == 0 && cache.knownPermissions() == nil, "a change to any role empties every shard")
    }

    @Test("a load is judged by its couple's shard: notices heard in another shard do not vouch for it")
    func ticketOfTheCouplesShard() {
        let cache = PermissionCache(capacity: 4, shards: 2)
        func couples(inShard shard: Int, _ count: Int) -> [UUID] {
            var found: [UUID] = []
            while found.count < count {
                let couple = UUID()
                if cache.shardIndex(couple) == shard { found.append(couple) }
            }
            return found
        }
        let named = couples(inShard: 1, 1)[0]
        for couple in couples(inShard: 0, 5) { cache.invalidate(couple: couple, revision: 1) }
        let begun = cache.ticket(for: named)
        cache.invalidate(couple: named, revision: 5)
        // Room for two couples a shard: the named couple is evicted, and its floor with it.
        for couple in couples(inShard: 1, 4) {
            cache.store(set(revision: 1), couple: couple, user: user, ticket: cache.ticket(for: couple))
        }
        cache.store(set(revision: 4), couple: named, user: user, ticket: begun)
        #expect(cache.lookup(couple: named, user: user) == nil, "begun before its shard's notice, the load is refused")
    }

    @Test("loads racing notices, evictions and lost notices on every thread: no lookup answers a set a notice dropped")
    func racingLoads() async throws {
        let cache = PermissionCache(capacity: 8, shards: 2)
        let couples = (0..<24).map { _ in UUID() }
        let users = (0..<3).map { _ in UUID() }
        // The database as the cache hears of it: each couple's revision, and the latest the cache was told of
        // (by its notice, or by invalidateAll after notices were lost).
        let database = Mutex([UUID: (revision: Int64, told: Int64)](uniqueKeysWithValues: couples.map { ($0, (1, 1)) }))
        let tally = Mutex((stale: 0, hits: 0, overtaken: 0, lost: 0))
        for _ in 0..<100 {
            _ = try await race(8) { _, go in
                await go()
                for _ in 0..<100 {
                    let couple = couples.randomElement()!
                    switch Int.random(in: 0..<100) {
                    case 0..<15:
                        // A commit, its notice delivered in commit order, or now and then lost.
                        let lost = Int.random(in: 0..<10) == 0
                        database.withLock { rows in
                            rows[couple]!.revision += 1
                            guard !lost else { return }
                            cache.invalidate(couple: couple, revision: rows[couple]!.revision)
                            rows[couple]!.told = rows[couple]!.revision
                        }
                        if lost { tally.withLock { $0.lost += 1 } }
                    case 15..<17:
                        // The feed reconnects: whatever it missed is covered at once.
                        database.withLock { rows in
                            cache.invalidateAll()
                            for couple in couples { rows[couple]!.told = rows[couple]!.revision }
                        }
                    default:
                        let user = users.randomElement()!
                        let told = database.withLock { $0[couple]!.told }
                        if let found = cache.lookup(couple: couple, user: user) {
                            tally.withLock {
                                $0.hits += 1
                                if found.revision! < told { $0.stale += 1 }
                            }
                            continue
                        }
                        let ticket = cache.ticket(for: couple)
                        let read = database.withLock { $0[couple]!.revision }
                        await Task.yield()
                        cache.store(set(revision: read), couple: couple, user: user, ticket: ticket)
                        if database.withLock({ $0[couple]!.revision }) > read { tally.withLock { $0.overtaken += 1 } }
                    }
                }
            }
        }
        let counts = tally.withLock { $0 }
        #expect(counts.stale == 0, "a set older than a change the cache had been told of was answered: \(counts)")
        #expect(counts.hits > 0 && counts.overtaken > 0 && counts.lost > 0, "the race did not happen: \(counts)")
        #expect(cache.evictions > 0)
    }

    @Test("a ticket taken for a couple of one shard stores nothing of another's: the process stops")
    func ticketOfAnotherShard() async {
        await #expect(processExitsWith: .failure) {
            let cache = PermissionCache(capacity: 8, shards: 2)
            let couples = (0..<64).map { _ in UUID() }
            let first = couples.first { cache.shardIndex($0) == 0 }!
            let second = couples.first { cache.shardIndex($0) == 1 }!
            cache.store(
                PermissionSet(permissions: [], revision: 1), couple: second, user: UUID(),
                ticket: cache.ticket(for: first))
        }
    }

    @Test("the checker answers from the cache only while trusted, and reads through min_revision")
    func checker() async throws {
        let roles = try PolicyDocument.load(from: repositoryRoot.appendingPathComponent("policies/policy.json"))
            .flattened()
        let repository = InMemoryCollaborationRepository(roles: roles)
        let owner = try await repository.addUser(email: EmailAddress(rawValue: "o@example.com")!, displayName: nil)
        let couple = try await repository.createCouple(name: "C", owner: owner.id, as: .operator(label: "t"))
        let cache = PermissionCache()
        let trusted = Flag()
        let checker = PermissionChecker(repository: repository, cache: cache, isCacheTrusted: { trusted.isSet })

        #expect(try await checker.check(couple: couple.id, user: owner.id, permission: edit).allowed)
        try await checker.requireKnown([edit])
        #expect(cache.count == 0, "nothing is cached while the feed is not trusted")
        #expect(cache.knownPermissions() == nil)
        await #expect(throws: CollaborationError.self) {
            try await checker.requireKnown([Permission(rawValue: "a.b")!])
        }
        trusted.set()
        let first = try await checker.check(couple: couple.id, user: owner.id, permission: edit)
        #expect(cache.count == 1)
        try await checker.requireKnown([edit])
        #expect(cache.knownPermissions()?.contains(edit) == true)
        // A write the cache has not heard of: a plain check may still be served from the cache, but one with
        // the write's revision reads through.
        let partner = try await repository.addUser(email: EmailAddress(rawValue: "p@example.com")!, displayName: nil)
        let written = try await repository.grant(
            couple: couple.id, user: partner.id, role: RoleName(rawValue: "partner")!, as: .operator(label: "t"))
        #expect(try await checker.check(couple: couple.id, user: owner.id, permission: edit).revision == first.revision)
        let fresh = try await checker.check(
            couple: couple.id, user: owner.id, permission: edit, minRevision: written.revision)
        #expect(fresh.revision == written.revision)
    }
}
