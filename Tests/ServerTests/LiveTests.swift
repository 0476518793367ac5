import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import InMemoryRepositories
import Postgres
import Secrets
import Storage
import TestSupport
import Testing

@testable import Server

/// The service over real HTTP and a real database.
@Suite("HTTP service, live, on PostgreSQL", .timeLimit(.minutes(2)))
struct LiveTests {
    static let secret = "live-secret-0123456789abcdef0123456789"

    /// Every dependency on `pool`: collaboration, keys and budget.
    static func dependencies(_ pool: PostgresConnectionPool) -> ServerDependencies {
        ServerDependencies(
            repository: PostgresCollaborationRepository(pool: pool),
            keys: ServiceKeyService(repository: PostgresServiceKeyRepository(pool: pool)),
            tokens: TokenVerifier(secret: .hmac(secret: Array(secret.utf8))),
            publicBaseURL: URL(string: "https://rbac.test")!,
            budgets: PostgresBudgetRepository(pool: pool), isReady: { (try? await pool.query("SELECT 1")) != nil })
    }

    /// A new service key on `pool`, to send as `Authorization: Bearer`.
    static func serviceKey(_ pool: PostgresConnectionPool) async throws -> SecretToken {
        try await ServiceKeyService(repository: PostgresServiceKeyRepository(pool: pool)).create(name: "live").1
    }

    /// A migrated database with one couple and its owner, the service on it, and the headers of a service key
    /// acting for the owner.
    struct OwnedCouple {
        let pool: PostgresConnectionPool
        let repository: PostgresCollaborationRepository
        let couple: UUID
        let owner: UUID
        let headers: HTTPFields

        func app() -> some ApplicationProtocol {
            Application(
                router: buildRouter(LiveTests.dependencies(pool)),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        }
    }

    static func withOwnedCouple(_ body: (OwnedCouple) async throws -> Void) async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let owner = try await repository.addUser(
                email: EmailAddress(rawValue: "olivia@example.com")!, displayName: nil)
            let couple = try await repository.createCouple(name: "Ours", owner: owner.id, as: .operator(label: "tests"))
            let key = try await serviceKey(pool)
            try await body(
                OwnedCouple(
                    pool: pool, repository: repository, couple: couple.id, owner: owner.id,
                    headers: [.authorization: "Bearer \(key.rawValue)", .init("X-Acting-User")!: owner.id.uuidString]))
        }
    }

    @Test("invite, open the page, accept with a JWT, and the check answers true")
    func invitationFlow() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let admin = Actor.operator(label: "tests")
            let owner = try await repository.addUser(
                email: EmailAddress(rawValue: "olivia@example.com")!, displayName: "Olivia")
            let invitee = try await repository.addUser(
                email: EmailAddress(rawValue: "paul@example.com")!, displayName: nil)
            let couple = try await repository.createCouple(name: "Olivia & Paul", owner: owner.id, as: admin)
            let issued = try await CollaborationInvitationService(
                repository: repository, baseURL: URL(string: "https://rbac.test")!
            )
            .invite(to: couple.id, role: RoleName(rawValue: "planner")!, as: .user(owner.id))
            let key = try await Self.serviceKey(pool)
            let jwt = DevelopmentTokens.sign(
                [
                    "sub": invitee.id.uuidString.lowercased(), "email": invitee.email,
                    "exp": Date().timeIntervalSince1970 + 600,
                ], secret: Self.secret)
            let check = ByteBuffer(
                string: #"{"couple_id":"\#(couple.id)","user_id":"\#(invitee.id)","permission":"budget.edit"}"#)
            let app = Application(
                router: buildRouter(Self.dependencies(pool)),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            try await app.test(.live) { client in
                try await client.execute(
                    uri: "/v1/check", method: .post, headers: [.authorization: "Bearer \(key.rawValue)"], body: check
                ) {
                    #expect(String(buffer: $0.body) == #"{"allowed":false,"revision":1}"#)
                }
                for _ in 0..<2 {
                    try await client.execute(uri: "/invitations/\(issued.token.rawValue)", method: .get) { response in
                        #expect(response.status == .ok)
                        #expect(String(buffer: response.body).contains(">planner<"))
                    }
                }
                try await client.execute(
                    uri: "/invitations/\(issued.token.rawValue)/accept", method: .post,
                    headers: [.authorization: "Bearer \(jwt)", .accept: "application/json"]
                ) { #expect($0.status == .ok) }
                try await client.execute(
                    uri: "/v1/check", method: .post, headers: [.authorization: "Bearer \(key.rawValue)"], body: check
                ) {
                    #expect(String(buffer: $0.body) == #"{"allowed":true,"revision":2}"#)
                }
                try await client.execute(
                    uri: "/invitations/\(issued.token.rawValue)/accept", method: .post,
                    headers: [.authorization: "Bearer \(jwt)", .accept: "application/json"]
                ) { #expect($0.status == .notFound) }
                try await client.execute(uri: "/ready", method: .get) { #expect($0.status == .ok) }
            }
        }
    }

    @Test("with the database stopped, checks answer 503 with Retry-After (never allowed), and recover after")
    func databaseDown() async throws {
        // A cluster of this test's own, so stopping it disturbs no other test.
        try await DisposableCluster.with { cluster in
            let pool = PostgresConnectionPool(
                configuration: PostgresConfiguration(connectionString: cluster.url, connectTimeout: 2),
                maxConnections: 4, acquireTimeout: .seconds(2))
            try await DatabaseTemplate.migrate(pool, distribute: false)
            let repository = PostgresCollaborationRepository(pool: pool)
            let owner = try await repository.addUser(
                email: EmailAddress(rawValue: "olivia@example.com")!, displayName: nil)
            let couple = try await repository.createCouple(name: "Down", owner: owner.id, as: .operator(label: "tests"))
            let issued = try await CollaborationInvitationService(
                repository: repository, baseURL: URL(string: "https://rbac.test")!
            )
            .invite(to: couple.id, role: RoleName(rawValue: "planner")!, as: .user(owner.id))
            let key = try await Self.serviceKey(pool)
            let headers: HTTPFields = [.authorization: "Bearer \(key.rawValue)"]
            let check = ByteBuffer(
                string: #"{"couple_id":"\#(couple.id)","user_id":"\#(owner.id)","permission":"budget.edit"}"#)
            let app = Application(
                router: buildRouter(Self.dependencies(pool)),
                configuration: .init(address: .hostname("127.0.0.1", port: 0))
            )
            try await app.test(.live) { client in
                try await client.execute(uri: "/v1/check", method: .post, headers: headers, body: check) {
                    #expect(String(buffer: $0.body) == #"{"allowed":true,"revision":1}"#)
                }
                try await cluster.stop()
                try await client.execute(uri: "/v1/check", method: .post, headers: headers, body: check) { response in
                    #expect(response.status == .serviceUnavailable)
                    #expect(response.headers[.retryAfter] == "1")
                    #expect(!String(buffer: response.body).contains("allowed"))
                }
                // To anyone with a link: not libpq's words, which name the server's socket or host, port and login;
                // and to a browser, a page.
                let invitation = "/invitations/\(issued.token.rawValue)"
                try await client.execute(uri: "/v1\(invitation)", method: .get) { response in
                    #expect(response.status == .serviceUnavailable)
                    #expect(
                        String(buffer: response.body)
                            == #"{"error":{"code":"unavailable","message":"cannot reach the database"}}"#)
                }
                let jwt = DevelopmentTokens.sign(
                    ["sub": "nina", "email": "nina@example.com", "exp": Date().timeIntervalSince1970 + 600],
                    secret: Self.secret)
                for (path, method, headers, words) in [
                    (invitation, HTTPRequest.Method.get, HTTPFields(), "cannot be shown right now"),
                    ("\(invitation)/accept", .post, [.authorization: "Bearer \(jwt)"], "Could not accept"),
                ] {
                    try await client.execute(uri: path, method: method, headers: headers) { response in
                        let page = String(buffer: response.body)
                        #expect(response.status == .serviceUnavailable, "\(path)")
                        #expect(response.headers[.contentType] == "text/html; charset=utf-8", "\(path)")
                        #expect(response.headers[.retryAfter] == "1", "\(path)")
                        #expect(page.contains(words) && page.contains("cannot reach the database"), "\(page)")
                        #expect(!page.contains("socket") && !page.contains("connection to server"), "\(page)")
                    }
                }
                try await client.execute(uri: "/ready", method: .get) {
                    #expect($0.status == .serviceUnavailable)
                    #expect($0.headers[.retryAfter] == "1")
                }
                try await client.execute(uri: "/health", method: .get) { #expect($0.status == .ok) }
                try await cluster.start()
                try await client.execute(uri: "/v1/check", method: .post, headers: headers, body: check) {
                    #expect(String(buffer: $0.body) == #"{"allowed":true,"revision":1}"#, "recovered without a restart")
                }
            }
            await pool.close()
        }
    }

    @Test("a budget write past the couple's limit is 409 quota_exceeded, names the limit and adds nothing")
    func budgetLimit() async throws {
        try await Self.withOwnedCouple { world in
            let (pool, headers, app) = (world.pool, world.headers, world.app())
            try await pool.query("UPDATE budget_row_limits SET max_rows = 1 WHERE table_name = 'budget_scenarios'")
            let scenarios = "/v1/couples/\(world.couple)/budget/scenarios"
            try await app.test(.live) { client in
                try await client.execute(
                    uri: scenarios, method: .post, headers: headers, body: ByteBuffer(string: #"{"name":"Main"}"#)
                ) { #expect($0.status == .created) }
                let before = try await client.execute(uri: scenarios, method: .get, headers: headers) {
                    String(buffer: $0.body)
                }
                try await client.execute(
                    uri: scenarios, method: .post, headers: headers, body: ByteBuffer(string: #"{"name":"Plan B"}"#)
                ) {
                    #expect($0.status == .conflict)
                    #expect(
                        String(buffer: $0.body)
                            == #"{"error":{"code":"quota_exceeded","message":"this would pass the couple's limit of scenarios (1); delete some first, or ask an operator to raise the limit"}}"#
                    )
                }
                try await client.execute(uri: scenarios, method: .get, headers: headers) {
                    #expect(String(buffer: $0.body) == before, "the refused write added nothing")
                }
            }
        }
    }

    @Test("an invitation past the couple's hourly limit is 429 with Retry-After: when the oldest leaves the hour")
    func invitationRateLimit() async throws {
        try await Self.withOwnedCouple { world in
            let (pool, headers, app) = (world.pool, world.headers, world.app())
            _ = try await pool.query("UPDATE invitation_settings SET per_couple_per_hour = 1")
            let invitations = "/v1/couples/\(world.couple)/invitations"
            let invite = ByteBuffer(string: #"{"role":"viewer"}"#)
            try await app.test(.live) { client in
                try await client.execute(uri: invitations, method: .post, headers: headers, body: invite) {
                    #expect($0.status == .created)
                }
                _ = try await pool.query("UPDATE invitations SET created_at = now() - interval '20 minutes'")
                try await client.execute(uri: invitations, method: .post, headers: headers, body: invite) {
                    #expect($0.status == .tooManyRequests)
                    let wait = try #require($0.headers[.retryAfter].flatMap { Int($0) })
                    #expect((2390...2401).contains(wait), "40 minutes, not \(wait) s")
                    #expect(String(buffer: $0.body).contains("the next may be made at "))
                }
            }
            let written: Int64 = try await pool.query("SELECT count(*) AS n FROM invitations")[0].decode("n")
            #expect(written == 1, "the refused one wrote nothing")
        }
    }

    @Test("a couple past the most its owner may create is 409 quota_exceeded, and nothing is made")
    func coupleLimit() async throws {
        try await Self.withOwnedCouple { world in
            let (pool, headers, app) = (world.pool, world.headers, world.app())
            _ = try await pool.query("UPDATE couple_settings SET owned_per_user = 1")
            try await app.test(.live) { client in
                try await client.execute(
                    uri: "/v1/couples", method: .post, headers: headers, body: ByteBuffer(string: #"{"name":"More"}"#)
                ) {
                    #expect($0.status == .conflict)
                    let body = String(buffer: $0.body)
                    #expect(body.contains(#"{"error":{"code":"quota_exceeded","message":"user "#), "\(body)")
                    #expect(body.contains("owns 1 couples, and a user creates couples only while owning fewer than 1"))
                }
            }
            let couples: Int64 = try await pool.query("SELECT count(*) AS n FROM couples")[0].decode("n")
            #expect(couples == 1, "the refused one made nothing")
        }
    }

    @Test("text with a NUL byte or a control character is a 400 naming the field, and changes nothing")
    func controlCharacters() async throws {
        try await Self.withOwnedCouple { world in
            let (pool, repository, headers, app) = (world.pool, world.repository, world.headers, world.app())
            let base = "/v1/couples/\(world.couple)"
            let tables = ["invitations", "budget_scenarios", "expenses", "gifts_and_owed", "audit_log", "users"]
            let counts = "SELECT " + tables.map { "(SELECT count(*) FROM \($0)) AS \($0)" }.joined(separator: ", ")
            func rows() async throws -> [Int64] {
                let row = try await pool.query(PostgresQuery(unsafeSQL: counts))[0]
                return try tables.map { try row.decode($0, as: Int64.self) }
            }
            let before = try await rows()
            let cases: [(path: String, body: String, message: String)] = [
                (
                    "/invitations", #"{"role":"viewer","email":"a\u0000b@example.com"}"#,
                    #""a\\u{0}b@example.com\" is not"#
                ),
                (
                    "/invitations", #"{"role":"viewer","email":"a\u001bb@example.com"}"#,
                    #""a\\u{1B}b@example.com\" is not"#
                ),
                (
                    "/invitations", #"{"role":"viewer","email":"a\u200bb@example.com"}"#,
                    #""a\\u{200B}b@example.com\" is not an email address: it holds an invisible character"#
                ),
                ("/budget/scenarios", #"{"name":"Main\u0000"}"#, "name must not contain control characters"),
                ("/budget/scenarios", #"{"name":"Main\u001b[2J"}"#, "name must not contain control characters"),
                ("/budget/expenses", #"{"name":"Cake","amount":10,"vendor":"Bakery\u0000"}"#, "vendor must not"),
                ("/budget/expenses", #"{"name":"Ca\u0000ke","amount":10}"#, "name must not"),
                ("/budget/gifts", #"{"from":"Aunt\u0000","amount":10}"#, "from must not"),
                ("/budget/gifts", #"{"from":"Aunt\u0007","amount":10}"#, "from must not"),
            ]
            try await app.test(.live) { client in
                for (path, body, message) in cases {
                    try await client.execute(
                        uri: base + path, method: .post, headers: headers, body: ByteBuffer(string: body)
                    ) { response in
                        #expect(response.status == .badRequest, "\(body)")
                        #expect(text(response).contains(#""code":"invalid_input""#), "\(body)")
                        #expect(text(response).contains(message), "\(body): \(text(response))")
                    }
                }
                // A form is refused by what is wrong with it, never by its value, which may be the token; as JSON
                // and as a page.
                let forms = [
                    ("access_token=%zz%", "the form is not URL-encoded", "the form is not URL-encoded"),
                    (
                        "access_token=a&access_token=b", #"names \"access_token\" more than once"#,
                        "names &quot;access_token&quot; more than once"
                    ),
                    (
                        "access_token[]=secret", "the form's access_token must be one value",
                        "the form&#39;s access_token"
                    ),
                    (
                        "access_token[x]=secret", "the form's access_token must be one value",
                        "the form&#39;s access_token"
                    ),
                    ("a[0]=secret&a[2]=secret", "the form names fields this page does not take", "fields this page"),
                    // Refused for its length before it is read, on a page for a browser.
                    (
                        "access_token=secret" + String(repeating: "x", count: 70_000), #""code":"body_too_large""#,
                        "<p>the request body is too large"
                    ),
                ]
                for (form, json, html) in forms {
                    for (accept, message) in [("application/json", json), ("text/html", html)] {
                        try await client.execute(
                            uri: "/invitations/inv_\(String(repeating: "A", count: 43))/accept", method: .post,
                            headers: [.contentType: "application/x-www-form-urlencoded", .accept: accept],
                            body: ByteBuffer(string: form)
                        ) { response in
                            #expect(
                                response.status == (form.count > 65_536 ? .contentTooLarge : .badRequest),
                                "\(form.prefix(40)) \(accept)")
                            #expect(
                                text(response).contains(message), "\(form.prefix(40)) \(accept): \(text(response))")
                            #expect(!text(response).contains("secret"), "\(form.prefix(40)) \(accept)")
                        }
                    }
                }
            }
            // A value no check upstream refused is still a clear refusal, not "the database is unavailable".
            let refusal = CollaborationError(
                .invalidInput, "a text value contains a NUL character, which cannot be stored")
            await #expect(throws: refusal) {
                try await repository.addUser(email: EmailAddress(rawValue: "nul@example.com")!, displayName: "N\0")
            }
            #expect(try await rows() == before, "nothing was written")
        }
    }

    /// Serves `fixture` with trusted, cold caches and a known key, and sends `bytes` (starting with the owner's
    /// check, made by `check`) on a new connection while memberships is locked. Once the check's statement waits
    /// for the lock, `whileHeld` runs; then the lock goes. Returns the answers until `count` (nil: the server
    /// closes the connection).
    static func exchangeHeld(
        _ fixture: OwnedCouple, idleTimeout: Duration = .seconds(60), responses count: Int?,
        _ bytes: (_ check: (UUID) -> String) -> String, whileHeld: @Sendable () async throws -> Void = {}
    ) async throws -> [CheckAnswerDifferentialTests.RawResponse] {
        let keyRepository = InMemoryServiceKeyRepository()
        let key = try await ServiceKeyService(repository: keyRepository).create(name: "live").1.rawValue
        let dependencies = CheckAnswerDifferentialTests.Servers.dependencies(
            repository: fixture.repository, keys: keyRepository,
            tokens: TokenVerifier(secret: .hmac(secret: Array(Self.secret.utf8))), trusted: true)
        func check(_ user: UUID) -> String {
            CheckAnswerDifferentialTests.Servers.request(
                #"{"couple_id":"\#(fixture.couple)","user_id":"\#(user)","permission":"budget.edit"}"#, key: key)
        }
        let request = Array(bytes(check).utf8)
        return try await CheckAnswerDifferentialTests.serving(dependencies, idleTimeout: idleTimeout) { port in
            // The route answers the first check with a key, and caches the key for the fast path, which then
            // answers the owner's check from the database.
            let first = try await CheckAnswerDifferentialTests.exchange(
                port: port, Array(check(UUID()).utf8), responses: 1)
            #expect(first.map(\.statusLine) == ["HTTP/1.1 200 OK"])
            let exchange = try await fixture.pool.withTransaction { locker in
                _ = try await locker.query("LOCK TABLE memberships IN ACCESS EXCLUSIVE MODE")
                let exchange = Task {
                    try await CheckAnswerDifferentialTests.exchange(port: port, request, responses: count)
                }
                let waits = try await eventually(within: .seconds(30), every: .milliseconds(5)) {
                    try await fixture.pool.query("SELECT count(*) AS n FROM \(sql: Self.waitingForMemberships)")[0]
                        .decode("n", as: Int.self) > 0
                }
                try #require(waits, "the check never waited for the lock on memberships")
                try await whileHeld()
                return exchange
            }
            return try await exchange.value
        }
    }

    /// The locks waited for on this database's memberships (pg_locks shows every database's, and databases made
    /// from one template share their tables' OIDs).
    static let waitingForMemberships: StaticString = """
        pg_locks WHERE NOT granted AND relation = 'memberships'::regclass
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        """

    @Test("a request that does not parse, pipelined behind a check waiting for the database, is answered 400 after it")
    func brokenRequestBehindDatabaseCheck() async throws {
        try await Self.withOwnedCouple { fixture in
            // By the time the check's statement waits, the request behind it has been read.
            let answers = try await Self.exchangeHeld(fixture, responses: nil) { check in
                check(fixture.owner) + "GET /health HTTP/1.1\r\nHost rbac.test\r\n\r\n"
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 200 OK", "HTTP/1.1 400 Bad Request"])
            #expect(
                answers.first.map { String(decoding: $0.body, as: UTF8.self) }?.contains(#""allowed":true"#) == true)
        }
    }

    @Test("a check the database holds for longer than the idle timeout is still answered")
    func slowCheckOutlastsIdleTimeout() async throws {
        try await Self.withOwnedCouple { fixture in
            let answers = try await Self.exchangeHeld(fixture, idleTimeout: .seconds(1), responses: 1) { check in
                check(fixture.owner)
            } whileHeld: {
                try await Task.sleep(for: .milliseconds(1500))
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 200 OK"])
            #expect(
                answers.first.map { String(decoding: $0.body, as: UTF8.self) }?.contains(#""allowed":true"#) == true)
        }
    }

    @Test("a check the database fails to answer the fast path is answered 503 by the route, not asked again")
    func failedCheckNotAskedAgain() async throws {
        try await Self.withOwnedCouple { fixture in
            let answers = try await Self.exchangeHeld(fixture, responses: 1) { check in
                check(fixture.owner)
            } whileHeld: {
                // Its statement ends as a server going away ends it; asked again, the check would wait for the lock
                // and, once it goes, be allowed.
                let waiting = try await fixture.pool.query("SELECT pid FROM \(sql: Self.waitingForMemberships)")
                let pid: Int32 = try waiting[0].decode("pid")
                _ = try await fixture.pool.query("SELECT pg_terminate_backend(\(pid))")
                let ended = try await eventually(within: .seconds(30), every: .milliseconds(5)) {
                    try await fixture.pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = \(pid)").isEmpty
                }
                try #require(ended, "the terminated session did not end")
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 503 Service Unavailable"])
            #expect(answers.first?.headers.contains("Retry-After: 1") == true, "\(answers)")
            #expect(answers.first.map { String(decoding: $0.body, as: UTF8.self) }?.contains("allowed") == false)
        }
    }

    @Test("a request whose body has not come, pipelined behind a check held past the idle timeout, does not cut it off")
    func pipelinedHeadOutlastsIdleTimeout() async throws {
        try await Self.withOwnedCouple { fixture in
            let answers = try await Self.exchangeHeld(fixture, idleTimeout: .seconds(1), responses: 1) { check in
                // The second check's head alone: its body is the client's to send, but only once the service has
                // answered the check before it.
                let second = check(fixture.owner)
                return check(fixture.owner) + second.prefix(upTo: second.range(of: "\r\n\r\n")!.upperBound)
            } whileHeld: {
                try await Task.sleep(for: .milliseconds(1500))
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 200 OK"])
        }
    }

    @Test(
        "100 Continue for a request pipelined behind a check waiting for the database comes after that check's answer")
    func continueAfterEarlierAnswer() async throws {
        try await Self.withOwnedCouple { fixture in
            let answers = try await Self.exchangeHeld(fixture, responses: 2) { check in
                // Its head alone: the client waits for 100 Continue before it sends the body.
                let waiting = check(fixture.owner).replacingOccurrences(
                    of: "\r\n\r\n", with: "\r\nExpect: 100-continue\r\n\r\n")
                return check(fixture.owner) + waiting.prefix { $0 != "{" }
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 200 OK", "HTTP/1.1 100 Continue"])
        }
    }
}
