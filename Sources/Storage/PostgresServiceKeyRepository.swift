import Collaboration
import Foundation
import Postgres

/// Service keys in the `service_keys` table.
public struct PostgresServiceKeyRepository: ServiceKeyRepository {
    private let pool: PostgresConnectionPool

    public init(pool: PostgresConnectionPool) {
        self.pool = pool
    }

    public func createKey(name: String, keyHash: [UInt8]) async throws -> ServiceKey {
        try Self.key(
            try await pool.query(
                """
                INSERT INTO service_keys (name, key_hash) VALUES (\(name), \(Data(keyHash)))
                RETURNING \(sql: Self.columns)
                """)[0])
    }

    public func keys() async throws -> [ServiceKey] {
        try await pool.query("SELECT \(sql: Self.columns) FROM service_keys ORDER BY created_at").map(Self.key)
    }

    public func revokeKey(_ id: UUID) async throws -> (key: ServiceKey, revokedNow: Bool) {
        // A key this statement revokes has its transaction's start instant; one revoked before, an earlier
        // transaction's, which a revocation waiting for it reads once it commits.
        let rows = try await pool.query(
            """
            UPDATE service_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = \(id)
            RETURNING \(sql: Self.columns), revoked_at = now() AS revoked_now
            """)
        guard let row = rows.first else {
            throw CollaborationError(.notFound, "service key \(id.uuidString.lowercased()) not found")
        }
        return (try Self.key(row), try row.decode("revoked_now"))
    }

    /// Without when it was last used, which authenticating a request does not need: the lookup every request
    /// the key cache cannot answer makes reads one table.
    public func key(withHash hash: [UInt8]) async throws -> ServiceKey? {
        let lookup: PostgresQuery = """
            SELECT id, name, created_at, revoked_at, NULL::timestamptz AS last_used_at FROM service_keys
            WHERE key_hash = \(Data(hash)) AND revoked_at IS NULL
            """
        return try await pool.query(lookup.prepared(as: "service_key_by_hash")).first.map(Self.key)
    }

    /// A use recorded by an instance whose clock or transaction ran behind another's does not move the time
    /// back; a key deleted meanwhile (by hand) is passed over. In the order of the ids, as every instance
    /// records them, so that two recording the same keys at once wait for each other rather than deadlock.
    public func recordUse(of keys: Set<UUID>) async throws {
        _ = try await pool.query(
            """
            INSERT INTO service_key_use (key_id, last_used_at)
            SELECT id, now() FROM service_keys WHERE id = ANY (\(Array(keys))) ORDER BY id
            ON CONFLICT (key_id) DO UPDATE
            SET last_used_at = greatest(service_key_use.last_used_at, excluded.last_used_at)
            """)
    }

    private static let columns: StaticString = """
        id, name, created_at, revoked_at, (SELECT last_used_at FROM service_key_use WHERE key_id = id) AS last_used_at
        """

    private static func key(_ row: PostgresRow) throws -> ServiceKey {
        ServiceKey(
            id: try row.decode("id"), name: try row.decode("name"), createdAt: try row.decode("created_at"),
            revokedAt: try row.decode("revoked_at"), lastUsedAt: try row.decode("last_used_at"))
    }
}
