import Foundation
import TestSupport
import Testing

@testable import Server

/// What follows from the answers a connection owes, over real sockets: connections left idle are closed after
/// the idle timeout (1 second here), connections in use, the fast path's included, are not; past the limit on
/// connections, one waits to be taken; a request that waits for `100 Continue` is told it, unless its body is
/// longer than the service takes.
@Suite("Requests in flight: idle connections, the connection limit and 100 Continue", .timeLimit(.minutes(1)))
struct RequestsInFlightTests {
    static let timeout = Duration.seconds(1)

    /// Reads from `connection` until the server closes it, and says how long after `since` that was. The server
    /// starts its clock a little before a client sees an answer end, so "after the timeout" reads as 0.9 s.
    static func secondsUntilClosed(_ connection: LoopbackConnection, since: ContinuousClock.Instant) throws -> Double {
        while try !connection.receive().isEmpty {}
        let elapsed = ContinuousClock.now - since
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// The next answer on `connection` (no more follows it here), or nil when the server closes the connection
    /// first.
    static func answer(_ connection: LoopbackConnection) throws -> CheckAnswerDifferentialTests.RawResponse? {
        var received: [UInt8] = []
        while CheckAnswerDifferentialTests.parse(received) == nil {
            let chunk = try connection.receive()
            guard !chunk.isEmpty else { return nil }
            received += chunk
        }
        return CheckAnswerDifferentialTests.parse(received)?.0
    }

    /// The status line of the next answer on `connection`, or nil when the server closes the connection first.
    static func statusLine(_ connection: LoopbackConnection) throws -> String? { try answer(connection)?.statusLine }

    @Test("a connection that sends nothing, or nothing after its answer, is closed once the timeout has passed")
    func closesIdle() async throws {
        let servers = try await CheckAnswerDifferentialTests.Servers()
        try await CheckAnswerDifferentialTests.serving(servers.dependencies(trusted: true), idleTimeout: Self.timeout) {
            port in
            let silent = try await onOwnThread {
                let opened = ContinuousClock.now
                return try Self.secondsUntilClosed(try LoopbackConnection(port: port), since: opened)
            }
            #expect(silent >= 0.9, "closed after \(silent) s")
            let afterAnswer = try await onOwnThread {
                let connection = try LoopbackConnection(port: port)
                try connection.send(Array("GET /health HTTP/1.1\r\nHost: rbac.test\r\n\r\n".utf8))
                let answer = try Self.statusLine(connection)
                let answered = ContinuousClock.now
                return (answer, try Self.secondsUntilClosed(connection, since: answered))
            }
            #expect(afterAnswer.0 == "HTTP/1.1 200 OK")
            #expect(afterAnswer.1 >= 0.9, "closed \(afterAnswer.1) s after the answer")
        }
    }

    /// What a slow client sends a piece at a time: header lines (never a whole head, so never a request part
    /// for the server to count), or the bytes of a body (each read, but the body never ends).
    enum Slowly: String, CaseIterable, Sendable {
        case head, body
    }

    @Test(
        "a request whose head or body comes a piece at a time, slower than the timeout allows in all, is cut off",
        arguments: Slowly.allCases)
    func closesSlowRequest(_ slowly: Slowly) async throws {
        let servers = try await CheckAnswerDifferentialTests.Servers()
        let (opening, piece): (String, @Sendable (Int) -> String) =
            switch slowly {
            case .head: ("GET /health HTTP/1.1\r\nHost: rbac.test\r\n", { "X-Slow: \($0)\r\n" })
            // The head of a check whose body is 100 bytes of JSON whitespace, then those bytes.
            case .body: (String(servers.request(String(repeating: " ", count: 100)).dropLast(100)), { _ in " " })
            }
        try await CheckAnswerDifferentialTests.serving(servers.dependencies(trusted: true), idleTimeout: Self.timeout) {
            port in
            let (pieces, seconds) = try await onOwnThread {
                let connection = try LoopbackConnection(port: port)
                let opened = ContinuousClock.now
                try connection.send(Array(opening.utf8))
                // One piece every 100 ms, for up to 8 s.
                var pieces = 0
                while pieces < 80, !connection.isClosedByPeer {
                    try? connection.send(Array(piece(pieces).utf8))
                    pieces += 1
                    Thread.sleep(forTimeInterval: 0.1)
                }
                return (pieces, try Self.secondsUntilClosed(connection, since: opened))
            }
            #expect(pieces < 80, "still open after 8 s of pieces of the \(slowly)")
            #expect(seconds >= 0.9, "closed after \(seconds) s")
        }
    }

    @Test("a connection sending checks that the fast path answers, more often than the timeout, stays open")
    func keepsBusyFastPath() async throws {
        let servers = try await CheckAnswerDifferentialTests.Servers()
        let check = servers.request(
            #"{"couple_id":"\#(servers.fixture.couple)","user_id":"\#(servers.fixture.owner)","permission":"budget.edit"}"#
        )
        try await CheckAnswerDifferentialTests.serving(servers.dependencies(trusted: true), idleTimeout: Self.timeout) {
            port in
            // The route answers the first check and caches the key; the fast path answers the rest.
            _ = try await CheckAnswerDifferentialTests.exchange(port: port, Array(check.utf8), responses: 1)
            let statuses = try await onOwnThread {
                let connection = try LoopbackConnection(port: port)
                var statuses: [String] = []
                let started = ContinuousClock.now
                // Three timeouts' worth of checks, one every 200 ms.
                while ContinuousClock.now - started < .seconds(3) {
                    try connection.send(Array(check.utf8))
                    statuses.append(try Self.statusLine(connection) ?? "closed")
                    Thread.sleep(forTimeInterval: 0.2)
                }
                return statuses
            }
            #expect(statuses.count >= 10 && statuses.allSatisfy { $0 == "HTTP/1.1 200 OK" }, "\(statuses)")
        }
    }

    @Test("past the limit a connection waits, its request unanswered, until one closes; /metrics shows the count")
    func connectionLimit() async throws {
        let servers = try await CheckAnswerDifferentialTests.Servers()
        try await CheckAnswerDifferentialTests.serving(servers.dependencies(trusted: true), maxConnections: 2) {
            port in
            let health = Array("GET /health HTTP/1.1\r\nHost: rbac.test\r\n\r\n".utf8)
            let metrics = Array("GET /metrics HTTP/1.1\r\nHost: rbac.test\r\n\r\n".utf8)
            let (answered, waiting, counted, afterClose, recounted) = try await onOwnThread {
                var first: LoopbackConnection? = try LoopbackConnection(port: port)
                let second = try LoopbackConnection(port: port)
                var answered: [String?] = []
                for connection in [first!, second] {
                    try connection.send(health)
                    answered.append(try Self.statusLine(connection))
                }
                // Connected (the kernel queues it for the listener) but not taken, so its request waits, while
                // the two taken go on being answered.
                let third = try LoopbackConnection(port: port)
                try third.send(health)
                for _ in 0..<20 {
                    try second.send(health)
                    answered.append(try Self.statusLine(second))
                }
                let waiting = third.hasUnread
                try first!.send(metrics)
                let counted = try Self.answer(first!)?.body
                first = nil
                let afterClose = try Self.statusLine(third)
                try second.send(metrics)
                return (answered, waiting, counted, afterClose, try Self.answer(second)?.body)
            }
            #expect(answered.count == 22 && answered.allSatisfy { $0 == "HTTP/1.1 200 OK" }, "\(answered)")
            #expect(!waiting, "the third connection was answered while two were open")
            func gauges(_ body: [UInt8]?) -> [String] {
                String(decoding: body ?? [], as: UTF8.self).split(separator: "\n").map(String.init)
                    .filter { $0.hasPrefix("rbac_http_connections") }.sorted()
            }
            #expect(gauges(counted) == ["rbac_http_connections 2.0", "rbac_http_connections_max 2.0"])
            #expect(String(decoding: counted ?? [], as: UTF8.self).contains("# HELP rbac_http_connections_max "))
            #expect(afterClose == "HTTP/1.1 200 OK", "taken once the first closed")
            #expect(gauges(recounted) == ["rbac_http_connections 2.0", "rbac_http_connections_max 2.0"])
        }
    }

    @Test(
        "a check that waits for 100 Continue is told it before it sends its body, on both paths; HTTP/1.0 is not",
        arguments: [true, false])
    func continueBeforeBody(trusted: Bool) async throws {
        let servers = try await CheckAnswerDifferentialTests.Servers()
        let body =
            #"{"couple_id":"\#(servers.fixture.couple)","user_id":"\#(servers.fixture.owner)","permission":"budget.edit"}"#
        let check = servers.request(body)
        let waiting = check.replacingOccurrences(of: "\r\n\r\n", with: "\r\nExpect: 100-continue\r\n\r\n")
        let head = String(waiting.dropLast(body.utf8.count))
        try await CheckAnswerDifferentialTests.serving(servers.dependencies(trusted: trusted)) { port in
            // The first check caches the key, for the fast path to answer the rest when it may.
            _ = try await CheckAnswerDifferentialTests.exchange(port: port, Array(check.utf8), responses: 1)
            let statuses = try await onOwnThread {
                let connection = try LoopbackConnection(port: port)
                try connection.send(Array(head.utf8))
                let told = try Self.statusLine(connection)
                try connection.send(Array(body.utf8))
                return [told, try Self.statusLine(connection)]
            }
            #expect(statuses == ["HTTP/1.1 100 Continue", "HTTP/1.1 200 OK"])
            // HTTP/1.0 clients do not know 1xx answers: sent head and body at once, it gets its answer alone.
            let old = waiting.replacingOccurrences(of: "HTTP/1.1\r\n", with: "HTTP/1.0\r\n")
            let answers = try await CheckAnswerDifferentialTests.exchange(port: port, Array(old.utf8), responses: nil)
            #expect(answers.map(\.statusLine) == ["HTTP/1.1 200 OK"])
        }
    }

    @Test(
        "a body declared longer than the service takes is refused from its head, and a client waiting for 100 Continue is not told it but closed on"
    )
    func refusesDeclaredOversizedBody() async throws {
        let servers = try await CheckAnswerDifferentialTests.Servers()
        // A check's head declaring 10 MB: nothing reads that much, and none of it, or only its first bytes, is sent.
        let head = servers.request("").replacingOccurrences(
            of: "Content-Length: 0\r\n", with: "Content-Length: 10000000\r\n")
        let waiting = head.replacingOccurrences(of: "\r\n\r\n", with: "\r\nExpect: 100-continue\r\n\r\n")
        try await CheckAnswerDifferentialTests.serving(servers.dependencies(trusted: true)) { port in
            let limit = "the request body is too large: this service takes at most 65536 bytes"
            // Answered without waiting for 64 KiB of the body: the client may read its answer and stop sending.
            let sending = try await CheckAnswerDifferentialTests.exchange(
                port: port, Array((head + "{ ").utf8), responses: 1)
            #expect(sending.map(\.statusLine) == ["HTTP/1.1 413 Payload Too Large"])
            #expect(sending.allSatisfy { String(decoding: $0.body, as: UTF8.self).contains(limit) }, "\(sending)")
            // Never told to send the body; the connection closes after the answer (exchange throws when a
            // connection is still open after 10 seconds), which says so.
            let held = try await CheckAnswerDifferentialTests.exchange(port: port, Array(waiting.utf8), responses: nil)
            #expect(held.map(\.statusLine) == ["HTTP/1.1 413 Payload Too Large"])
            #expect(held.allSatisfy { $0.headers.contains("Connection: close") }, "\(held)")
        }
    }
}
