import Foundation
import Secrets
import Synchronization

/// A backend service's API key, as listed: never the key itself.
public struct ServiceKey: Sendable, Hashable, Codable {
    public let id: UUID
    public let name: String
    public let createdAt: Date
    public let revokedAt: Date?
    /// When it last authenticated a request, to within how often `rbac serve` records it; nil for never.
    public let lastUsedAt: Date?

    public init(id: UUID, name: String, createdAt: Date, revokedAt: Date?, lastUsedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.lastUsedAt = lastUsedAt
    }
}

/// Storage of service keys by their SHA-256.
public protocol ServiceKeyRepository: Sendable {
    func createKey(name: String, keyHash: [UInt8]) async throws -> ServiceKey
    func keys() async throws -> [ServiceKey]
    /// The key, revoked; `revokedNow` is false when it was revoked already (and stays as it was).
    func revokeKey(_ id: UUID) async throws -> (key: ServiceKey, revokedNow: Bool)
    /// The live (not revoked) key with this hash, if any; its `lastUsedAt` need not be read.
    func key(withHash hash: [UInt8]) async throws -> ServiceKey?
    /// Records that `keys` were used now.
    func recordUse(of keys: Set<UUID>) async throws
}

/// Issues, lists, revokes and checks service API keys (`rbk_...`).
public actor ServiceKeyService {
    private let repository: any ServiceKeyRepository
    private let cache: ServiceKeyCache?
    private let isCacheTrusted: @Sendable () -> Bool
    private let metrics: OperationMetrics
    /// The keys that authenticated a request since `recordUses` last recorded them.
    private let unrecorded = Mutex<Set<UUID>>([])

    /// With a `cache`, `authenticate` answers from it while `isCacheTrusted` (its change feed is live).
    public init(
        repository: any ServiceKeyRepository, cache: ServiceKeyCache? = nil,
        isCacheTrusted: @escaping @Sendable () -> Bool = { false }, metrics: OperationMetrics = OperationMetrics()
    ) {
        self.repository = repository
        self.cache = cache
        self.isCacheTrusted = isCacheTrusted
        self.metrics = metrics
    }

    /// A new key: the raw key is returned once; only its hash is stored.
    public func create(name: String) async throws -> (ServiceKey, SecretToken) {
        try await metrics.measure("key.create") {
            let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
            guard (1...100).contains(trimmed.storedLength) else {
                throw CollaborationError(
                    .invalidInput, "a key's name must be 1 to 100 characters, not \(trimmed.storedLength)")
            }
            do {
                try refuseControlCharacters(name, "a key's name")
                try refuseBlank(trimmed, "a key's name")
            } catch let invalid as InvalidText {
                throw CollaborationError(invalid)
            }
            let token = SecretToken.generate(.apiKey)
            return (try await repository.createKey(name: trimmed, keyHash: token.hash), token)
        }
    }

    public func keys() async throws -> [ServiceKey] { try await repository.keys() }

    public func revoke(_ id: UUID) async throws -> (key: ServiceKey, revokedNow: Bool) {
        try await repository.revokeKey(id)
    }

    /// The live key a presented secret belongs to, when the cache alone can tell now; nil when it cannot
    /// (nothing cached, the cache not trusted, or a malformed secret), and `authenticate` must be asked.
    public nonisolated func cachedKey(_ presented: String) -> ServiceKey? {
        guard let cache, isCacheTrusted(), let token = SecretToken(parsing: presented, as: .apiKey) else { return nil }
        return used(cache.lookup(token.hash))
    }

    /// The live key a presented secret belongs to; nil for anything malformed, unknown or revoked.
    /// Runs on the caller's executor: every API request authenticates, and must not queue behind others.
    public nonisolated func authenticate(_ presented: String) async throws -> ServiceKey? {
        guard let token = SecretToken(parsing: presented, as: .apiKey) else { return nil }
        guard let cache, isCacheTrusted() else {
            return used(
                try await metrics.measure("key.authenticate") { try await repository.key(withHash: token.hash) })
        }
        if let known = cache.lookup(token.hash) { return used(known) }
        let ticket = cache.ticket()
        let key = try await metrics.measure("key.authenticate") { try await repository.key(withHash: token.hash) }
        if let key { cache.store(key, hash: token.hash, ticket: ticket) }
        return used(key)
    }

    /// Notes `key` (when there is one) as used, for `recordUses`; returns it.
    private nonisolated func used(_ key: ServiceKey?) -> ServiceKey? {
        if let id = key?.id { unrecorded.withLock { _ = $0.insert(id) } }
        return key
    }

    /// Records the keys used since the last call as used now (`ServiceKey.lastUsedAt`): `rbac serve` calls it
    /// every --sweep-interval and as it stops. Those it could not record are recorded at the next call.
    public nonisolated func recordUses() async throws {
        let ids = unrecorded.withLock { unrecorded in
            defer { unrecorded = [] }
            return unrecorded
        }
        guard !ids.isEmpty else { return }
        do { try await repository.recordUse(of: ids) } catch {
            unrecorded.withLock { $0.formUnion(ids) }
            throw error
        }
    }
}

/// Live service keys by hash, kept while a change feed vouches for them; any key change
/// (`invalidateAll`) forgets them all, and every lookup in flight.
public final class ServiceKeyCache: Sendable {
    public struct Ticket: Sendable {
        fileprivate let epoch: UInt64
    }

    private struct State {
        var epoch: UInt64 = 0
        var keys: [[UInt8]: ServiceKey] = [:]
        var holds = 0
    }

    private let state = Mutex(State())
    private let capacity: Int

    public init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    func lookup(_ hash: [UInt8]) -> ServiceKey? { state.withLock { $0.holds == 0 ? $0.keys[hash] : nil } }

    /// As `PermissionCache.hold`: lookups find nothing until the matching `release`.
    public func hold() { state.withLock { $0.holds += 1 } }

    public func release() { state.withLock { $0.holds -= 1 } }

    func ticket() -> Ticket { state.withLock { Ticket(epoch: $0.epoch) } }

    func store(_ key: ServiceKey, hash: [UInt8], ticket: Ticket) {
        state.withLock { state in
            guard ticket.epoch == state.epoch, state.keys.count < capacity else { return }
            state.keys[hash] = key
        }
    }

    public func invalidateAll() {
        state.withLock { state in
            state.epoch &+= 1
            state.keys = [:]
        }
    }
}
