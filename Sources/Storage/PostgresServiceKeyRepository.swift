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
                RETURNING id, name, created_at, revoked_at
                """)[0])
    }

    public func keys() async throws -> [ServiceKey] {
        try await pool.query("SELECT id, name, created_at, revoked_at FROM service_keys ORDER BY created_at")
            .map(Self.key)
    }

    public func revokeKey(_ id: UUID) async throws -> (key: ServiceKey, revokedNow: Bool) {
        // A key this statement revokes has its transaction's start instant; one revoked before, an earlier
        // transaction's, which a revocation waiting for it reads once it commits.
        let rows = try await pool.query(
            """
            UPDATE service_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = \(id)
            RETURNING id, name, created_at, revoked_at, revoked_at = now() AS revoked_now
            """)
        guard let row = rows.first else {
            throw CollaborationError(.notFound, "service key \(id.uuidString.lowercased()) not found")
        }
        return (try Self.key(row), try row.decode("revoked_now"))
    }

    public func key(withHash hash: [UInt8]) async throws -> ServiceKey? {
        let lookup: PostgresQuery =
            "SELECT id, name, created_at, revoked_at FROM service_keys WHERE key_hash = \(Data(hash)) AND revoked_at IS NULL"
        return try await pool.query(lookup.prepared(as: "service_key_by_hash")).first.map(Self.key)
    }

    private static func key(_ row: PostgresRow) throws -> ServiceKey {
        ServiceKey(
            id: try row.decode("id"), name: try row.decode("name"), createdAt: try row.decode("created_at"),
            revokedAt: try row.decode("revoked_at"))
    }
}
