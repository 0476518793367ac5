import Collaboration
import Foundation
import Postgres
import Storage
import TestSupport
import Testing

@Suite("Requests kept for their Idempotency-Key")
struct IdempotentRequestsTests {
    /// `body` with a store over a fresh database, and a service key's id there.
    private func withStore(
        keep: Duration = .seconds(3600),
        _ body: (PostgresIdempotentRequests, UUID, PostgresConnectionPool) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let key = try await PostgresServiceKeyRepository(pool: pool).createKey(
                name: "billing", keyHash: [UInt8](repeating: 7, count: 32))
            try await body(PostgresIdempotentRequests(pool: pool, keep: keep), key.id, pool)
        }
    }

    @Test("a key is claimed once: the same request then runs, or is answered as it was; another is refused")
    func lifecycle() async throws {
        try await withStore { store, key, _ in
            func claim(_ fingerprint: [UInt8]? = nil) async throws -> IdempotentRequest {
                try await store.claim("pay-1", by: key, fingerprint: fingerprint)
            }
            let first = try #require(try await claim().claim)
            #expect(try await claim() == .running)
            #expect(try await claim([UInt8](repeating: 2, count: 32)) == .otherRequest)
            try await store.release(first)
            let second = try #require(try await claim().claim, "released, yet not claimed")
            #expect(try await store.renew(second, holdFor: .seconds(60)))
            try await store.record(second, status: 201, body: Array(#"{"id":1}"#.utf8), withheld: false)
            #expect(try await claim() == .answered(status: 201, body: Array(#"{"id":1}"#.utf8), withheld: false))
            #expect(try await !store.renew(second, holdFor: .seconds(60)), "an answered claim is no longer held")
            // Released or recorded, a claim changes nothing more.
            try await store.release(second)
            #expect(try await claim() == .answered(status: 201, body: Array(#"{"id":1}"#.utf8), withheld: false))
        }
    }

    @Test("a hold not renewed lapses: the same request runs again, and the claim it had is no longer its own")
    func lapsedHold() async throws {
        try await withStore { store, key, _ in
            let lapsed = try #require(try await store.claim("k", by: key, holdFor: .zero).claim)
            #expect(try await store.claim("k", by: key, fingerprint: [UInt8](repeating: 3, count: 32)) == .otherRequest)
            let taken = try #require(try await store.claim("k", by: key).claim, "a lapsed hold was not taken over")
            #expect(taken != lapsed)
            #expect(try await !store.renew(lapsed, holdFor: .seconds(60)))
            try await store.record(lapsed, status: 200, body: nil, withheld: false)
            #expect(try await store.claim("k", by: key) == .running, "the lapsed claim's answer was not kept")
        }
    }

    @Test("a request left unconfirmed is neither run again nor answered, even once its hold would have lapsed")
    func leftUnconfirmed() async throws {
        try await withStore { store, key, _ in
            func claim(_ fingerprint: [UInt8]? = nil) async throws -> IdempotentRequest {
                try await store.claim("pay", by: key, fingerprint: fingerprint, holdFor: .zero)
            }
            let first = try #require(try await claim().claim)
            try await store.leaveUnconfirmed(first)
            #expect(try await claim() == .unconfirmed, "the zero hold lapsed, yet the request must not run again")
            #expect(try await claim([UInt8](repeating: 2, count: 32)) == .otherRequest)
            // What the request's own instance may still do changes nothing.
            #expect(try await !store.renew(first, holdFor: .seconds(60)))
            try await store.record(first, status: 201, body: nil, withheld: false)
            try await store.release(first)
            #expect(try await claim() == .unconfirmed)
        }
    }

    @Test("a withheld answer keeps no body; what was kept longer than the store keeps is pruned, and runs again")
    func withheldAndPruned() async throws {
        try await withStore(keep: .zero) { store, key, pool in
            let claim = try #require(try await store.claim("invite", by: key).claim)
            try await store.record(claim, status: 201, body: nil, withheld: true)
            let kept = try await pool.query("SELECT body IS NULL AS empty, withheld FROM idempotent_requests")
            #expect(
                try kept.map { [try $0.decode("empty", as: Bool.self), try $0.decode("withheld", as: Bool.self)] } == [
                    [true, true]
                ])
            #expect(
                try await store.claim("invite", by: key).claim != nil, "a request kept no time at all was answered")
            #expect(try await store.prune() == 1)
            #expect(try await pool.query("SELECT 1 FROM idempotent_requests").isEmpty)
        }
    }

    @Test("deleting a couple deletes the answers kept that hold what it was; one recorded after is not kept")
    func deletedWithTheCouple() async throws {
        try await withStore { store, key, pool in
            let owner = try await pool.newUser()
            let (couple, other) = (
                try await pool.newCouple(members: [(owner, "owner")]),
                try await pool.newCouple(members: [(owner, "owner")])
            )
            func claim(_ idempotencyKey: String, under couple: UUID?) async throws -> UUID {
                try #require(try await store.claim(idempotencyKey, by: key, couple: couple).claim)
            }
            let body = Array(#"{"id":"\#(UUID())","name":"Flowers"}"#.utf8)
            try await store.record(try await claim("item", under: couple), status: 201, body: body, withheld: false)
            try await store.record(try await claim("removed", under: couple), status: 204, body: nil, withheld: false)
            try await store.record(
                try await claim("created", under: nil), status: 201,
                body: Array(#"{"id":"\#(couple.uuidString.lowercased())"}"#.utf8), withheld: false)
            try await store.record(try await claim("elsewhere", under: other), status: 201, body: body, withheld: false)
            let late = try await claim("late", under: couple)
            try await PostgresCollaborationRepository(pool: pool).deleteCouple(couple, as: .user(owner))
            try await store.record(late, status: 201, body: body, withheld: false)
            let kept = try await pool.query("SELECT idempotency_key FROM idempotent_requests ORDER BY 1")
            #expect(try kept.map { try $0.decode("idempotency_key", as: String.self) } == ["elsewhere", "removed"])
        }
    }
}

extension PostgresIdempotentRequests {
    /// A claim of `idempotencyKey` by service key `key`, of one fingerprint and no couple unless told.
    fileprivate func claim(
        _ idempotencyKey: String, by key: UUID, fingerprint: [UInt8]? = nil, couple: UUID? = nil,
        holdFor: Duration = .seconds(60)
    ) async throws -> IdempotentRequest {
        try await claim(
            key: key, idempotencyKey: idempotencyKey, fingerprint: fingerprint ?? [UInt8](repeating: 1, count: 32),
            couple: couple, holdFor: holdFor)
    }
}

extension IdempotentRequest {
    /// The claim, when this is one.
    var claim: UUID? {
        guard case .claimed(let claim) = self else { return nil }
        return claim
    }
}
