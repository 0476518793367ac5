import Collaboration
import Foundation
import Secrets

/// Service keys in memory, for tests.
public actor InMemoryServiceKeyRepository: ServiceKeyRepository {
    private var stored: [(key: ServiceKey, hash: [UInt8])] = []
    private var lastUsed: [UUID: Date] = [:]

    public init() {}

    public func createKey(name: String, keyHash: [UInt8]) -> ServiceKey {
        let key = ServiceKey(id: UUID(), name: name, createdAt: Date(), revokedAt: nil)
        stored.append((key, keyHash))
        return key
    }

    public func keys() -> [ServiceKey] {
        stored.map {
            ServiceKey(
                id: $0.key.id, name: $0.key.name, createdAt: $0.key.createdAt, revokedAt: $0.key.revokedAt,
                lastUsedAt: lastUsed[$0.key.id])
        }
    }

    public func revokeKey(_ id: UUID) throws -> (key: ServiceKey, revokedNow: Bool) {
        guard let index = stored.firstIndex(where: { $0.key.id == id }) else {
            throw CollaborationError(.notFound, "service key \(id.uuidString.lowercased()) not found")
        }
        let old = stored[index].key
        let revoked = ServiceKey(
            id: old.id, name: old.name, createdAt: old.createdAt, revokedAt: old.revokedAt ?? Date())
        stored[index].key = revoked
        return (revoked, old.revokedAt == nil)
    }

    public func key(withHash hash: [UInt8]) -> ServiceKey? {
        stored.first { Digest.constantTimeEquals($0.hash, hash) && $0.key.revokedAt == nil }?.key
    }

    public func recordUse(of keys: Set<UUID>) {
        for id in keys { lastUsed[id] = Date() }
    }
}
