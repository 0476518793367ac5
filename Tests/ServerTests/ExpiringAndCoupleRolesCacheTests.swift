import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import TestSupport
import Testing

@testable import Storage

/// Expiring memberships and couples' own roles through the permission cache of two live instances on one
/// database: an expiry takes effect at its instant with no notice, and a change to a couple's role reaches
/// both instances' caches at the next check.
@Suite("Expiry and couples' roles through the cache, live", .timeLimit(.minutes(2)))
struct ExpiringAndCoupleRolesCacheTests {
    static func check(
        _ client: some TestClientProtocol, _ world: CacheTests.World, couple: UUID? = nil, user: UUID,
        _ permission: String, minRevision: Int64? = nil
    ) async throws -> CacheTests.Answer {
        let revision = minRevision.map { #","min_revision":\#($0)"# } ?? ""
        let body = ByteBuffer(
            string:
                #"{"couple_id":"\#(couple ?? world.couple)","user_id":"\#(user)","permission":"\#(permission)"\#(revision)}"#
        )
        return try await client.execute(uri: "/v1/check", method: .post, headers: world.keyHeaders, body: body) {
            #expect($0.status == .ok)
            return try JSONDecoder().decode(CacheTests.Answer.self, from: Data(buffer: $0.body))
        }
    }

    /// Sends `json` to `uri` as the couple's owner; returns the body of a 2xx answer.
    @discardableResult
    static func send(
        _ client: some TestClientProtocol, _ world: CacheTests.World, _ method: HTTPRequest.Method, _ uri: String,
        _ json: String
    ) async throws -> ByteBuffer {
        var headers = world.headers
        headers[.contentType] = "application/json"
        return try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: json)) {
            #expect((200..<300).contains($0.status.code), "\(String(buffer: $0.body))")
            return $0.body
        }
    }

    /// What `instance`'s cache holds for the pair. Its change feed holds the cache while it reads the socket
    /// (heartbeats included), and a lookup then finds nothing: a set that is there is found in a few tries.
    static func cached(_ instance: CacheTests.Instance, couple: UUID, user: UUID) async throws -> PermissionSet? {
        for _ in 0..<200 {
            if let set = instance.cache.lookup(couple: couple, user: user) { return set }
            try await Task.sleep(for: .milliseconds(1))
        }
        return nil
    }

    /// Two live instances on one database, each with its own pool, cache and change feed, and a client of each.
    static func withTwoInstances(
        _ configuration: PostgresConfiguration,
        _ body:
            @Sendable (
                _ first: CacheTests.Instance, _ second: CacheTests.Instance, _ writer: any TestClientProtocol,
                _ reader: any TestClientProtocol
            ) async throws -> Void
    ) async throws {
        let first = CacheTests.Instance(configuration)
        let second = CacheTests.Instance(configuration)
        try await first.waitUntilListening()
        try await second.waitUntilListening()
        try await first.app().test(.live) { writer in
            try await second.app().test(.live) { reader in try await body(first, second, writer, reader) }
        }
        await first.stop()
        await second.stop()
    }

    @Test("an expiring membership is answered from both caches until its instant, and from it on refused, unannounced")
    func expiry() async throws {
        try await CacheTests.withMigratedDatabase { configuration, world in
            try await Self.withTwoInstances(configuration) { first, second, writer, reader in
                // Whole seconds: the instant read back is the one written. The checks before the expiry must
                // be done before it: on a machine too busy for that, the round is made again, further ahead.
                var round: (expiresAt: Date, revision: Int64, answers: [Bool], cached: [Date?])?
                for margin in [4.0, 12.0, 30.0] {
                    let text = ISO8601DateFormatter().string(from: Date().addingTimeInterval(margin))
                    let expiresAt = try #require(instant(parsing: text))
                    let written = try JSONDecoder().decode(
                        CacheTests.Written.self,
                        from: Data(
                            buffer: try await Self.send(
                                writer, world, .post, "/v1/couples/\(world.couple)/members",
                                #"{"user_id":"\#(world.planner)","role":"planner","expires_at":"\#(text)"}"#)))
                    var answers: [Bool] = []
                    for client in [writer, reader] as [any TestClientProtocol] {
                        answers.append(
                            try await Self.check(
                                client, world, user: world.planner, "budget.edit", minRevision: written.revision
                            ).allowed)
                        answers.append(
                            try await Self.check(client, world, user: world.planner, "budget.edit").allowed)
                    }
                    var cached: [Date?] = []
                    for instance in [first, second] {
                        cached.append(
                            try await Self.cached(instance, couple: world.couple, user: world.planner)?.expiresAt)
                    }
                    if Date() < expiresAt {
                        round = (expiresAt, written.revision, answers, cached)
                        break
                    }
                }
                let (expiresAt, revision, answers, cached) = try #require(round, "no round finished in time")
                #expect(answers == [true, true, true, true], "before the expiry, both instances say yes")
                #expect(
                    cached == [expiresAt, expiresAt],
                    "each instance cached the set with the instant it stops holding")

                // The clock passes the instant; nothing is written, nothing is announced.
                while Date() < expiresAt { try await Task.sleep(for: .milliseconds(20)) }
                for client in [writer, reader] as [any TestClientProtocol] {
                    let after = try await Self.check(client, world, user: world.planner, "budget.edit")
                    #expect(after.allowed == false, "from the instant of expiry, the membership grants nothing")
                    #expect(after.revision == revision, "with no change to the couple")
                }
            }
        }
    }

    @Test("a change to a couple's role reaches both caches at the next check; other couples' sets stay")
    func coupleRoleChange() async throws {
        try await CacheTests.withMigratedDatabase { configuration, world in
            let setup = PostgresConnectionPool(configuration: configuration, maxConnections: 1)
            let other = try await PostgresCollaborationRepository(pool: setup).createCouple(
                name: "Other", owner: world.owner, as: .operator(label: "tests")
            ).id
            await setup.close()
            try await Self.withTwoInstances(configuration) { first, second, writer, reader in
                let roles = "/v1/couples/\(world.couple)/roles"
                try await Self.send(
                    writer, world, .post, roles,
                    #"{"name":"mom","description":"Sees the guests","permissions":["guests.view"]}"#)
                try await Self.send(
                    writer, world, .post, "/v1/couples/\(world.couple)/members",
                    #"{"user_id":"\#(world.planner)","role":"mom"}"#)
                // A check made while the notices of the writes above sit unread on the reader's socket is read
                // from the database and cached by no one: check again until the set is cached, so that what
                // follows shows it stays.
                var otherCached = false
                for _ in 0..<50 where !otherCached {
                    #expect(
                        try await Self.check(reader, world, couple: other, user: world.owner, "budget.edit").allowed)
                    otherCached = try await Self.cached(second, couple: other, user: world.owner) != nil
                }
                try #require(otherCached, "the other couple's set was cached")
                for client in [writer, reader] as [any TestClientProtocol] {
                    #expect(try await Self.check(client, world, user: world.planner, "guests.view").allowed)
                    #expect(
                        try await Self.check(client, world, user: world.planner, "budget.edit").allowed == false)
                }
                #expect(try await Self.cached(second, couple: world.couple, user: world.planner)?.role == "mom")

                try await Self.send(writer, world, .patch, "\(roles)/mom", #"{"permissions":["budget.view"]}"#)
                #expect(
                    try await Self.check(writer, world, user: world.planner, "guests.view").allowed == false,
                    "the instance that made the change sees it at its very next check")
                #expect(
                    try await eventually(within: .seconds(1)) {
                        try await !Self.check(reader, world, user: world.planner, "guests.view").allowed
                    }, "the other instance heard of it within a second")
                #expect(try await Self.check(reader, world, user: world.planner, "budget.view").allowed)
                #expect(
                    try await Self.cached(second, couple: other, user: world.owner) != nil,
                    "the other couple's cached set stayed")
            }
        }
    }
}
