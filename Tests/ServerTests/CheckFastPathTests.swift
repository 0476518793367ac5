import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Prometheus
import Testing

@testable import Server

/// `CheckFastPath` in a channel of its own: what it answers itself, and what it hands on to Hummingbird (read
/// here from the channel's end), over the in-memory fixture with caches that are always trusted.
@Suite("Warm checks answered before the router")
struct CheckFastPathTests {
    /// The fixture's couple behind trusted caches, warmed with a key and the sets of the owner and the invitee
    /// (not a member).
    struct Warm {
        let fixture: Fixture
        let dependencies: ServerDependencies
        let registry = PrometheusCollectorRegistry()
        /// What the fast path logs.
        let lines = LineLogHandlerTests.Lines()
        let apiKey: String

        init() async throws {
            fixture = try await Fixture()
            let keys = ServiceKeyService(
                repository: InMemoryServiceKeyRepository(), cache: ServiceKeyCache(), isCacheTrusted: { true })
            apiKey = try await keys.create(name: "fast").1.rawValue
            dependencies = ServerDependencies(
                repository: fixture.repository, keys: keys, verifier: fixture.verifier,
                publicBaseURL: URL(string: "https://rbac.test")!,
                checker: PermissionChecker(
                    repository: fixture.repository, cache: PermissionCache(), isCacheTrusted: { true }),
                metrics: registry, isReady: { true })
            // Through the route: the key, the owner's and the invitee's (empty) sets, and for the invitee's
            // denial, the permissions some role grants.
            let (headers, bodies) = (headers, [fixture.owner, fixture.invitee].map { body(user: $0) })
            try await Application(router: buildRouter(dependencies)).test(.router) { client in
                for body in bodies {
                    try await client.execute(uri: "/v1/check", method: .post, headers: headers, body: body) { _ in }
                }
            }
        }

        var headers: HTTPFields { [.authorization: "Bearer \(apiKey)", .contentType: "application/json"] }

        func body(permission: String = "budget.edit", user: UUID? = nil) -> ByteBuffer {
            ByteBuffer(
                string:
                    #"{"couple_id":"\#(fixture.couple)","user_id":"\#(user ?? fixture.owner)","permission":"\#(permission)"}"#
            )
        }

        func head(_ method: HTTPRequest.Method = .post, _ path: String = "/v1/check") -> HTTPRequest {
            HTTPRequest(method: method, scheme: nil, authority: "rbac.test", path: path, headerFields: headers)
        }

        func request(_ head: HTTPRequest? = nil, _ body: ByteBuffer? = nil) -> [HTTPRequestPart] {
            [.head(head ?? self.head()), .body(body ?? self.body()), .end(nil)]
        }

        /// A connection through a new fast path. Use it without awaiting in between: its event loop is the
        /// thread that made it.
        func connection() -> Connection {
            Connection(
                channel: EmbeddedChannel(
                    handler: CheckFastPath(
                        keys: dependencies.keys, checker: dependencies.checker,
                        timings: RouteMetricsMiddleware.timings(PrometheusMetricsFactory(registry: registry)),
                        logger: Logger(label: "rbac") { [lines] in LineLogHandler(label: $0, stream: lines) })))
        }

        /// What the fast path does with `reads`, each one read, on a new connection.
        func run(_ reads: [HTTPRequestPart]...) throws -> (answered: [HTTPResponsePart], handedOn: [HTTPRequestPart]) {
            let connection = connection()
            for read in reads { connection.read(read) }
            defer { connection.close() }
            return (try connection.answered(), try connection.handedOn())
        }
    }

    final class Connection {
        let channel: EmbeddedChannel

        init(channel: EmbeddedChannel) { self.channel = channel }

        /// `parts`, arriving in one read.
        func read(_ parts: [HTTPRequestPart]) {
            for part in parts { channel.pipeline.fireChannelRead(part) }
            channel.pipeline.fireChannelReadComplete()
        }

        /// Writes `parts` as Hummingbird answering what was handed on.
        func answer(_ parts: [HTTPResponsePart]) throws {
            for part in parts { try channel.writeOutbound(part) }
        }

        /// What was written to the client since last asked.
        func answered() throws -> [HTTPResponsePart] {
            var parts: [HTTPResponsePart] = []
            while let part = try channel.readOutbound(as: HTTPResponsePart.self) { parts.append(part) }
            return parts
        }

        /// What reached Hummingbird since last asked.
        func handedOn() throws -> [HTTPRequestPart] {
            var parts: [HTTPRequestPart] = []
            while let part = try channel.readInbound(as: HTTPRequestPart.self) { parts.append(part) }
            return parts
        }

        func close() { _ = try? channel.finish() }
    }

    @Test("a warm check is answered here with what the route answers, logged, counted and timed as the route's")
    func answersWarmCheck() async throws {
        let warm = try await Warm()
        let cases = [
            (warm.fixture.owner, "budget.edit", true), (warm.fixture.invitee, "budget.edit", false),
            (warm.fixture.owner, "couple.delete", true),
        ]
        for (user, permission, expected) in cases {
            let outcome = try warm.run(warm.request(nil, warm.body(permission: permission, user: user)))
            #expect(outcome.handedOn.isEmpty)
            #expect(outcome.answered.count == 3)
            guard case .head(let head) = outcome.answered.first, case .body(let body) = outcome.answered[1],
                case .end(nil) = outcome.answered.last
            else {
                Issue.record("not an answer: \(outcome.answered)")
                continue
            }
            try await Application(router: buildRouter(warm.dependencies)).test(.router) { client in
                try await client.execute(
                    uri: "/v1/check", method: .post, headers: warm.headers,
                    body: warm.body(permission: permission, user: user)
                ) { route in
                    #expect(head.status == route.status)
                    #expect(String(buffer: body) == String(buffer: route.body))
                    #expect(head.headerFields[.contentType] == route.headers[.contentType])
                }
            }
            #expect(String(buffer: body).hasPrefix(#"{"allowed":\#(expected)"#))
            #expect(head.headerFields[.contentLength] == String(body.readableBytes))
            #expect(head.headerFields[.server] == "rbac")
            let date = try #require(head.headerFields[.date])
            #expect(
                date.wholeMatch(of: /[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT/) != nil, "\(date)")
        }
        let logged = warm.lines.written.withLock { $0 }
        #expect(logged.count == 3)
        for line in logged {
            let request =
                #/ info rbac: hb\.request\.id=\S+ method=POST ms=[0-9.e-]+ path=\/v1\/check status=200 \[\w+\] request\n/#
            #expect(line.drop { $0 != " " }.wholeMatch(of: request) != nil, "\(line)")
        }
        let samples = try CacheTests.parsePrometheus(warm.registry.emitToString())
        // Two that warmed the caches, three here, and three through the route to compare with.
        #expect(samples[#"http_requests_total{method="POST",route="/v1/check",status="200"}"#] == 8)
    }

    @Test(
        "whatever the caches cannot answer is handed on whole and in order",
        arguments: [
            "a check of a user the cache does not hold", "no key", "a key the cache does not hold",
            "a body outside the scanned subset", "a permission no role grants", "Connection: close", "a GET",
            "a query string", "trailers", "a body over 4 KiB",
        ])
    func handsOn(_ what: String) async throws {
        let warm = try await Warm()
        var head = warm.head()
        var body = warm.body()
        var end: HTTPFields? = nil
        switch what {
        case "a check of a user the cache does not hold": body = warm.body(user: UUID())
        case "no key": head.headerFields[.authorization] = nil
        case "a key the cache does not hold": head.headerFields[.authorization] = "Bearer rbk_\(UUID())"
        case "a body outside the scanned subset": body = ByteBuffer(string: #"{"couple_id":"\u0041"}"#)
        case "a permission no role grants": body = warm.body(permission: "budget.approve")
        case "Connection: close": head.headerFields[.connection] = "close"
        case "a GET": head.method = .get
        case "a query string": head.path = "/v1/check?x=1"
        case "trailers": end = [.init("X-Trailer")!: "1"]
        default:
            body = warm.body()
            body.writeString(String(repeating: " ", count: 4096))
        }
        let request: [HTTPRequestPart] = [.head(head), .body(body), .end(end)]
        let outcome = try warm.run(request)
        #expect(outcome.answered.isEmpty)
        #expect(outcome.handedOn == request)
    }

    @Test("a check that comes in several reads is answered once whole")
    func severalReads() async throws {
        let warm = try await Warm()
        var body = warm.body()
        let first = body.readSlice(length: 20)!
        let outcome = try warm.run([.head(warm.head())], [.body(first)], [.body(body), .end(nil)])
        #expect(outcome.handedOn.isEmpty)
        #expect(outcome.answered.count == 3)
    }

    @Test("a check held when shutdown begins is handed on, so that Hummingbird answers it before closing")
    func handsOnAtShutdown() async throws {
        let warm = try await Warm()
        let connection = warm.connection()
        defer { connection.close() }
        connection.read([.head(warm.head()), .body(warm.body())])
        #expect(try connection.handedOn().isEmpty)
        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        connection.read([.end(nil)])
        #expect(try connection.handedOn() == warm.request())
        #expect(try connection.answered().isEmpty)
    }

    @Test("after a check handed on and answered, the next warm check is answered here")
    func afterHandingOn() async throws {
        let warm = try await Warm()
        let connection = warm.connection()
        defer { connection.close() }
        let cold = warm.request(nil, warm.body(user: UUID()))
        connection.read(cold)
        #expect(try connection.handedOn() == cold)
        let denial: [HTTPResponsePart] = [
            .head(HTTPResponse(status: .ok)), .body(ByteBuffer(string: #"{"allowed":false}"#)), .end(nil),
        ]
        try connection.answer(denial)
        connection.read(warm.request())
        #expect(try connection.handedOn().isEmpty)
        #expect(try connection.answered().count == denial.count + 3)
    }

    @Test("no answer overtakes one Hummingbird still owes; once it has written them all, warm checks are answered")
    func keepsOrder() async throws {
        let warm = try await Warm()
        let health: [HTTPRequestPart] = [.head(warm.head(.get, "/health")), .end(nil)]
        let healthAnswer: [HTTPResponsePart] = [
            .head(HTTPResponse(status: .ok)), .body(ByteBuffer(string: "ok")), .end(nil),
        ]
        let connection = warm.connection()
        defer { connection.close() }

        connection.read(health + warm.request())
        #expect(try connection.handedOn() == health + warm.request(), "both owed")
        connection.read(warm.request())
        #expect(try connection.handedOn() == warm.request(), "still owed: the two before it")
        try connection.answer(healthAnswer)
        connection.read(warm.request())
        #expect(try connection.handedOn() == warm.request(), "still owed: two checks")
        #expect(try connection.answered() == healthAnswer)

        try connection.answer(healthAnswer + healthAnswer)
        connection.read(warm.request())
        #expect(try connection.handedOn() == warm.request(), "still owed: one check")
        try connection.answer(healthAnswer + healthAnswer)
        connection.read(warm.request() + warm.request())
        #expect(try connection.handedOn().isEmpty, "nothing owed: both answered here")
        #expect(try connection.answered().count == 4 * healthAnswer.count + 2 * 3)
    }
}
