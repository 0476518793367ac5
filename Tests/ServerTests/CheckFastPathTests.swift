import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import InMemoryRepositories
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Postgres
import Prometheus
import TestSupport
import Testing

@testable import Server

/// `CheckFastPath` in a channel of its own, between two handlers that record what it writes to the client and
/// what it hands on to Hummingbird, over the in-memory fixture with caches that are always trusted.
@Suite("Checks answered before the router", .timeLimit(.minutes(1)))
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
                repository: fixture.repository, keys: keys, tokens: fixture.tokens,
                publicBaseURL: URL(string: "https://rbac.test")!,
                checker: PermissionChecker(
                    repository: fixture.repository, cache: PermissionCache(), isCacheTrusted: { true }),
                budgets: InMemoryBudgetRepository(), metrics: registry, isReady: { true })
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

        func body(permission: String = "budget.edit", user: UUID? = nil, minRevision: Int64? = nil) -> ByteBuffer {
            let revision = minRevision.map { #","min_revision":\#($0)"# } ?? ""
            return ByteBuffer(
                string: #"{"couple_id":"\#(fixture.couple)","user_id":"\#(user ?? fixture.owner)","#
                    + #""permission":"\#(permission)"\#(revision)}"#)
        }

        func head(_ method: HTTPRequest.Method = .post, _ path: String = "/v1/check") -> HTTPRequest {
            HTTPRequest(method: method, scheme: nil, authority: "rbac.test", path: path, headerFields: headers)
        }

        func request(_ head: HTTPRequest? = nil, _ body: ByteBuffer? = nil) -> [HTTPRequestPart] {
            [.head(head ?? self.head()), .body(body ?? self.body()), .end(nil)]
        }

        /// `body` with a connection through a new fast path, closed afterwards.
        func withConnection<T>(failures: FailureLog = FailureLog(), _ body: (Connection) async throws -> T)
            async throws -> T
        {
            let (keys, checker, registry, lines) = (dependencies.keys, dependencies.checker, registry, lines)
            let connection = try await Connection {
                var logger = Logger(label: "rbac") { LineLogHandler(label: $0, stream: lines) }
                logger.logLevel = .debug  // where request lines are written
                return CheckFastPath(
                    keys: keys, checker: checker,
                    timings: RouteMetricsMiddleware.timings(PrometheusMetricsFactory(registry: registry)),
                    failures: failures, logger: logger)
            }
            return try await ensuring {
                try await body(connection)
            } finally: {
                await connection.close()
            }
        }

        /// The answer written here to a check with `body`, when it is one and nothing else happened.
        func answerHere(_ body: ByteBuffer) async throws -> (HTTPResponse, ByteBuffer)? {
            try await withConnection { connection in
                try await connection.read(request(nil, body))
                let answer = CheckFastPathTests.isAnswer(await connection.next(3))
                #expect(try await connection.nothingMore(), "answered at once, and nothing handed on")
                return answer
            }
        }

        /// The route's answer to a check with `body`.
        func routeAnswer(_ body: ByteBuffer) async throws -> (HTTPResponse.Status, String, String?) {
            try await Application(router: buildRouter(dependencies)).test(.router) { client in
                try await client.execute(uri: "/v1/check", method: .post, headers: headers, body: body) { route in
                    (route.status, String(buffer: route.body), route.headers[.contentType])
                }
            }
        }
    }

    /// What the connection's recorders saw, in order.
    enum Event: Equatable, Sendable {
        /// Written to the client, by the fast path or by Hummingbird (`Connection.answer`).
        case answer(HTTPResponsePart)
        /// Handed on to Hummingbird.
        case handedOn(HTTPRequestPart)
        /// A read asked of the socket.
        case read
        /// The shutdown event, handed on to Hummingbird.
        case shutdown
        /// Recorded by `Connection.nothingMore`.
        case mark
    }

    /// Records what goes out at the client's end of the fast path.
    final class ClientEnd: ChannelOutboundHandler {
        typealias OutboundIn = HTTPResponsePart
        let record: AsyncStream<Event>.Continuation
        init(_ record: AsyncStream<Event>.Continuation) { self.record = record }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            record.yield(.answer(unwrapOutboundIn(data)))
            context.write(data, promise: promise)
        }

        func read(context: ChannelHandlerContext) {
            record.yield(.read)
            context.read()
        }
    }

    /// Records what reaches Hummingbird's end of the fast path.
    final class HummingbirdEnd: ChannelInboundHandler {
        typealias InboundIn = HTTPRequestPart
        let record: AsyncStream<Event>.Continuation
        init(_ record: AsyncStream<Event>.Continuation) { self.record = record }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            record.yield(.handedOn(unwrapInboundIn(data)))
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is ChannelShouldQuiesceEvent { record.yield(.shutdown) }
        }
    }

    final class Connection {
        let channel: NIOAsyncTestingChannel
        private let record: AsyncStream<Event>.Continuation
        private var events: AsyncStream<Event>.Iterator

        init(fastPath: @escaping @Sendable () -> CheckFastPath) async throws {
            let (stream, record) = AsyncStream.makeStream(of: Event.self)
            (self.record, events) = (record, stream.makeAsyncIterator())
            channel = try await NIOAsyncTestingChannel { channel in
                try channel.pipeline.syncOperations.addHandlers(ClientEnd(record), fastPath(), HummingbirdEnd(record))
            }
            // Active, as a client's connection is: the fast path writes no answer on a closed one.
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        }

        enum Step: Sendable {
            /// Parts arriving in one read.
            case read([HTTPRequestPart])
            /// A read asked of the socket, as the channel asks once it has handed on what it read.
            case askToRead
            case shutDown
        }

        /// `steps`, all at once on the event loop; then whatever they started there, until it waits for another
        /// thread.
        func perform(_ steps: Step...) async throws {
            try await channel.testingEventLoop.executeInContext { [channel] in
                for step in steps {
                    switch step {
                    case .read(let parts):
                        for part in parts { channel.pipeline.fireChannelRead(part) }
                        channel.pipeline.fireChannelReadComplete()
                    case .askToRead: channel.pipeline.read()
                    case .shutDown: channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
                    }
                }
            }
            await channel.testingEventLoop.run()
        }

        func read(_ parts: [HTTPRequestPart]) async throws { try await perform(.read(parts)) }

        /// Writes `parts` as Hummingbird answering what was handed on.
        func answer(_ parts: [HTTPResponsePart]) async throws {
            for part in parts { try await channel.writeOutbound(part) }
        }

        /// The next `count` events, waiting for them.
        func next(_ count: Int) async -> [Event] {
            var next: [Event] = []
            while next.count < count, let event = await events.next() { next.append(event) }
            return next
        }

        /// Whether nothing was recorded but what `next` took, up to now on the event loop.
        func nothingMore() async throws -> Bool {
            try await channel.testingEventLoop.executeInContext { [record] in _ = record.yield(.mark) }
            return await next(1) == [.mark]
        }

        func close() async {
            _ = try? await channel.finish(acceptAlreadyClosed: true)
            record.finish()
        }
    }

    /// An answer's three parts: head, body, end.
    static func isAnswer(_ events: [Event]) -> (HTTPResponse, ByteBuffer)? {
        guard events.count == 3, case .answer(.head(let head)) = events[0], case .answer(.body(let body)) = events[1],
            case .answer(.end(nil)) = events[2]
        else { return nil }
        return (head, body)
    }

    static func handedOn(_ parts: [HTTPRequestPart]) -> [Event] { parts.map(Event.handedOn) }

    @Test("a warm check is answered here with what the route answers, logged, counted and timed as the route's")
    func answersWarmCheck() async throws {
        let warm = try await Warm()
        let cases = [
            (warm.fixture.owner, "budget.edit", true), (warm.fixture.invitee, "budget.edit", false),
            (warm.fixture.owner, "couple.delete", true),
        ]
        for (user, permission, expected) in cases {
            guard let (head, body) = try await warm.answerHere(warm.body(permission: permission, user: user)) else {
                Issue.record("not an answer")
                continue
            }
            let route = try await warm.routeAnswer(warm.body(permission: permission, user: user))
            #expect((head.status, String(buffer: body), head.headerFields[.contentType]) == route)
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
                #/ debug rbac: hb\.request\.id=\S+ method=POST ms=[0-9.e-]+ path=\/v1\/check status=200 \[\w+\] request\n/#
            #expect(line.drop { $0 != " " }.wholeMatch(of: request) != nil, "\(line)")
        }
        let samples = try CacheTests.parsePrometheus(warm.registry.emitToString())
        // Two that warmed the caches, three here, and three through the route to compare with.
        #expect(samples[#"http_requests_total{method="POST",route="/v1/check",status="200"}"#] == 8)
    }

    @Test(
        "a check the cache cannot answer is answered here from the repository, as the route answers it",
        arguments: ["a user the cache does not hold", "a revision newer than the cached one"])
    func answersFromRepository(_ what: String) async throws {
        let warm = try await Warm()
        var body = warm.body(user: UUID())
        if what == "a revision newer than the cached one" {
            // A write the cache does not hear of.
            let written = try await warm.fixture.member("vera", "viewer")
            body = warm.body(minRevision: written.revision)
        }
        let (head, answered) = try #require(try await warm.answerHere(body))
        let route = try await warm.routeAnswer(body)
        #expect((head.status, String(buffer: answered), head.headerFields[.contentType]) == route)
        #expect(
            String(buffer: answered).hasPrefix(
                what == "a user the cache does not hold" ? #"{"allowed":false"# : #"{"allowed":true"#))
        #expect(warm.lines.written.withLock { $0.count } == 1, "logged")
        let samples = try CacheTests.parsePrometheus(warm.registry.emitToString())
        #expect(samples[#"http_requests_total{method="POST",route="/v1/check",status="200"}"#] == 4)
    }

    @Test("once checks failed with 503, one answered here from the database, not the cache, says they succeed again")
    func endsUnavailability() async throws {
        let warm = try await Warm()
        let clock = SteppedClock()
        let failures = FailureLog(now: { clock.now })
        let logger = Logger(label: "rbac") { LineLogHandler(label: $0, stream: warm.lines) }
        failures.failed(
            CollaborationError(.unavailable, "down"), answered: .unavailable, logger: logger)
        clock.advance(FailureLog.quietPeriod)
        // (from the cache, what it logs besides its request line)
        let steps = [(true, nil), (false, "notice"), (false, nil)]
        for (index, (cached, logs)) in steps.enumerated() {
            let before = warm.lines.written.withLock { $0.count }
            try await warm.withConnection(failures: failures) { connection in
                try await connection.read(warm.request(nil, warm.body(user: cached ? nil : UUID())))
                #expect(Self.isAnswer(await connection.next(3)) != nil, "step \(index): answered here")
                #expect(try await connection.nothingMore())
            }
            let logged = warm.lines.written.withLock { Array($0[before...]) }.filter { !$0.contains(" request\n") }
            #expect(
                logged.map { $0.drop { $0 != " " }.prefix { $0 != ":" } } == logs.map { [" \($0) rbac"] } ?? [],
                "step \(index): \(logged)")
        }
    }

    @Test(
        "whatever this handler cannot answer is handed on whole and in order",
        arguments: [
            "no key", "a key the cache does not hold", "a body outside the scanned subset",
            "a permission no role grants (refused by the repository)", "Connection: close", "a GET", "a query string",
            "trailers", "a body over 4 KiB", "a text/plain body",
        ])
    func handsOn(_ what: String) async throws {
        let warm = try await Warm()
        var head = warm.head()
        var body = warm.body()
        var end: HTTPFields? = nil
        switch what {
        case "no key": head.headerFields[.authorization] = nil
        case "a key the cache does not hold": head.headerFields[.authorization] = "Bearer rbk_\(UUID())"
        case "a body outside the scanned subset": body = ByteBuffer(string: #"{"couple_id":"\u0041"}"#)
        case "a permission no role grants (refused by the repository)": body = warm.body(permission: "budget.approve")
        case "Connection: close": head.headerFields[.connection] = "close"
        case "a GET": head.method = .get
        case "a query string": head.path = "/v1/check?x=1"
        case "trailers": end = [.init("X-Trailer")!: "1"]
        case "a text/plain body": head.headerFields[.contentType] = "text/plain"
        default:
            body = warm.body()
            body.writeString(String(repeating: " ", count: 4096))
        }
        let request: [HTTPRequestPart] = [.head(head), .body(body), .end(end)]
        try await warm.withConnection { connection in
            try await connection.read(request)
            #expect(await connection.next(3) == Self.handedOn(request))
            #expect(try await connection.nothingMore())
        }
    }

    @Test(
        "the mark of a check the database failed is this handler's: taken off what a client sends",
        arguments: ["a GET", "a check with Connection: close", "a check whose body is outside the scanned subset"])
    func marksItsOwn(_ what: String) async throws {
        let warm = try await Warm()
        var head = warm.head()
        var body = warm.body()
        switch what {
        case "a GET": head.method = .get
        case "a check with Connection: close": head.headerFields[.connection] = "close"
        default: body = ByteBuffer(string: #"{"couple_id":"\u0041"}"#)
        }
        var marked = head
        marked.headerFields[CheckAnswer.unavailable] = "1"
        try await warm.withConnection { connection in
            try await connection.read([.head(marked), .body(body), .end(nil)])
            #expect(await connection.next(3) == Self.handedOn([.head(head), .body(body), .end(nil)]))
            #expect(try await connection.nothingMore())
        }
    }

    @Test("a check that comes in several reads is answered once whole")
    func severalReads() async throws {
        let warm = try await Warm()
        var body = warm.body()
        let first = body.readSlice(length: 20)!
        try await warm.withConnection { connection in
            try await connection.read([.head(warm.head())])
            try await connection.read([.body(first)])
            #expect(try await connection.nothingMore())
            try await connection.read([.body(body), .end(nil)])
            #expect(Self.isAnswer(await connection.next(3)) != nil)
            #expect(try await connection.nothingMore())
        }
    }

    @Test(
        "a check held when shutdown begins, or read after, is handed on, so that Hummingbird answers it before closing")
    func handsOnAtShutdown() async throws {
        let warm = try await Warm()
        try await warm.withConnection { connection in
            try await connection.perform(.read([.head(warm.head()), .body(warm.body())]), .shutDown)
            try await connection.read([.end(nil)])
            #expect(
                await connection.next(4) == Self.handedOn([.head(warm.head()), .body(warm.body())]) + [.shutdown]
                    + Self.handedOn([.end(nil)]))
            #expect(try await connection.nothingMore())
        }
        try await warm.withConnection { connection in
            try await connection.perform(.shutDown, .read(warm.request()))
            #expect(await connection.next(4) == [.shutdown] + Self.handedOn(warm.request()))
            #expect(try await connection.nothingMore())
        }
    }

    @Test("while a check is answered from the repository, what is read waits: requests, reads asked for, shutdown")
    func waitsForRepository() async throws {
        let warm = try await Warm()
        let cold = warm.request(nil, warm.body(user: UUID()))
        let health: [HTTPRequestPart] = [.head(warm.head(.get, "/health")), .end(nil)]
        try await warm.withConnection { connection in
            // A read asked for while nothing waits is made at once; one asked for once something waits, afterwards.
            try await connection.perform(.read(cold), .askToRead, .read(health + warm.request()), .askToRead, .shutDown)
            #expect(await connection.next(1) == [.read])
            #expect(Self.isAnswer(await connection.next(3)) != nil, "the check's answer comes first")
            // The check behind the health check goes on too: Hummingbird still owes the health check its answer.
            #expect(await connection.next(7) == Self.handedOn(health + warm.request()) + [.read, .shutdown])
            #expect(try await connection.nothingMore())
        }
    }

    @Test("after a check handed on and answered, the next warm check is answered here")
    func afterHandingOn() async throws {
        let warm = try await Warm()
        try await warm.withConnection { connection in
            let refused = warm.request(nil, warm.body(permission: "budget.approve"))
            try await connection.read(refused)
            #expect(await connection.next(3) == Self.handedOn(refused))
            let refusal: [HTTPResponsePart] = [
                .head(HTTPResponse(status: .badRequest)), .body(ByteBuffer(string: #"{"error":"invalid_input"}"#)),
                .end(nil),
            ]
            try await connection.answer(refusal)
            #expect(await connection.next(3) == refusal.map(Event.answer))
            try await connection.read(warm.request())
            #expect(Self.isAnswer(await connection.next(3)) != nil)
            #expect(try await connection.nothingMore())
        }
    }

    @Test("no answer overtakes one Hummingbird still owes; once it has written them all, warm checks are answered")
    func keepsOrder() async throws {
        let warm = try await Warm()
        let health: [HTTPRequestPart] = [.head(warm.head(.get, "/health")), .end(nil)]
        let healthAnswer: [HTTPResponsePart] = [
            .head(HTTPResponse(status: .ok)), .body(ByteBuffer(string: "ok")), .end(nil),
        ]
        try await warm.withConnection { connection in
            try await connection.read(health + warm.request())
            #expect(await connection.next(5) == Self.handedOn(health + warm.request()), "both owed")
            try await connection.read(warm.request())
            #expect(await connection.next(3) == Self.handedOn(warm.request()), "still owed: the two before it")
            try await connection.answer(healthAnswer)
            try await connection.read(warm.request())
            #expect(
                await connection.next(6) == healthAnswer.map(Event.answer) + Self.handedOn(warm.request()),
                "still owed: two checks")

            try await connection.answer(healthAnswer + healthAnswer)
            try await connection.read(warm.request())
            #expect(
                await connection.next(9) == (healthAnswer + healthAnswer).map(Event.answer)
                    + Self.handedOn(warm.request()),
                "still owed: one check")
            try await connection.answer(healthAnswer + healthAnswer)
            #expect(await connection.next(6) == (healthAnswer + healthAnswer).map(Event.answer))
            try await connection.read(warm.request() + warm.request())
            #expect(Self.isAnswer(await connection.next(3)) != nil, "nothing owed: answered here")
            #expect(Self.isAnswer(await connection.next(3)) != nil, "and the next")
            #expect(try await connection.nothingMore())
        }
    }
}
