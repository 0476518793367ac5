import Foundation
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
}

/// Keys whose reads return a moment after the repository answered, as a database's answer travels back: a
/// revocation can commit in between.
private struct AnswersLate: ServiceKeyRepository {
    let stored: InMemoryServiceKeyRepository

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
}
