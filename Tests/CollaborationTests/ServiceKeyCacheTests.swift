import Foundation
import InMemoryRepositories
import Secrets
import Synchronization
import TestSupport
import Testing

@testable import Collaboration

@Suite("Service key cache")
struct ServiceKeyCacheTests {
    @Test("keys revoked while others authenticate on every thread: none is accepted once its revocation is heard")
    func revocationsRacingLookups() async throws {
        let revoked = Mutex(Set<UUID>())
        let accepted = Mutex((afterRevocation: 0, fromCache: 0))
        for _ in 0..<50 {
            let repository = AnswersLate(stored: InMemoryServiceKeyRepository())
            let cache = ServiceKeyCache()
            let service = ServiceKeyService(repository: repository, cache: cache, isCacheTrusted: { true })
            var keys: [(ServiceKey, SecretToken)] = []
            for index in 0..<6 { keys.append(try await service.create(name: "service \(index)")) }
            let issued = keys
            _ = try await race(8) { task, go in
                await go()
                for step in 0..<60 {
                    let (key, secret) = issued.randomElement()!
                    if task == 0, step % 20 == 19 {
                        // What the change feed does on a key's notice, once the revocation has committed.
                        _ = try await service.revoke(key.id)
                        cache.invalidateAll()
                        revoked.withLock { _ = $0.insert(key.id) }
                        continue
                    }
                    let heard = revoked.withLock { $0.contains(key.id) }
                    let cached = service.cachedKey(secret.rawValue) != nil
                    let found = try await service.authenticate(secret.rawValue)
                    accepted.withLock {
                        if heard, found != nil { $0.afterRevocation += 1 }
                        if cached { $0.fromCache += 1 }
                    }
                }
            }
        }
        let counts = accepted.withLock { $0 }
        #expect(counts.afterRevocation == 0, "a key was accepted after its revocation was heard: \(counts)")
        #expect(counts.fromCache > 0, "the cache never answered: \(counts)")
    }

    @Test("keys that authenticate, from the cache or the repository, are recorded as used; a failed record is kept")
    func usesRecorded() async throws {
        let outage = Outage()
        let stored = InMemoryServiceKeyRepository()
        let service = ServiceKeyService(
            repository: AnswersLate(stored: stored, beforeRecording: { try await outage.check() }),
            cache: ServiceKeyCache(), isCacheTrusted: { true })
        let (cached, cachedSecret) = try await service.create(name: "cached")
        let (_, lookedUpSecret) = try await service.create(name: "looked up")
        _ = try await service.create(name: "idle")
        func lastUsed() async -> [String: Date] {
            Dictionary(
                uniqueKeysWithValues: await stored.keys().compactMap { key in key.lastUsedAt.map { (key.name, $0) } })
        }
        #expect(try await service.authenticate(cachedSecret.rawValue)?.id == cached.id)
        #expect(service.cachedKey("rbk_" + String(repeating: "A", count: 43)) == nil)
        await #expect(throws: Outage.Down.self) { try await service.recordUses() }
        #expect(await lastUsed().isEmpty)
        await outage.end()
        try await service.recordUses()
        let first = await lastUsed()
        #expect(Array(first.keys) == ["cached"], "the use the failed record left is recorded at the next")
        #expect(service.cachedKey(cachedSecret.rawValue)?.id == cached.id)
        _ = try await service.authenticate(lookedUpSecret.rawValue)
        try await service.recordUses()
        let second = await lastUsed()
        #expect(second.keys.sorted() == ["cached", "looked up"] && second["cached"]! >= first["cached"]!)
        await outage.begin()
        try await service.recordUses()  // nothing used since: the repository is not asked
    }
}

/// A repository that refuses to record uses while it is down.
private actor Outage {
    struct Down: Error {}
    private var down = true

    func check() throws { if down { throw Down() } }
    func begin() { down = true }
    func end() { down = false }
}

/// Keys whose reads return a moment after the repository answered, as a database's answer travels back: a
/// revocation can commit in between. `beforeRecording` runs before a use is recorded, and may fail it.
private struct AnswersLate: ServiceKeyRepository {
    let stored: InMemoryServiceKeyRepository
    var beforeRecording: @Sendable () async throws -> Void = {}

    func createKey(name: String, keyHash: [UInt8]) async throws -> ServiceKey {
        await stored.createKey(name: name, keyHash: keyHash)
    }

    func keys() async throws -> [ServiceKey] { await stored.keys() }

    func revokeKey(_ id: UUID) async throws -> (key: ServiceKey, revokedNow: Bool) { try await stored.revokeKey(id) }

    func key(withHash hash: [UInt8]) async throws -> ServiceKey? {
        let key = await stored.key(withHash: hash)
        await Task.yield()
        return key
    }

    func recordUse(of keys: Set<UUID>) async throws {
        try await beforeRecording()
        await stored.recordUse(of: keys)
    }
}
