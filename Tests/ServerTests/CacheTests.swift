import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import InMemoryRepositories
import Logging
import Postgres
import Prometheus
import Secrets
import Synchronization
import TestSupport
import Testing

@testable import Server
@testable import Storage

/// The permission cache over real HTTP and PostgreSQL: two service instances (each with its own pool, cache and
/// change feed) on one database.
@Suite("Permission cache, live, on PostgreSQL", .timeLimit(.minutes(2)))
struct CacheTests {
    /// One `rbac serve`, as Serve.swift assembles it, without the process around it.
    struct Instance {
        let pool: PostgresConnectionPool
        let feed: ChangeFeed
        let cache: PermissionCache
        let dependencies: ServerDependencies
        let listener: Task<Void, Never>

        /// `beforeApplying` is called on the feed's thread before each change notice is applied. The feed sends
        /// heartbeats as `rbac serve`'s does, at a quarter of `maxStaleness`. By default the bound is a minute, so
        /// that tests counting cached answers see neither a busy test host turn the cache off nor a heartbeat
        /// on the socket: the first is sent 15 s after the feed listens.
        init(
            _ configuration: PostgresConfiguration, maxStaleness: Duration? = nil,
            beforeApplying: @escaping @Sendable (String) -> Void = { _ in }
        ) {
            pool = PostgresConnectionPool(configuration: configuration, maxConnections: 4)
            cache = PermissionCache()
            let keys = ServiceKeyCache()
            let feed = ChangeFeed(
                configuration: configuration, permissions: cache, keys: keys,
                maxStaleness: maxStaleness ?? .seconds(60), heartbeatInterval: (maxStaleness ?? .seconds(60)) / 4,
                beforeApplying: beforeApplying)
            self.feed = feed
            let repository = PostgresCollaborationRepository(pool: pool, invalidating: cache)
            let registry = PrometheusCollectorRegistry()
            dependencies = ServerDependencies(
                repository: repository,
                keys: ServiceKeyService(
                    repository: PostgresServiceKeyRepository(pool: pool), cache: keys, isCacheTrusted: feed.isTrusted),
                tokens: TokenVerifier(secret: .hmac(secret: Array(LiveTests.secret.utf8))),
                publicBaseURL: URL(string: "https://rbac.test")!,
                checker: PermissionChecker(
                    repository: repository, cache: cache, isCacheTrusted: feed.isTrusted,
                    metrics: ServerDependencies.operationMetrics(registry)),
                budgets: PostgresBudgetRepository(pool: pool), metrics: registry, isReady: { true })
            listener = Task { await feed.run() }
        }

        /// Waits (up to 10 s) until the change feed listens.
        func waitUntilListening() async throws {
            let listening = try await eventually(within: .seconds(10), every: .milliseconds(5)) { feed.isTrusted() }
            guard listening else { throw TestSetupError("the change feed never listened") }
        }

        func stop() async {
            listener.cancel()
            await listener.value
            await pool.close()
        }

        /// As `rbac serve` runs it: checks with a cached key are answered before the router (CheckFastPath).
        func app() -> some ApplicationProtocol {
            buildApplication(dependencies, host: "127.0.0.1", port: 0, logger: Logger(label: "cache-test"))
        }
    }

    /// A couple with an owner and a planner, and a service key.
    struct World {
        let couple: UUID
        let owner: UUID
        let planner: UUID
        let key: String

        init(_ pool: PostgresConnectionPool) async throws {
            let repository = PostgresCollaborationRepository(pool: pool)
            let admin = Actor.operator(label: "tests")
            owner = try await repository.addUser(email: EmailAddress(rawValue: "olivia@example.com")!, displayName: nil)
                .id
            planner = try await repository.addUser(email: EmailAddress(rawValue: "pia@example.com")!, displayName: nil)
                .id
            couple = try await repository.createCouple(name: "Cache", owner: owner, as: admin).id
            _ = try await repository.grant(
                couple: couple, user: planner, role: RoleName(rawValue: "planner")!, as: admin)
            key = try await ServiceKeyService(repository: PostgresServiceKeyRepository(pool: pool)).create(
                name: "cache"
            ).1.rawValue
        }

        /// The service key alone, as the checks take it.
        var keyHeaders: HTTPFields { [.authorization: "Bearer \(key)"] }
        /// The service key acting for the owner, as the writes take it.
        var headers: HTTPFields { [.authorization: "Bearer \(key)", .actingUser: owner.uuidString] }

        func check(minRevision: Int64? = nil) -> ByteBuffer {
            let revision = minRevision.map { #","min_revision":\#($0)"# } ?? ""
            return ByteBuffer(
                string:
                    #"{"couple_id":"\#(couple)","user_id":"\#(planner)","permission":"budget.edit"\#(revision)}"#)
        }
    }

    struct Written: Decodable {
        let revision: Int64
    }

    struct Answer: Decodable {
        let allowed: Bool
        let revision: Int64?
    }

    static func answer(_ client: some TestClientProtocol, _ world: World, minRevision: Int64? = nil) async throws
        -> Answer
    {
        try await client.execute(
            uri: "/v1/check", method: .post, headers: world.keyHeaders, body: world.check(minRevision: minRevision)
        ) { response in
            #expect(response.status == .ok)
            return try JSONDecoder().decode(Answer.self, from: Data(buffer: response.body))
        }
    }

    /// Removes the planner through `client`'s instance; returns the revision the write reported.
    static func removePlanner(_ client: some TestClientProtocol, _ world: World) async throws -> Int64 {
        try await client.execute(
            uri: "/v1/couples/\(world.couple)/members/\(world.planner)", method: .delete, headers: world.headers
        ) { response in
            #expect(response.status == .ok)
            return try JSONDecoder().decode(Written.self, from: Data(buffer: response.body)).revision
        }
    }

    static func withMigratedDatabase(_ body: (PostgresConfiguration, World) async throws -> Void) async throws {
        try await TestDatabase.withFresh(from: .migrated) { configuration in
            let pool = PostgresConnectionPool(configuration: configuration, maxConnections: 2)
            let world = try await World(pool)
            await pool.close()
            try await body(configuration, world)
        }
    }

    @Test("a revoke through an instance is seen by its very next check, with the cache warm")
    func sameInstance() async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let instance = Instance(configuration)
            try await instance.waitUntilListening()
            try await instance.app().test(.live) { client in
                // The first check goes through the router (its key is not cached yet); the others do not.
                var answers: [(fields: HTTPFields, body: String)] = []
                for _ in 0..<3 {
                    try await client.execute(
                        uri: "/v1/check", method: .post, headers: world.keyHeaders, body: world.check()
                    ) { response in
                        #expect(response.status == .ok)
                        var fields = response.headers
                        fields[.date] = nil
                        answers.append((fields, String(buffer: response.body)))
                    }
                }
                #expect(answers.allSatisfy { $0 == answers[0] }, "a cold check and warm ones are answered alike")
                #expect(answers[0].body.hasPrefix(#"{"allowed":true"#))
                #expect(instance.cache.count == 1, "the answers came from a warm cache")
                _ = try await Self.removePlanner(client, world)
                #expect(try await Self.answer(client, world).allowed == false)
                try await client.execute(uri: "/metrics", method: .get) { response in
                    let samples = try Self.parsePrometheus(String(buffer: response.body))
                    let checks = #"rbac_operations_total{operation="permission.check",outcome="#
                    #expect(samples[checks + #""cached"}"#] == 2, "the second and third check")
                    #expect(samples[checks + #""database"}"#] == 2, "the first, and the one after the revoke")
                    let timed = #"rbac_operation_duration_seconds_count{operation="permission.check",outcome="#
                    #expect(samples[timed + #""database"}"#] == 2)
                    #expect(samples[timed + #""cached"}"#] == nil, "counted, never timed: no empty histogram")
                    let routed = #"http_requests_total{method="POST",route="/v1/check",status="200"}"#
                    #expect(samples[routed] == 4, "every check, wherever it was answered")
                }
            }
            await instance.stop()
        }
    }

    @Test("a batch of checks the cache cannot answer is read in a few statements, and answered in order")
    func batchFromDatabase() async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let instance = Instance(configuration)
            try await instance.waitUntilListening()
            let outsider = UUID()
            let asked = (0..<100).map { index in
                [
                    (world.owner, "couple.delete"), (world.planner, "budget.edit"), (world.planner, "couple.delete"),
                    (outsider, "budget.view"),
                ][index % 4]
            }
            // The cache is cold: every check goes to the database.
            let checks = asked.map { user, permission in
                #"{"couple_id":"\#(world.couple)","user_id":"\#(user)","permission":"\#(permission)"}"#
            }
            let body = ByteBuffer(string: #"{"checks":[\#(checks.joined(separator: ","))]}"#)
            struct Results: Decodable { let results: [Answer] }
            try await instance.app().test(.live) { client in
                let before = instance.pool.statementsSent
                let results = try await client.execute(
                    uri: "/v1/check/batch", method: .post, headers: world.keyHeaders, body: body
                ) { response in
                    #expect(response.status == .ok)
                    return try JSONDecoder().decode(Results.self, from: Data(buffer: response.body)).results
                }
                let statements = instance.pool.statementsSent - before
                #expect(results.map(\.allowed) == (0..<100).map { [true, true, false, false][$0 % 4] })
                #expect(statements <= 20, "\(statements) statements for 100 checks")
            }
            await instance.stop()
        }
    }

    @Test("a revoke through one instance: the other sees it at once with min_revision, and within a second anyway")
    func twoInstances() async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let first = Instance(configuration)
            let second = Instance(configuration)
            try await first.waitUntilListening()
            try await second.waitUntilListening()
            try await first.app().test(.live) { writer in
                try await second.app().test(.live) { reader in
                    #expect(try await Self.answer(reader, world).allowed)
                    #expect(second.cache.count == 1)
                    let revision = try await Self.removePlanner(writer, world)

                    let fresh = try await Self.answer(reader, world, minRevision: revision)
                    #expect(fresh.allowed == false, "min_revision is answered no staler than the write")
                    #expect(fresh.revision == revision)

                    #expect(
                        try await eventually(within: .seconds(1)) { try await !Self.answer(reader, world).allowed },
                        "the notification reached the other instance within a second")
                }
            }
            await first.stop()
            await second.stop()
        }
    }

    @Test("a change to what one role grants drops that role's cached sets only, and no couple's revision moves")
    func roleChangeKeepsOtherRoles() async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let instance = Instance(configuration)
            try await instance.waitUntilListening()
            let owner = ByteBuffer(
                string: #"{"couple_id":"\#(world.couple)","user_id":"\#(world.owner)","permission":"budget.edit"}"#)
            try await instance.app().test(.live) { client in
                let before = try await Self.answer(client, world)
                #expect(before.allowed)
                try await client.execute(uri: "/v1/check", method: .post, headers: world.keyHeaders, body: owner) {
                    #expect(String(buffer: $0.body).hasPrefix(#"{"allowed":true"#))
                }
                #expect(instance.cache.count == 2)

                let admin = try await PostgresConnection.connect(configuration)
                try await admin.execute(
                    "DELETE FROM role_permissions WHERE role = 'planner' AND permission = 'budget.edit'")
                await admin.close()
                var after = before
                let denied = try await eventually(within: .seconds(1)) {
                    after = try await Self.answer(client, world)
                    return !after.allowed
                }
                #expect(denied, "the planner's cached set went with the notice")
                #expect(after.revision == before.revision, "the couple's revision counts its memberships only")
                #expect(
                    instance.cache.lookup(couple: world.couple, user: world.owner)?.permissions.contains(
                        Permission(rawValue: "budget.edit")!) == true, "the owner's set stayed in the cache")
            }
            await instance.stop()
        }
    }

    @Test("a permission the policy adds is refused as unknown until the feed tells the instance, then answered")
    func policyAddsPermission() async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let instance = Instance(configuration)
            try await instance.waitUntilListening()
            let approve = ByteBuffer(
                string: #"{"couple_id":"\#(world.couple)","user_id":"\#(world.planner)","permission":"budget.approve"}"#
            )
            try await instance.app().test(.live) { client in
                func status() async throws -> HTTPResponse.Status {
                    try await client.execute(uri: "/v1/check", method: .post, headers: world.keyHeaders, body: approve)
                    {
                        $0.status
                    }
                }
                let before = try await status()
                #expect(before == .badRequest, "no role grants budget.approve yet")
                #expect(instance.cache.knownPermissions() != nil, "the permissions the roles grant are kept")

                let policy = try AccessPolicy.load(from: repositoryRoot.appendingPathComponent("policies"))
                    .granting("budget.approve", to: "planner", description: "Approve the budget")
                let admin = try await PostgresConnection.connect(configuration)
                try await admin.execute("SELECT apply_policy(\(PostgresJSON(text: policy.policyJSON)))")
                await admin.close()

                _ = try await eventually(within: .seconds(1)) { try await status() != .badRequest }
                try await client.execute(uri: "/v1/check", method: .post, headers: world.keyHeaders, body: approve) {
                    #expect($0.status == .ok, "the policy's notice reached the instance within a second")
                    #expect(String(buffer: $0.body).hasPrefix(#"{"allowed":true"#))
                }
            }
            await instance.stop()
        }
    }

    @Test("with its notification connection killed, an instance never answers from its stale cache", arguments: 0..<5)
    func feedKilled(round: Int) async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let instance = Instance(configuration)
            try await instance.waitUntilListening()
            let admin = try await PostgresConnection.connect(configuration)
            try await instance.app().test(.live) { client in
                #expect(try await Self.answer(client, world).allowed)
                #expect(instance.cache.count == 1)
                // Waits until the listener's backend is gone, so its goodbye is on the socket.
                let killed = try await admin.query(
                    """
                    SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) AS killed FROM pg_stat_activity
                    WHERE application_name = 'rbac-change-feed' AND datname = current_database()
                    """)
                #expect(try killed[0].decode("killed", as: Int64.self) == 1)
                // A change this instance neither made nor can hear of.
                try await admin.execute(
                    "DELETE FROM memberships WHERE couple_id = \(world.couple) AND user_id = \(world.planner)")
                #expect(try await Self.answer(client, world).allowed == false, "no stale allow after the feed died")

                try await instance.waitUntilListening()
                #expect(try await Self.answer(client, world).allowed == false)
            }
            await admin.close()
            await instance.stop()
        }
    }

    @Test(
        "a notice read from the socket keeps every answer from the cache until it is applied, however late",
        arguments: 0..<5)
    func delayedApplication(round: Int) async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let gate = ThreadGate()
            // A bound this long leaves the hold alone to keep stale answers out, and spaces heartbeats (a quarter
            // of it) so far apart that none lands on the socket while the notice is held.
            let instance = Instance(configuration, maxStaleness: .seconds(60)) { payload in
                if payload.hasPrefix("couple ") { gate.pass() }
            }
            try await instance.waitUntilListening()
            let admin = try await PostgresConnection.connect(configuration)
            try await instance.app().test(.live) { client in
                #expect(try await Self.answer(client, world).allowed)
                #expect(try await Self.answer(client, world).allowed)
                #expect(instance.cache.count == 1, "the cache is warm")
                try await admin.execute(
                    "DELETE FROM memberships WHERE couple_id = \(world.couple) AND user_id = \(world.planner)")
                try await gate.waitUntilEntered()
                // The notice has left the socket, and is not applied yet.
                #expect(instance.feed.isTrusted(), "nothing unread on the socket, and caught up")
                let cached = instance.dependencies.checker.cachedCheck(
                    couple: world.couple, user: world.planner, permission: Permission(rawValue: "budget.edit")!)
                #expect(cached == nil, "no answer from the cache while a notice waits")
                #expect(try await Self.answer(client, world).allowed == false)
                gate.open()
                #expect(try await Self.answer(client, world).allowed == false)
            }
            gate.open()
            await admin.close()
            await instance.stop()
        }
    }

    @Test("a feed that stops hearing the database stops vouching for the cache within its staleness bound")
    func stalenessBound() async throws {
        try await Self.withMigratedDatabase { configuration, world in
            let bound = Duration.milliseconds(200)
            let instance = Instance(configuration, maxStaleness: bound)
            try await instance.waitUntilListening()
            let admin = try await PostgresConnection.connect(configuration)
            let listener = try await admin.query(
                """
                SELECT pid FROM pg_stat_activity
                WHERE application_name = 'rbac-change-feed' AND datname = current_database()
                """)
            #expect(listener.count == 1)
            let pid = try listener[0].decode("pid", as: Int32.self)
            try await instance.app().test(.live) { client in
                // Warm: on a loaded machine a heartbeat can come back later than this tight bound, and a check
                // asked meanwhile goes to the database and caches nothing; ask until one is cached.
                _ = try await eventually(within: .seconds(10)) {
                    let allowed = try await Self.answer(client, world).allowed
                    #expect(allowed)
                    return instance.cache.count > 0
                }
                #expect(instance.cache.count == 1, "the cache is warm")
                // The listening server process stops: it delivers nothing, neither the change nor a heartbeat,
                // and the feed's connection stays open.
                #expect(kill(pid, SIGSTOP) == 0, "\(String(cString: strerror(errno)))")
                defer { kill(pid, SIGCONT) }
                try await admin.execute(
                    "DELETE FROM memberships WHERE couple_id = \(world.couple) AND user_id = \(world.planner)")
                let committed = ContinuousClock.now
                var lateAllows: [Duration] = []
                let denied = try await eventually(within: .seconds(10), every: .zero) {
                    let asked = ContinuousClock.now
                    let allowed = try await Self.answer(client, world).allowed
                    if allowed && asked - committed > bound { lateAllows.append(asked - committed) }
                    return !allowed
                }
                #expect(denied, "the checks went to the database")
                #expect(lateAllows.isEmpty, "allowed \(lateAllows) after the commit")
                #expect(!instance.feed.isTrusted())
                kill(pid, SIGCONT)
                try await instance.waitUntilListening()
                #expect(try await Self.answer(client, world).allowed == false)
            }
            await admin.close()
            await instance.stop()
        }
    }

    /// Blocks the thread that passes it, until opened; the test waits for a thread to be held.
    final class ThreadGate: Sendable {
        private let entered = Atomic<Bool>(false)
        private let opened = DispatchSemaphore(value: 0)
        private let isOpen = Atomic<Bool>(false)

        func pass() {
            guard !isOpen.load(ordering: .acquiring) else { return }
            entered.store(true, ordering: .releasing)
            opened.wait()
            opened.signal()
        }

        func open() {
            guard !isOpen.exchange(true, ordering: .acquiringAndReleasing) else { return }
            opened.signal()
        }

        func waitUntilEntered() async throws {
            let held = try await eventually(within: .seconds(10), every: .milliseconds(1)) {
                entered.load(ordering: .acquiring)
            }
            guard held else { throw TestSetupError("no thread reached the gate") }
        }
    }

    @Test("a feed stopped on purpose does not report itself lost", arguments: 0..<3)
    func feedStopped(round: Int) async throws {
        try await Self.withMigratedDatabase { configuration, _ in
            let feed = ChangeFeed(configuration: configuration, permissions: PermissionCache())
            #expect(!feed.isTrusted(), "not trusted before it listens")
            let states = Mutex<[Bool]>([])
            let listener = Task { await feed.run { listening, _ in states.withLock { $0.append(listening) } } }
            let listened = try await eventually(within: .seconds(10), every: .milliseconds(5)) { feed.isTrusted() }
            #expect(listened)
            listener.cancel()
            await listener.value
            #expect(states.withLock { $0 } == [true], "heard: listening, and nothing after the stop")
            #expect(!feed.isTrusted())
        }
    }

    @Test("a feed that cannot connect reports itself down once, not at every retry")
    func feedDownReportedOnce() async throws {
        let server = try HangUpServer()
        defer { server.stop() }
        let feed = ChangeFeed(
            configuration: PostgresConfiguration(connectionString: "host=127.0.0.1 port=\(server.port) user=nobody"),
            permissions: PermissionCache())
        let states = Mutex<[(listening: Bool, error: String?)]>([])
        let listener = Task {
            await feed.run(firstRetryDelay: .milliseconds(1)) { listening, error in
                states.withLock { $0.append((listening, error.map { "\($0)" })) }
            }
        }
        // Six attempts take well under a second alone; a loaded machine gets longer.
        let retried = try await eventually(within: .seconds(30), every: .milliseconds(5)) { server.attempts >= 6 }
        listener.cancel()
        await listener.value
        #expect(retried, "the feed kept retrying")
        let heard = states.withLock { $0 }
        #expect(heard.count == 1, "\(heard)")
        #expect(heard.first?.listening == false)
        #expect(heard.first?.error?.contains("closed the connection") == true, "\(heard)")
        #expect(!feed.isTrusted())
    }

    /// A TCP server on 127.0.0.1 that hangs up on every connection at once, counting them: a database that is
    /// down in the same way on every attempt.
    final class HangUpServer: Sendable {
        let port: UInt16
        private let socket: Int32
        private let accepted = Count()

        /// Held by the accepting thread, which does not hold the server.
        final class Count: Sendable {
            private let value = Atomic<Int>(0)
            func increment() { value.add(1, ordering: .relaxed) }
            var current: Int { value.load(ordering: .relaxed) }
        }

        var attempts: Int { accepted.current }

        init() throws {
            let (socket, port) = try listeningOnLoopback()
            self.socket = socket
            self.port = port
            let accepted = accepted
            Thread {
                while case let connection = accept(socket, nil, nil), connection >= 0 {
                    accepted.increment()
                    close(connection)
                }
            }.start()
        }

        /// Stops accepting: the accepting thread's `accept` fails once the socket is shut down.
        func stop() {
            shutdown(socket, Int32(SHUT_RDWR))
            close(socket)
        }
    }

    @Test("/metrics is Prometheus text and counts the requests made, by route and status")
    func metrics() async throws {
        let fixture = try await Fixture()
        let registry = PrometheusCollectorRegistry()
        let dependencies = ServerDependencies(
            repository: fixture.repository, keys: fixture.keys, tokens: fixture.tokens,
            publicBaseURL: URL(string: "https://rbac.test")!, budgets: InMemoryBudgetRepository(), metrics: registry,
            isReady: { true })
        let app = Application(router: buildRouter(dependencies))
        try await app.test(.router) { client in
            for _ in 0..<3 { try await client.execute(uri: "/health", method: .get) { #expect($0.status == .ok) } }
            try await client.execute(uri: "/v1/check", method: .post) { #expect($0.status == .unauthorized) }
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
                let samples = try Self.parsePrometheus(String(buffer: response.body))
                #expect(samples[#"http_requests_total{method="GET",route="/health",status="200"}"#] == 3)
                #expect(samples[#"http_requests_total{method="POST",route="/v1/check",status="401"}"#] == 1)
                #expect(
                    samples[#"http_request_duration_seconds_count{method="GET",route="/health",status="200"}"#] == 3)
                #expect(samples[#"rbac_operations_total{operation="key.authenticate",outcome="ok"}"#] == nil)
            }
        }
    }

    /// A sample line whose value is not a number.
    struct NotPrometheus: Error {
        let line: String
    }

    /// The samples of a Prometheus text exposition, by name and labels (labels sorted; a quoted value may hold
    /// braces, as route patterns do); throws on a line that is neither a comment nor a sample.
    static func parsePrometheus(_ text: String) throws -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let match = try #require(
                line.wholeMatch(of: /([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})? (\S+)/),
                "not a sample: \(line)")
            let labels =
                match.2.map { text in
                    let pairs = text.dropFirst().dropLast().split(separator: ",").map(String.init).sorted()
                    return "{" + pairs.joined(separator: ",") + "}"
                } ?? ""
            guard let value = Double(match.3) else { throw NotPrometheus(line: String(line)) }
            samples[String(match.1) + labels] = value
        }
        return samples
    }
}
