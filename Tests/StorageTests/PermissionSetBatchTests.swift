import Collaboration
import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import Storage

@Suite("Batched loads", .timeLimit(.minutes(1)))
struct BatchedLoaderTests {
    @Test("lookups made while every load runs wait, then go together, at most maxBatch at a time")
    func batchesUnderLoad() async throws {
        let gate = Gate()
        let batches = Mutex<[[Int]]>([])
        let loader = batchedLoader(concurrency: 2, maxBatch: 50) { keys in
            batches.withLock { $0.append(keys) }
            await gate.wait()
            return keys.map { $0 * 2 }
        }
        try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for key in 0..<100 { group.addTask { (key, try await loader.value(for: key)) } }
            // Two loads of one lookup each run (held at the gate); the other 98 lookups wait for them. A load
            // starts in a task of its own, so the second may reach the gate a moment after the 98th lookup waits.
            while loader.waitingCount < 98 || gate.waiters < 2 { await Task.yield() }
            #expect(batches.withLock { $0.map(\.count) } == [1, 1])
            gate.open()
            for try await (key, value) in group { #expect(value == key * 2) }
        }
        let sizes = batches.withLock { $0.map(\.count) }
        #expect(sizes.sorted() == [1, 1, 48, 50])
        #expect(Set(batches.withLock { $0.joined() }) == Set(0..<100))
        // Nothing runs any more: the next lookup loads at once, by itself.
        #expect(try await loader.value(for: 7) == 14)
        #expect(batches.withLock { $0.last } == [7])
    }

    @Test("a failed load fails the lookups it carried, and only those")
    func failedLoad() async throws {
        struct Refused: Error {}
        let gate = Gate()
        let loader = batchedLoader(concurrency: 1, maxBatch: 100) { keys in
            await gate.wait()
            if keys.contains(13) { throw Refused() }
            return keys
        }
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            group.addTask { (0, (try? await loader.value(for: 0)) == 0) }
            while gate.waiters == 0 { await Task.yield() }
            for key in 1..<20 { group.addTask { (key, (try? await loader.value(for: key)) == key) } }
            while loader.waitingCount < 19 { await Task.yield() }
            gate.open()
            return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        // Key 0 loaded alone; keys 1 to 19 went together, with 13 among them.
        #expect(outcomes[0] == true)
        #expect((1..<20).allSatisfy { outcomes[$0] == false })
        #expect(try await loader.value(for: 5) == 5)
    }

    @Test("a cancelled lookup does not cancel the load that answers it and others")
    func cancelledLookup() async throws {
        let gate = Gate()
        let sawCancellation = Mutex(false)
        let loader = batchedLoader(concurrency: 1, maxBatch: 10) { keys in
            await gate.wait()
            sawCancellation.withLock { $0 = $0 || Task.isCancelled }
            return keys
        }
        let cancelled = Task { try await loader.value(for: 1) }
        while gate.waiters == 0 { await Task.yield() }
        cancelled.cancel()
        gate.open()
        #expect(try await cancelled.value == 1)
        #expect(sawCancellation.withLock { $0 } == false)
    }

    @Test("a drain that stops after one batch while lookups wait is followed by another, which takes them")
    func drainStopsEarly() async throws {
        let gate = Gate()
        let drains = Mutex<[[Int]]>([])
        let loader = BatchedLoader<Int, Int>(concurrency: 1, maxBatch: 100) { batches in
            guard let keys = batches.next() else { return }
            drains.withLock { $0.append(keys) }
            await gate.wait()
            batches.answer(.success(keys))
        }
        try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            group.addTask { (0, try await loader.value(for: 0)) }
            while gate.waiters == 0 { await Task.yield() }
            for key in 1..<20 { group.addTask { (key, try await loader.value(for: key)) } }
            while loader.waitingCount < 19 { await Task.yield() }
            gate.open()
            for try await (key, value) in group { #expect(value == key) }
        }
        // Child tasks reach the loader in no promised order; what matters is which drain took which keys.
        #expect(drains.withLock { $0.map { $0.sorted() } } == [[0], Array(1..<20)])
        // The second drain stopped with nothing waiting: the next lookup starts a third at once.
        #expect(try await loader.value(for: 7) == 7)
        #expect(drains.withLock { $0.count } == 3)
    }

    @Test("a drain that fails before taking its batch fails that batch with its error, and only that batch")
    func drainFailsBeforeTaking() async throws {
        struct Refused: Error {}
        let gate = Gate()
        let attempts = Atomic(0)
        let loader = BatchedLoader<Int, Int>(concurrency: 1, maxBatch: 100) { batches in
            if attempts.add(1, ordering: .relaxed).newValue == 1 {
                await gate.wait()
                throw Refused()
            }
            while let keys = batches.next() { batches.answer(.success(keys)) }
        }
        let outcomes = try await withThrowingTaskGroup(of: (Int, Result<Int, any Error>).self) { group in
            group.addTask { (0, await Result { try await loader.value(for: 0) }) }
            while gate.waiters == 0 { await Task.yield() }
            for key in 1..<20 { group.addTask { (key, await Result { try await loader.value(for: key) }) } }
            while loader.waitingCount < 19 { await Task.yield() }
            gate.open()
            return try await group.reduce(into: [Int: Result<Int, any Error>]()) { $0[$1.0] = $1.1 }
        }
        #expect(throws: Refused.self) { try outcomes[0]!.get() }
        #expect((1..<20).allSatisfy { (try? outcomes[$0]!.get()) == $0 })
        #expect(attempts.load(ordering: .relaxed) == 2)
    }
}

extension Result where Failure == any Error {
    /// The outcome of `body`.
    fileprivate init(_ body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}

@Suite("Permission sets read in batches, on PostgreSQL", .timeLimit(.minutes(2)))
struct PermissionSetBatchTests {
    @Test("checks that arrive together are read by fewer statements, and each gets its own pair's set")
    func concurrentChecks() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 6) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let (owner, viewer, outsider) = (
                try await pool.newUser(), try await pool.newUser(), try await pool.newUser()
            )
            let couple = try await pool.newCouple(members: [(owner, "owner"), (viewer, "viewer")])
            let pairs = [(couple, owner), (couple, viewer), (couple, outsider), (UUID(), owner)]
            var expected: [PermissionSet] = []
            for (couple, user) in pairs {
                expected.append(try await repository.permissionSet(couple: couple, user: user))
            }
            #expect(expected[0].permissions.contains(Permission(rawValue: "couple.delete")!))
            #expect(expected[0].revision != nil)
            #expect(
                expected[1].permissions.map(\.rawValue).sorted() == [
                    "budget.view", "collaborators.view", "couple.view", "expenses.view", "gifts.view", "guests.view",
                    "vendors.view",
                ])
            #expect(expected[2].permissions.isEmpty && expected[2].revision == expected[0].revision)
            #expect(expected[3].permissions.isEmpty && expected[3].revision == nil)

            let checks = 400
            let before = pool.statementsSent
            try await withThrowingTaskGroup(of: (Int, PermissionSet).self) { group in
                for index in 0..<checks {
                    group.addTask {
                        let (couple, user) = pairs[index % pairs.count]
                        return (index, try await repository.permissionSet(couple: couple, user: user))
                    }
                }
                for try await (index, set) in group { #expect(set == expected[index % pairs.count]) }
            }
            let statements = pool.statementsSent - before
            #expect(statements < checks)
        }
    }

    @Test(
        "without a cache, an allowed check is one statement once the roles' permissions are known; only a denial reads the policy, to refuse a typo"
    )
    func uncachedCheckStatements() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let checker = PermissionChecker(repository: PostgresCollaborationRepository(pool: pool))
            let (owner, viewer) = (try await pool.newUser(), try await pool.newUser())
            let couple = try await pool.newCouple(members: [(owner, "owner"), (viewer, "viewer")])
            func statements(_ user: UUID, _ permission: String) async throws -> (Bool?, Int) {
                let before = pool.statementsSent
                let allowed = try? await checker.checkKnown(
                    couple: couple, user: user, permission: Permission(rawValue: permission)!
                ).allowed
                return (allowed, pool.statementsSent - before)
            }
            #expect(try await statements(owner, "budget.edit") == (true, 2), "the member's role, then what roles grant")
            #expect(try await statements(owner, "budget.edit") == (true, 1))
            #expect(try await statements(viewer, "budget.edit") == (false, 2))
            #expect(try await statements(owner, "budget.edti") == (nil, 2), "refused, not denied")

            // A load whose pairs hold no role has nothing to map: it does not read what roles grant.
            let fresh = PostgresCollaborationRepository(pool: pool)
            let before = pool.statementsSent
            #expect(try await fresh.permissionSet(couple: couple, user: UUID()).permissions.isEmpty)
            #expect(pool.statementsSent - before == 1)
        }
    }

    @Test("while other checks keep every load busy, a suspended member's next check finds no permissions")
    func revokeAmidChecks() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 8) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let (owner, planner) = (try await pool.newUser(), try await pool.newUser())
            let couple = try await pool.newCouple(members: [(owner, "owner"), (planner, "planner")])
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Others keep asking, for the planner too: a load of the planner's set begun before a write must
                // not answer a check made after it.
                for user in Array(repeating: owner, count: 8) + Array(repeating: planner, count: 8) {
                    group.addTask {
                        while !Task.isCancelled {
                            _ = try await repository.permissionSet(couple: couple, user: user)
                        }
                    }
                }
                for _ in 0..<100 {
                    try await pool.query(
                        "UPDATE memberships SET status = 'suspended' WHERE couple_id = \(couple) AND user_id = \(planner)"
                    )
                    #expect(try await repository.permissionSet(couple: couple, user: planner).permissions.isEmpty)
                    try await pool.query(
                        "UPDATE memberships SET status = 'active' WHERE couple_id = \(couple) AND user_id = \(planner)")
                    #expect(
                        try await repository.permissionSet(couple: couple, user: planner).permissions.contains(
                            Permission(rawValue: "budget.edit")!))
                }
                group.cancelAll()
                try await group.waitForAll()
            }
        }
    }

    @Test("when the server drops the connection that loads keep using, checks go on over another")
    func drainConnectionKilled() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 4) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let owner = try await pool.newUser()
            let couple = try await pool.newCouple(members: [(owner, "owner")])
            let expected = try await repository.permissionSet(couple: couple, user: owner)
            let admin = try await PostgresConnection.connect(pool.configuration)
            let answered = Atomic(0)
            let failed = Atomic(0)
            let kills = 10
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Eight checks at a time, one per task: a batch answers eight at most.
                for _ in 0..<8 {
                    group.addTask { @Sendable in
                        while !Task.isCancelled {
                            do {
                                let set = try await repository.permissionSet(couple: couple, user: owner)
                                #expect(set == expected)
                                answered.add(1, ordering: .relaxed)
                            } catch let error as CollaborationError {
                                // Only a batch in flight when its connection died fails, and says so.
                                #expect(error.code == .unavailable)
                                failed.add(1, ordering: .relaxed)
                            }
                        }
                    }
                }
                for _ in 0..<kills {
                    // Every pooled connection that has read permission sets, the one the loads use among them.
                    // Right after a kill, the loads may be opening their next connection: until it shows, ask again.
                    var killed: Int64 = 0
                    while killed == 0 {
                        killed = try await admin.query(
                            """
                            SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) AS killed
                            FROM pg_stat_activity
                            WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%user_roles(%'
                            """)[0].decode("killed")
                    }
                    // More answers than one batch holds: a batch after the one in flight at the kill was answered,
                    // over another connection.
                    let before = answered.load(ordering: .relaxed)
                    while answered.load(ordering: .relaxed) <= before + 8 { await Task.yield() }
                }
                group.cancelAll()
                try await group.waitForAll()
            }
            await admin.close()
            // At most the batch in flight fails at each kill.
            #expect(failed.load(ordering: .relaxed) <= 8 * kills)
        }
    }

    @Test("a load cut off by the server fails its checks as unavailable, and marks no change as unconfirmed")
    func cutOffLoadIsARead() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 2) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let owner = try await pool.newUser()
            let couple = try await pool.newCouple(members: [(owner, "owner")])
            _ = try await repository.permissionSet(couple: couple, user: owner)
            // The load waits for the memberships the locker holds, and its session is ended there: the statement
            // was sent outside a transaction, yet it only reads, so the request it served changed nothing.
            let locker = try await PostgresConnection.connect(pool.configuration)
            try await ensuring {
                try await locker.execute("BEGIN")
                try await locker.execute("LOCK TABLE memberships IN ACCESS EXCLUSIVE MODE")
                let unconfirmed = UnconfirmedChanges()
                async let load = UnconfirmedChanges.$current.withValue(unconfirmed) {
                    try await Outcome.of { _ = try await repository.permissionSet(couple: couple, user: owner) }
                }
                var killed: Int64 = 0
                while killed == 0 {
                    killed = try await pool.query(
                        """
                        SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
                            AND query LIKE '%user_roles(%'
                        """)[0].decode("n")
                }
                #expect(try await load == .refused("unavailable"))
                #expect(!unconfirmed.any)
            } finally: {
                await locker.close()
            }
        }
    }

    @Test("while what a role grants keeps changing, every set read matches the policy at its revision")
    func policyChangesAmidChecks() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 8) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let (owner, viewer) = (try await pool.newUser(), try await pool.newUser())
            let couple = try await pool.newCouple(members: [(owner, "owner"), (viewer, "viewer")])
            let edit = Permission(rawValue: "budget.edit")!
            // Every change to role_permissions advances the policy revision by one, and no couple's; the viewer
            // holds budget.edit exactly at the policy revisions an odd number of changes past `start`.
            let start: Int64 = try await pool.query("SELECT revision FROM policy_revision")[0].decode("revision")
            let coupleRevision = try await repository.permissionSet(couple: couple, user: viewer).revision
            let changes = 60
            let sets = try await withThrowingTaskGroup(of: [PermissionSet].self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        var seen: [PermissionSet] = []
                        while !Task.isCancelled {
                            seen.append(try await repository.permissionSet(couple: couple, user: viewer))
                        }
                        return seen
                    }
                }
                for change in 0..<changes {
                    if change.isMultiple(of: 2) {
                        try await pool.query("INSERT INTO role_permissions VALUES ('viewer', 'budget.edit')")
                    } else {
                        try await pool.query(
                            "DELETE FROM role_permissions WHERE role = 'viewer' AND permission = 'budget.edit'")
                    }
                    // The next read, whoever makes it, is at this change's revision or later.
                    let set = try await repository.permissionSet(couple: couple, user: viewer)
                    let revision = try #require(set.policyRevision)
                    #expect(revision >= start + Int64(change) + 1)
                    #expect(set.revision == coupleRevision)
                    #expect(set.permissions.contains(edit) == !(revision - start).isMultiple(of: 2))
                }
                group.cancelAll()
                var sets: [PermissionSet] = []
                for try await seen in group { sets += seen }
                return sets
            }
            let revisions = Set(sets.compactMap(\.policyRevision))
            #expect(revisions.count > 1, "the reads saw the policy change")
            for set in sets {
                let revision = try #require(set.policyRevision)
                #expect(set.role == "viewer")
                #expect(set.permissions.contains(edit) == !(revision - start).isMultiple(of: 2))
                #expect(set.permissions.contains(Permission(rawValue: "budget.view")!))
            }
        }
    }
}

/// A loader whose drains load each batch with `load`.
private func batchedLoader(concurrency: Int, maxBatch: Int, load: @escaping @Sendable ([Int]) async throws -> [Int])
    -> BatchedLoader<Int, Int>
{
    BatchedLoader(concurrency: concurrency, maxBatch: maxBatch) { batches in
        while let keys = batches.next() {
            do {
                batches.answer(.success(try await load(keys)))
            } catch {
                batches.answer(.failure(error))
            }
        }
    }
}

/// Holds loads until the test opens it.
private final class Gate: Sendable {
    private let state = Mutex<(isOpen: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    var waiters: Int { state.withLock { $0.waiting.count } }

    func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state in
                if !state.isOpen { state.waiting.append(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }

    func open() {
        let waiting = state.withLock { state in
            state.isOpen = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
