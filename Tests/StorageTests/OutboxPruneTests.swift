import Collaboration
import Foundation
import Postgres
import Storage
import TestSupport
import Testing

/// The sweep's deletion of settled outbox messages: sent and dead ones once kept long enough, never a waiting one.
@Suite("The outbox pruned")
struct OutboxPruneTests {
    /// A message of `status` that settled (was delivered, or last due) `ago`.
    static func message(_ pool: PostgresConnectionPool, _ status: String, ago: Duration) async throws -> UUID {
        let seconds = ago.components.seconds
        return try await pool.query(
            """
            WITH endpoint AS (
                INSERT INTO webhook_endpoints (url, secret_box) VALUES ('https://hooks.example.com/', '\\x00')
                RETURNING id)
            INSERT INTO outbox (event_type, payload, channel, endpoint_id, status, next_attempt_at, delivered_at)
            SELECT 'invitation.created', '{}', 'webhook', endpoint.id, \(status), at,
                   CASE WHEN \(status) = 'sent' THEN at END
            FROM (SELECT now() - make_interval(secs => \(seconds)::float8) AS at) settled, endpoint
            RETURNING outbox.id
            """)[0].decode("id")
    }

    @Test("sent and dead messages go once kept long enough, a batch at a time until none is left; waiting ones stay")
    func pruned() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 2) { pool in
            let hour = Duration.seconds(3600)
            var kept: Set<UUID> = []
            for _ in 0..<3 {
                _ = try await Self.message(pool, "sent", ago: hour * 2)
                _ = try await Self.message(pool, "dead", ago: hour * 50)
                kept.insert(try await Self.message(pool, "sent", ago: hour / 2))
                kept.insert(try await Self.message(pool, "dead", ago: hour * 20))
                kept.insert(try await Self.message(pool, "pending", ago: hour * 24 * 60))
            }
            let outbox = PostgresOutbox(pool: pool)
            var heard: [[Int]] = []
            let pruned = try await outbox.prune(keepSent: hour, keepDead: hour * 24, batch: 2) {
                heard.append([$0.sent, $0.dead])
            }
            #expect((pruned.sent, pruned.dead) == (3, 3))
            #expect(heard == [[2, 2]], "progress after the full batch, not after the last")
            let left = Set(try await pool.query("SELECT id FROM outbox").map { try $0.decode("id", as: UUID.self) })
            #expect(left == kept)
            let again = try await outbox.prune(keepSent: hour, keepDead: hour * 24)
            #expect((again.sent, again.dead) == (0, 0), "nothing is deleted twice")
        }
    }

    @Test("a pruning whose task is cancelled stops after the batch it is in, and the next goes on")
    func cancelled() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 2) { pool in
            for _ in 0..<5 { _ = try await Self.message(pool, "sent", ago: .seconds(7200)) }
            let outbox = PostgresOutbox(pool: pool)
            let first = try await Task {
                try await outbox.prune(keepSent: .seconds(3600), keepDead: .seconds(3600), batch: 2) { _ in
                    withUnsafeCurrentTask { $0?.cancel() }
                }
            }.value
            #expect(first.sent == 2, "one batch, then it stopped")
            let rest = try await outbox.prune(keepSent: .seconds(3600), keepDead: .seconds(3600), batch: 2)
            #expect(rest.sent == 3)
        }
    }

    @Test("a dead message retried while the outbox is pruned is retried and kept, or deleted and not retried")
    func retriedWhilePruned() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 3) { pool in
            let outbox = PostgresOutbox(pool: pool)
            var seen = Set<[Int]>()
            // 100 rounds, and more (up to 1,000) until each has come first at least once: on a loaded machine the
            // pruning can win a hundred in a row.
            var rounds = 0
            while rounds < 100 || (seen.count < 2 && rounds < 1000) {
                rounds += 1
                let id = try await Self.message(pool, "dead", ago: .seconds(2 * 86_400))
                // 0: the retry (1 when it took the message back, 0 when it found none, -1 for anything else);
                // 1: the pruning (how many dead messages it deleted).
                let outcomes = try await race(2) { index, go in
                    await go()
                    if index == 0 {
                        switch try await Outcome.of({ _ = try await outbox.retry(id) }) {
                        case .success: return 1
                        case .refused("not_found"): return 0
                        case .refused: return -1
                        }
                    }
                    return try await outbox.prune(keepSent: .seconds(86_400), keepDead: .seconds(86_400)).dead
                }
                seen.insert(outcomes)
                let status = try await pool.query("SELECT status FROM outbox WHERE id = \(id)").map {
                    try $0.decode("status", as: String.self)
                }
                switch outcomes {
                case [1, 0]: #expect(status == ["pending"], "retried, so kept")
                case [0, 1]: #expect(status == [], "deleted, so not retried")
                default: Issue.record("both or neither: \(outcomes), the message \(status)")
                }
            }
            #expect(seen.count > 1, "the two should land on both sides of each other in \(rounds) rounds: \(seen)")
        }
    }
}
