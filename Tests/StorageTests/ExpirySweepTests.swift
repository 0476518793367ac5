import Foundation
import Postgres
import Storage
import TestSupport
import Testing

/// The sweep's record of expiries, a round of `limit` of each kind at a time: `rbac sweep` and serve's sweeper
/// alike catch up on a burst of them in one sweep.
@Suite("Expiries swept")
struct ExpirySweepTests {
    /// A couple whose `viewers` viewers' access ended a minute ago.
    static func expired(viewers: Int, in pool: PostgresConnectionPool) async throws {
        var members = [(try await pool.newUser(), "owner")]
        for _ in 0..<viewers { members.append((try await pool.newUser(), "viewer")) }
        let couple = try await pool.newCouple(members: members)
        try await pool.query(
            """
            UPDATE memberships SET expires_at = now() - interval '1 minute'
            WHERE couple_id = \(couple) AND role = 'viewer'
            """)
    }

    @Test("expiries are recorded a round at a time until a round records fewer, with progress after each full one")
    func rounds() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 2) { pool in
            try await Self.expired(viewers: 5, in: pool)
            let repository = PostgresCollaborationRepository(pool: pool)
            var heard: [Int] = []
            let swept = try await repository.sweepExpired(limit: 2) { heard.append($0.memberships) }
            #expect((swept.memberships, swept.invitations, swept.unreached) == (5, 0, 0))
            #expect(heard == [2, 4], "progress after the full rounds, not after the last")
            #expect(try await repository.sweepExpired().memberships == 0, "nothing is recorded twice")
        }
    }

    @Test("a sweep whose task is cancelled stops after the round it is in, and the next goes on")
    func cancelled() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 2) { pool in
            try await Self.expired(viewers: 5, in: pool)
            let repository = PostgresCollaborationRepository(pool: pool)
            let first = try await Task {
                try await repository.sweepExpired(limit: 2) { _ in withUnsafeCurrentTask { $0?.cancel() } }
            }.value
            #expect(first.memberships == 2, "one round, then it stopped")
            #expect(try await repository.sweepExpired(limit: 2).memberships == 3)
        }
    }
}
