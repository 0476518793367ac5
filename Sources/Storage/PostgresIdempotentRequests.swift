import Collaboration
import Foundation
import Postgres

/// Requests sent with an `Idempotency-Key`, in `idempotent_requests`, kept for `keep` (a day unless told).
public struct PostgresIdempotentRequests: IdempotentRequestStore {
    private let pool: PostgresConnectionPool
    private let keep: Int64

    public init(pool: PostgresConnectionPool, keep: Duration = .seconds(24 * 3600)) {
        self.pool = pool
        self.keep = keep.components.seconds
    }

    /// A row older than `keep` is as good as none, and so is a hold its instance stopped renewing (it died), but
    /// only for the request it held: another sent with the key is refused as long as the row is kept.
    public func claim(
        key: UUID, idempotencyKey: String, fingerprint: [UInt8], couple: UUID?, holdFor: Duration
    ) async throws -> IdempotentRequest {
        // Between the two statements the row can be released, or lapse; the claim is tried again then.
        for _ in 0..<3 {
            let claimed = try await query(
                "idempotent_claim",
                """
                INSERT INTO idempotent_requests AS r
                    (key_id, idempotency_key, fingerprint, couple_id, claim, claimed_until)
                VALUES (\(key), \(idempotencyKey), \(Data(fingerprint)), \(couple), \(UUID()),
                        now() + make_interval(secs => \(holdFor.components.seconds)::float8))
                ON CONFLICT (key_id, idempotency_key) DO UPDATE
                SET fingerprint = excluded.fingerprint, couple_id = excluded.couple_id, claim = excluded.claim,
                    claimed_until = excluded.claimed_until, status = NULL, body = NULL, withheld = false,
                    unconfirmed = false, created_at = now()
                WHERE r.created_at < now() - make_interval(secs => \(keep)::float8)
                   OR (r.claimed_until < now() AND r.fingerprint = excluded.fingerprint)
                RETURNING claim
                """)
            if let row = claimed.first { return .claimed(try row.decode("claim")) }
            let rows = try await query(
                "idempotent_request",
                """
                SELECT fingerprint, status, body, withheld, unconfirmed, claimed_until < now() AS lapsed
                FROM idempotent_requests
                WHERE key_id = \(key) AND idempotency_key = \(idempotencyKey)
                  AND created_at >= now() - make_interval(secs => \(keep)::float8)
                """)
            guard let row = rows.first else { continue }
            guard try row.decode("fingerprint", as: Data.self) == Data(fingerprint) else { return .otherRequest }
            guard try !row.decode("unconfirmed", as: Bool.self) else { return .unconfirmed }
            guard let status = try row.decode("status", as: Int16?.self) else {
                if try row.decode("lapsed", as: Bool?.self) == true { continue }
                return .running
            }
            return .answered(
                status: Int(status), body: try row.decode("body", as: Data?.self).map { [UInt8]($0) },
                withheld: try row.decode("withheld"))
        }
        return .running
    }

    public func renew(_ claim: UUID, holdFor: Duration) async throws -> Bool {
        let renewed = try await query(
            "idempotent_renew",
            """
            UPDATE idempotent_requests
            SET claimed_until = now() + make_interval(secs => \(holdFor.components.seconds)::float8)
            WHERE claim = \(claim) AND claimed_until IS NOT NULL RETURNING 1
            """)
        return !renewed.isEmpty
    }

    /// An answer with a body, to a request under a couple deleted meanwhile, is not kept (`delete_couple` deletes
    /// those it finds kept): the key is given up. Waiting for a deletion under way, by locking the couple's row,
    /// keeps one from slipping in after it.
    public func record(_ claim: UUID, status: Int, body: [UInt8]?, withheld: Bool) async throws {
        let body = body.map { Data($0) }
        _ = try await query(
            "idempotent_record",
            """
            WITH kept AS (
                UPDATE idempotent_requests r
                SET status = \(Int16(status)), body = \(body), withheld = \(withheld), claimed_until = NULL
                WHERE claim = \(claim) AND claimed_until IS NOT NULL
                  AND (r.couple_id IS NULL OR \(body) IS NULL
                       OR EXISTS (SELECT FROM couples c WHERE c.id = r.couple_id FOR KEY SHARE))
                RETURNING 1)
            DELETE FROM idempotent_requests
            WHERE claim = \(claim) AND claimed_until IS NOT NULL AND NOT EXISTS (SELECT FROM kept)
            """)
    }

    public func leaveUnconfirmed(_ claim: UUID) async throws {
        _ = try await query(
            "idempotent_unconfirmed",
            """
            UPDATE idempotent_requests SET claimed_until = NULL, unconfirmed = true
            WHERE claim = \(claim) AND claimed_until IS NOT NULL
            """)
    }

    public func release(_ claim: UUID) async throws {
        _ = try await query(
            "idempotent_release", "DELETE FROM idempotent_requests WHERE claim = \(claim) AND claimed_until IS NOT NULL"
        )
    }

    /// Runs one of the statements every keyed request makes, prepared once per connection.
    private func query(_ name: String, _ query: PostgresQuery) async throws -> PostgresRows {
        try await pool.query(query.prepared(as: name))
    }

    public func prune() async throws -> Int {
        let row = try await pool.query(
            """
            WITH gone AS (
                DELETE FROM idempotent_requests WHERE created_at < now() - make_interval(secs => \(keep)::float8)
                RETURNING 1)
            SELECT count(*) AS gone FROM gone
            """)[0]
        return Int(try row.decode("gone", as: Int64.self))
    }
}
