import Collaboration
import Foundation
import Hummingbird
import Identity
import InMemoryRepositories
import Logging
import ServiceLifecycle
import TestSupport
import Testing

@testable import Server

/// The same checks, sent as raw bytes over real HTTP to two servers over one in-memory repository: one whose
/// caches are trusted, so that `CheckFastPath` answers what it can before the router, and one whose caches are
/// not, so that the route answers everything. Both must answer byte for byte alike, but for the `Date` field.
@Suite("Checks: the fast path and the route write the same answers", .timeLimit(.minutes(2)))
struct CheckAnswerDifferentialTests {
    /// One response as it came over the wire: the status line, the header lines but `Date`, the body.
    struct RawResponse: Equatable, Sendable, CustomStringConvertible {
        let statusLine: String
        let headers: [String]
        let body: [UInt8]

        var description: String {
            ([statusLine] + headers).joined(separator: "\n") + "\n\n" + String(decoding: body, as: UTF8.self)
        }
    }

    /// Sends `request` on a new connection and reads `count` responses from it; with `count` nil, every response
    /// until the server closes the connection (a connection still open after 10 seconds of silence throws).
    static func exchange(port: Int, _ request: [UInt8], responses count: Int?) async throws -> [RawResponse] {
        try await onOwnThread { try blockingExchange(port: port, request, responses: count) }
    }

    private static func blockingExchange(port: Int, _ request: [UInt8], responses count: Int?) throws -> [RawResponse] {
        let connection = try LoopbackConnection(port: port)
        try connection.send(request)
        var received: [UInt8] = []
        var responses: [RawResponse] = []
        while responses.count < count ?? .max {
            if let (response, used) = parse(received) {
                responses.append(response)
                received.removeFirst(used)
                continue
            }
            let chunk: [UInt8]
            do { chunk = try connection.receive() } catch {
                throw TestSetupError("no end of the connection after \(responses.count) responses: \(error)")
            }
            if chunk.isEmpty, count == nil, received.isEmpty { return responses }
            guard !chunk.isEmpty else {
                throw TestSetupError(
                    "the connection ended after \(responses.count) of \(count.map(String.init) ?? "all") responses")
            }
            received += chunk
        }
        return responses
    }

    /// The first whole response in `bytes`, and how many bytes it took.
    static func parse(_ bytes: [UInt8]) -> (RawResponse, Int)? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { Array(bytes[$0..<$0 + 4]) == separator })
        else { return nil }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let length =
            lines.dropFirst().compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        let total = end + 4 + length
        guard bytes.count >= total else { return nil }
        let headers = lines.dropFirst().filter { !$0.lowercased().hasPrefix("date:") }
        return (RawResponse(statusLine: lines[0], headers: headers, body: Array(bytes[(end + 4)..<total])), total)
    }

    /// Runs the application on a free port until `body` returns, closing connections idle for `idleTimeout`,
    /// with at most `maxConnections` open.
    static func serving<T: Sendable>(
        _ dependencies: ServerDependencies, idleTimeout: Duration = .seconds(60), maxConnections: Int = 10_000,
        _ body: (_ port: Int) async throws -> T
    ) async throws -> T {
        let listening = AsyncStream.makeStream(of: Int.self)
        let group = ServiceGroup(
            services: [
                buildApplication(
                    dependencies, host: "127.0.0.1", port: 0, logger: Logger(label: "differential-test"),
                    idleTimeout: idleTimeout, maxConnections: maxConnections,
                    onServerRunning: { listening.continuation.yield($0) })
            ], logger: Logger(label: "differential-test"))
        return try await withThrowingTaskGroup(of: T?.self) { tasks in
            tasks.addTask {
                try await group.run()
                return nil
            }
            var ports = listening.stream.makeAsyncIterator()
            guard let port = await ports.next() else { throw TestSetupError("the server did not start") }
            let result = try await body(port)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return result
        }
    }

    /// Two servers' dependencies over one repository and one service key: `fast` trusts its caches, so that
    /// `CheckFastPath` answers what it can; `route` does not, so that the route answers everything.
    struct Servers {
        let fixture: Fixture
        let keyRepository = InMemoryServiceKeyRepository()
        let key: String

        init() async throws {
            fixture = try await Fixture()
            key = try await ServiceKeyService(repository: keyRepository).create(name: "differential").1.rawValue
        }

        func dependencies(trusted: Bool) -> ServerDependencies {
            Self.dependencies(
                repository: fixture.repository, keys: keyRepository, tokens: fixture.tokens, trusted: trusted)
        }

        /// `repository` behind caches that are trusted or not, and `keys` behind a key cache of the same kind.
        static func dependencies(
            repository: any CollaborationRepository, keys: InMemoryServiceKeyRepository, tokens: TokenVerifier,
            trusted: Bool
        ) -> ServerDependencies {
            ServerDependencies(
                repository: repository,
                keys: ServiceKeyService(repository: keys, cache: ServiceKeyCache(), isCacheTrusted: { trusted }),
                tokens: tokens, publicBaseURL: URL(string: "https://rbac.test")!,
                checker: PermissionChecker(
                    repository: repository, cache: PermissionCache(), isCacheTrusted: { trusted }),
                budgets: InMemoryBudgetRepository(), isReady: { true })
        }

        func request(
            _ body: String, key: String? = nil, contentType: String = "application/json", version: String = "HTTP/1.1",
            connection: String? = nil
        ) -> String {
            Self.request(body, key: key ?? self.key, contentType: contentType, version: version, connection: connection)
        }

        /// `POST /v1/check` with `body`, as raw bytes to send.
        static func request(
            _ body: String, key: String, contentType: String = "application/json", version: String = "HTTP/1.1",
            connection: String? = nil
        ) -> String {
            "POST /v1/check \(version)\r\nHost: rbac.test\r\nAuthorization: Bearer \(key)\r\n"
                + (connection.map { "Connection: \($0)\r\n" } ?? "")
                + "Content-Type: \(contentType)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        }
    }

    @Test("a few hundred random checks, pipelined too, give the same status, fields and body on both paths")
    func sameAnswers() async throws {
        let servers = try await Servers()
        let fixture = servers.fixture
        func request(_ body: String, key: String? = nil, contentType: String = "application/json") -> String {
            servers.request(body, key: key, contentType: contentType)
        }
        func check(user: UUID, _ permission: String = "budget.edit", couple: String? = nil, extra: String = "")
            -> String
        {
            #"{"couple_id":"\#(couple ?? fixture.couple.uuidString)","user_id":"\#(user)","permission":"\#(permission)"\#(extra)}"#
        }
        let ownerSet = await fixture.repository.permissionSet(couple: fixture.couple, user: fixture.owner)
        let revision = try #require(ownerSet.revision)
        let unknownKey = "rbk_" + String(repeating: "A", count: 42) + "E"
        let kinds: [String] = [
            request(check(user: fixture.owner)),
            request(check(user: fixture.owner, "budget.view")),
            request(check(user: fixture.invitee)),
            request(check(user: UUID())),
            request(check(user: fixture.owner, couple: UUID().uuidString)),
            request(check(user: fixture.owner, extra: #","min_revision":\#(revision)"#)),
            request(check(user: fixture.owner, extra: #","min_revision":\#(revision + 5)"#)),
            request(check(user: fixture.owner, "budget.frobnicate")),
            request(check(user: fixture.owner, couple: "not-a-uuid")),
            request(check(user: fixture.owner), key: unknownKey),
            request(check(user: fixture.owner), contentType: "text/plain"),
            request(#"{"couple_id":"\#(fixture.couple)","#),
            request(check(user: fixture.owner, extra: #","note":"x""#)),
            // A check names its user in the body; a header naming one is refused, not passed over.
            request(check(user: fixture.owner)).replacingOccurrences(
                of: "Host: rbac.test\r\n", with: "Host: rbac.test\r\nX-Acting-User: \(fixture.invitee)\r\n"),
            // A body in a content coding is refused; a credential after two spaces is one (RFC 9110, 11.4).
            request(check(user: fixture.owner)).replacingOccurrences(
                of: "Host: rbac.test\r\n", with: "Host: rbac.test\r\nContent-Encoding: gzip\r\n"),
            request(check(user: fixture.owner)).replacingOccurrences(of: "Bearer ", with: "Bearer  "),
            request(check(user: fixture.owner, extra: #","note":"\#(String(repeating: "x", count: 70_000))""#)),
        ]

        let rounds = 300
        let plan = (0..<rounds).map { _ in
            // One to three requests on one connection, sent in one write: pipelined when more than one.
            (0..<Int.random(in: 1...3)).map { _ in Int.random(in: 0..<kinds.count) }
        }
        func run(_ port: Int) async throws -> [[RawResponse]] {
            var answers: [[RawResponse]] = []
            for requests in plan {
                let bytes = Array(requests.map { kinds[$0] }.joined().utf8)
                // An oversized body ends the connection after its answer: nothing after it is answered.
                let last = requests.firstIndex(of: kinds.count - 1).map { $0 + 1 } ?? requests.count
                answers.append(try await Self.exchange(port: port, bytes, responses: last))
            }
            return answers
        }
        let fast = try await Self.serving(servers.dependencies(trusted: true)) { try await run($0) }
        let route = try await Self.serving(servers.dependencies(trusted: false)) { try await run($0) }
        var statuses: Set<String> = []
        for (index, (fastAnswers, routeAnswers)) in zip(fast, route).enumerated() {
            #expect(fastAnswers == routeAnswers, "round \(index), requests \(plan[index])")
            for answer in fastAnswers { statuses.insert(answer.statusLine) }
        }
        #expect(statuses.count >= 5, "the plan reached allowed, denied and error answers: \(statuses.sorted())")
    }

    @Test(
        "both paths close the connection after an answer exactly when the request does not keep it alive",
        arguments: [
            ("HTTP/1.1", nil, false), ("HTTP/1.1", "Close", true), ("HTTP/1.1", "keep-alive, CLOSE", true),
            ("HTTP/1.1", "te,close", true), ("HTTP/1.0", nil, true), ("HTTP/1.0", "Keep-Alive", false),
        ] as [(String, String?, Bool)])
    func connectionClose(version: String, connection: String?, closes: Bool) async throws {
        let servers = try await Servers()
        let check = servers.request(
            #"{"couple_id":"\#(servers.fixture.couple)","user_id":"\#(servers.fixture.owner)","permission":"budget.edit"}"#,
            version: version, connection: connection)
        // Two checks in one write: a connection kept alive answers both; one that closes answers the first and
        // ends, so the second is never answered.
        let twice = Array((check + check).utf8)
        for trusted in [true, false] {
            let answers = try await Self.serving(servers.dependencies(trusted: trusted)) { port in
                try await Self.exchange(port: port, twice, responses: closes ? nil : 2)
            }
            #expect(answers.map(\.statusLine) == Array(repeating: "HTTP/1.1 200 OK", count: closes ? 1 : 2))
        }
    }

    @Test("a check without a valid key is answered 401 on both paths without waiting for its body")
    func unauthorizedBeforeBody() async throws {
        let servers = try await Servers()
        for (trusted, authorization) in [true, false].flatMap({ t in
            ["", "Authorization: Bearer rbk_nope\r\n"].map { (t, $0) }
        }) {
            // The head promises a body that never comes.
            let head =
                "POST /v1/check HTTP/1.1\r\nHost: rbac.test\r\n\(authorization)"
                + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            let answers = try await Self.serving(servers.dependencies(trusted: trusted)) { port in
                try await Self.exchange(port: port, Array(head.utf8), responses: 1)
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 401 Unauthorized"], "trusted: \(trusted), \(authorization)")
        }
    }

    @Test(
        "a body in chunked alone, however the coding is spelled, is read as any other",
        arguments: ["chunked", "Chunked ", "CHUNKED"])
    func chunkedBody(coding: String) async throws {
        let servers = try await Servers()
        let body =
            #"{"couple_id":"\#(servers.fixture.couple)","user_id":"\#(servers.fixture.owner)","permission":"budget.edit"}"#
        let request =
            "POST /v1/check HTTP/1.1\r\nHost: rbac.test\r\nAuthorization: Bearer \(servers.key)\r\nConnection: close\r\n"
            + "Transfer-Encoding: \(coding)\r\n\r\n\(String(body.utf8.count, radix: 16))\r\n\(body)\r\n0\r\n\r\n"
        for trusted in [true, false] {
            let answers = try await Self.serving(servers.dependencies(trusted: trusted)) { port in
                try await Self.exchange(port: port, Array(request.utf8), responses: nil)
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 200 OK"], "\(coding), trusted: \(trusted)")
            #expect(
                answers.first.map { String(decoding: $0.body, as: UTF8.self) }?.contains(#""allowed":true"#) == true)
        }
    }

    @Test(
        "a request that breaks HTTP/1.1's rules, or has a transfer coding but chunked, is answered 400 after the answers owed before it, and the connection closes",
        arguments: [
            ("GET /health HTTP/1.1\r\nHost rbac.test\r\n\r\n", "HTTP/1.1 400 Bad Request"),
            ("GET /health HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request"),
            ("GET /health HTTP/1.1\r\nHost: a.test\r\nhost: b.test\r\n\r\n", "HTTP/1.1 400 Bad Request"),
            (
                "POST /v1/check HTTP/1.1\r\nHost: rbac.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                "HTTP/1.1 400 Bad Request"
            ),
            (
                "POST /v1/check HTTP/1.1\r\nHost: rbac.test\r\nTransfer-Encoding: x-custom\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 400 Bad Request"
            ),
            ("GET /health HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK"),
        ] as [(String, String)])
    func brokenRequest(_ second: String, answer: String) async throws {
        let servers = try await Servers()
        let check = servers.request(
            #"{"couple_id":"\#(servers.fixture.couple)","user_id":"\#(servers.fixture.owner)","permission":"budget.edit"}"#
        )
        // The check after the second request is never answered: the connection closes after the 400, and after the
        // answer to an HTTP/1.0 request.
        let bytes = Array((check + second + check).utf8)
        for trusted in [true, false] {
            let answers = try await Self.serving(servers.dependencies(trusted: trusted)) { port in
                try await Self.exchange(port: port, bytes, responses: nil)
            }
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 200 OK", answer], "trusted: \(trusted)")
        }
    }
}
