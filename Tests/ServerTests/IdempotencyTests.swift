import Collaboration
import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import Storage
import Synchronization
import TestSupport
import Testing

@testable import Server

@Suite("Idempotency-Key (PostgreSQL)")
struct IdempotencyTests {
    /// A test client over the PostgreSQL service with one expense, and the calls the tests make.
    private struct Payments: Sendable {
        let client: any TestClientProtocol
        let fixture: DocumentedService
        let expense: String

        var base: String { "/v1/couples/\(fixture.couple)/budget" }

        func pay(_ body: String, key: String?, apiKey: String? = nil) async throws -> (HTTPResponse.Status, String) {
            var headers = Fixture.keyHeader(apiKey ?? fixture.apiKey, actingAs: fixture.owner)
            if let key { headers[.idempotencyKey] = key }
            return try await client.execute(
                uri: "\(base)/expenses/\(expense)/payments", method: .post, headers: headers,
                body: ByteBuffer(string: body)
            ) { ($0.status, String(buffer: $0.body)) }
        }

        func count() async throws -> Int {
            try await client.execute(
                uri: "\(base)/expenses/\(expense)/payments", method: .get,
                headers: fixture.keyHeader(actingAs: fixture.owner)
            ) { (try JSONSerialization.jsonObject(with: Data(buffer: $0.body)) as? [Any])?.count ?? -1 }
        }
    }

    private func withPayments(_ body: @escaping @Sendable (Payments) async throws -> Void) async throws {
        try await DocumentedService.with(.postgres) { fixture in
            try await Application(router: buildRouter(fixture.dependencies)).test(.router) { client in
                let expense = try await client.execute(
                    uri: "/v1/couples/\(fixture.couple)/budget/expenses", method: .post,
                    headers: fixture.keyHeader(actingAs: fixture.owner),
                    body: ByteBuffer(string: #"{"name":"Deposit","amount":1200}"#)
                ) {
                    try #require(
                        (try JSONSerialization.jsonObject(with: Data(buffer: $0.body)) as? [String: Any])?["id"]
                            as? String)
                }
                try await body(Payments(client: client, fixture: fixture, expense: expense))
            }
        }
    }

    private static func code(_ body: String) -> String? {
        ((try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: [String: String]])?["error"]?["code"]
    }

    @Test(
        "a payment sent again with its key is made once, answered as the first time; another request with the key is refused"
    )
    func sentAgain() async throws {
        try await withPayments { payments in
            let first = try await payments.pay(#"{"amount":400}"#, key: "pay-1")
            #expect(first.0 == .created)
            let again = try await payments.pay(#"{"amount":400}"#, key: "pay-1")
            #expect(again == first, "the same answer, byte for byte")
            #expect(try await payments.count() == 1)
            let other = try await payments.pay(#"{"amount":5}"#, key: "pay-1")
            #expect(other.0 == .unprocessableContent && Self.code(other.1) == "idempotency_key_reused")
            #expect(try await payments.count() == 1)

            // Keys are the service key's own: another backend's pay-1 is its own payment.
            let otherService = try await payments.fixture.dependencies.keys.create(name: "gifts").1.rawValue
            #expect(try await payments.pay(#"{"amount":400}"#, key: "pay-1", apiKey: otherService).0 == .created)
            #expect(try await payments.count() == 2)

            // A refusal changed nothing and is not kept: the key may carry the request made right.
            let refused = try await payments.pay(#"{"amount":-1}"#, key: "pay-2")
            #expect(refused.0 == .badRequest)
            #expect(try await payments.pay(#"{"amount":1}"#, key: "pay-2").0 == .created)
            #expect(try await payments.count() == 3)
            let metrics = String(buffer: ByteBuffer(bytes: payments.fixture.dependencies.metrics.emitToBuffer()))
            for (outcome, count) in [("ran", 4), ("replayed", 1), ("reused", 1), ("running", 0)] {
                #expect(
                    metrics.contains(#"rbac_idempotent_requests_total{outcome="\#(outcome)"} \#(count)"#), "\(outcome)")
            }
        }
    }

    @Test(
        "a malformed Idempotency-Key is refused with 400 and changes nothing",
        arguments: ["", "a b", String(repeating: "k", count: 256)])
    func malformed(_ key: String) async throws {
        try await withPayments { payments in
            let refused = try await payments.pay(#"{"amount":400}"#, key: key)
            #expect(refused.0 == .badRequest && Self.code(refused.1) == "invalid_input")
            #expect(try await payments.count() == 0)
        }
    }

    @Test("a payment sent again once its couple is deleted runs again, and is refused; the deletion is replayed")
    func coupleDeleted() async throws {
        try await withPayments { payments in
            let fixture = payments.fixture
            #expect(try await payments.pay(#"{"amount":400}"#, key: "pay-1").0 == .created)
            var headers = fixture.keyHeader(actingAs: fixture.owner)
            headers[.idempotencyKey] = "goodbye"
            func delete() async throws -> HTTPResponse.Status {
                try await payments.client.execute(
                    uri: "/v1/couples/\(fixture.couple)", method: .delete, headers: headers
                ) { $0.status }
            }
            #expect(try await delete() == .noContent)
            let again = try await payments.pay(#"{"amount":400}"#, key: "pay-1")
            // Refused as any request for a couple the acting user is not in: whether it exists is not told.
            #expect(again.0 == .forbidden && Self.code(again.1) == "permission_denied", "\(again)")
            #expect(try await delete() == .noContent, "the deletion's own answer, which names nothing, was not kept")
        }
    }

    @Test("an invitation sent again with its key is refused as done: its token is kept nowhere")
    func invitationTokenNotKept() async throws {
        try await withPayments { payments in
            let fixture = payments.fixture
            var headers = fixture.keyHeader(actingAs: fixture.owner)
            headers[.idempotencyKey] = "invite-1"
            func invite() async throws -> (HTTPResponse.Status, String) {
                try await payments.client.execute(
                    uri: "/v1/couples/\(fixture.couple)/invitations", method: .post, headers: headers,
                    body: ByteBuffer(string: #"{"role":"viewer"}"#)
                ) { ($0.status, String(buffer: $0.body)) }
            }
            let issued = try await invite()
            #expect(issued.0 == .created)
            let token = try #require(
                (try JSONSerialization.jsonObject(with: Data(issued.1.utf8)) as? [String: Any])?["token"] as? String)
            let again = try await invite()
            #expect(again.0 == .conflict && Self.code(again.1) == "answer_not_kept")
            #expect(!again.1.contains(token))
            let kept = try await #require(fixture.pool).query(
                "SELECT coalesce(encode(body, 'escape'), '') AS body, withheld FROM idempotent_requests")
            #expect(try kept.allSatisfy { try !$0.decode("body", as: String.self).contains(token) })
            #expect(try kept.contains { try $0.decode("withheld", as: Bool.self) })
        }
    }

    @Test("requests with one key at once make one payment: the others are answered alike, or told it is running")
    func sentAtOnce() async throws {
        try await withPayments { payments in
            for round in 0..<20 {
                let answers = try await race(4) { _, go in
                    await go()
                    return try await payments.pay(#"{"amount":10}"#, key: "race-\(round)")
                }
                let made = answers.filter { $0.0 == .created }
                let running = answers.filter { $0.0 == .conflict && Self.code($0.1) == "idempotency_key_in_use" }
                #expect(!made.isEmpty && made.count + running.count == 4, "round \(round): \(answers)")
                #expect(Set(made.map(\.1)).count == 1, "round \(round): one answer")
                #expect(try await payments.count() == round + 1, "round \(round)")
            }
        }
    }

    /// Sends a request, and gives its answer.
    private typealias Send = @Sendable () async throws -> (HTTPResponse.Status, String)

    /// `body` with a `send` of `POST /v1/things` with Idempotency-Key `k`, in a task of its own, behind the
    /// middleware over the PostgreSQL store that fails as `Unheard` is told; `handle` answers it, by run (from 1),
    /// over the store's pool. Returns the runs.
    private func withThings(
        keepingFailing: Int = 0, renewalsFailing: Int = 0, renewEvery: Duration = .seconds(10),
        handle: @escaping @Sendable (_ run: Int, PostgresConnectionPool) async throws -> Response,
        _ body: @escaping @Sendable (@escaping Send, Unheard) async throws -> Void
    ) async throws -> Int {
        let runs = Mutex(0)
        try await DocumentedService.with(.postgres) { fixture in
            let pool = try #require(fixture.pool)
            let store = Unheard(
                PostgresIdempotentRequests(pool: pool), keeping: keepingFailing, renewals: renewalsFailing)
            let router = Router(context: AppRequestContext.self)
            router.add(middleware: APIErrorMiddleware(failures: FailureLog()))
            router.group("v1").add(middleware: ServiceKeyMiddleware(keys: fixture.dependencies.keys))
                .add(
                    middleware: IdempotencyMiddleware(
                        store: store, secretAnswers: [], metrics: NOOPMetricsHandler.instance, renewEvery: renewEvery)
                )
                .post("things") { _, _ -> Response in
                    try await handle(
                        runs.withLock {
                            $0 += 1
                            return $0
                        }, pool)
                }
            try await Application(router: router).test(.router) { client in
                try await body(
                    {
                        try await Task {
                            try await client.execute(
                                uri: "/v1/things", method: .post,
                                headers: [.authorization: "Bearer \(fixture.apiKey)", .idempotencyKey: "k"]
                            ) { ($0.status, String(buffer: $0.body)) }
                        }.value
                    }, store)
            }
        }
        return runs.withLock { $0 }
    }

    private static func answer(_ run: Int) -> Response {
        Response(status: .created, body: .init(byteBuffer: ByteBuffer(string: #"{"run":\#(run)}"#)))
    }

    @Test("a request whose task is cancelled as it answers (its client gone) still has its answer kept")
    func cancelledAsItAnswers() async throws {
        let runs = try await withThings { run, _ in
            withUnsafeCurrentTask { $0?.cancel() }
            return Self.answer(run)
        } _: { send, _ in
            for _ in 0..<2 {
                let answer = try await send()
                #expect(answer == (.created, #"{"run":1}"#))
            }
        }
        #expect(runs == 1)
    }

    /// The PostgreSQL store, but the first `keeping` answers to keep and keys to give up it is told of, and the
    /// first `renewals` renewals, fail, as they would while the database restarts.
    private final class Unheard: IdempotentRequestStore {
        let store: PostgresIdempotentRequests
        let keepingLeft: Mutex<Int>
        let renewalsLeft: Mutex<Int>
        /// The renewals made.
        let renewed = Mutex(0)

        init(_ store: PostgresIdempotentRequests, keeping: Int = 0, renewals: Int = 0) {
            self.store = store
            keepingLeft = Mutex(keeping)
            renewalsLeft = Mutex(renewals)
        }

        struct Failure: Error {}

        private static func fails(_ left: borrowing Mutex<Int>) -> Bool {
            left.withLock { (left: inout Int) in
                left -= 1
                return left >= 0
            }
        }

        func claim(
            key: UUID, idempotencyKey: String, fingerprint: [UInt8], couple: UUID?, holdFor: Duration
        ) async throws -> IdempotentRequest {
            try await store.claim(
                key: key, idempotencyKey: idempotencyKey, fingerprint: fingerprint, couple: couple, holdFor: holdFor)
        }
        func renew(_ claim: UUID, holdFor: Duration) async throws -> Bool {
            guard !Self.fails(renewalsLeft) else { throw Failure() }
            let held = try await store.renew(claim, holdFor: holdFor)
            renewed.withLock { $0 += 1 }
            return held
        }
        func record(_ claim: UUID, status: Int, body: [UInt8]?, withheld: Bool) async throws {
            guard !Self.fails(keepingLeft) else { throw Failure() }
            try await store.record(claim, status: status, body: body, withheld: withheld)
        }
        func release(_ claim: UUID) async throws {
            guard !Self.fails(keepingLeft) else { throw Failure() }
            try await store.release(claim)
        }
        func leaveUnconfirmed(_ claim: UUID) async throws { try await store.leaveUnconfirmed(claim) }
        func prune() async throws -> Int { try await store.prune() }
    }

    @Test(
        """
        what the database did not hear (an answer to keep, or a refused request's key to give up) it is told once it \
        does: sent meanwhile, the request is told it runs
        """,
        arguments: [false, true])
    func toldAgain(refusedFirst: Bool) async throws {
        let runs = try await withThings(keepingFailing: 2) { run, _ in
            if refusedFirst && run == 1 { throw APIError.badRequest("not yet") }
            return Self.answer(run)
        } _: { send, _ in
            #expect(try await send().0 == (refusedFirst ? .badRequest : .created))
            let running = try await send()
            #expect(running.0 == .conflict && Self.code(running.1) == "idempotency_key_in_use")
            let answer = refusedFirst ? #"{"run":2}"# : #"{"run":1}"#
            #expect(
                try await eventually(within: .seconds(10)) { try await send() == (.created, answer) },
                "never told: the request is still held")
        }
        #expect(runs == (refusedFirst ? 2 : 1))
    }

    @Test("a renewal the database did not hear is made again: the request still running keeps its key")
    func renewedAgain() async throws {
        let finish = Mutex(false)
        let runs = try await withThings(renewalsFailing: 1, renewEvery: .milliseconds(100)) { run, _ in
            while !finish.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
            return Self.answer(run)
        } _: { send, unheard in
            let first = Task { try await send() }
            #expect(
                try await eventually(within: .seconds(10)) { unheard.renewed.withLock { $0 } > 0 },
                "no renewal after the one that failed")
            let running = try await send()
            #expect(running.0 == .conflict && Self.code(running.1) == "idempotency_key_in_use")
            finish.withLock { $0 = true }
            #expect(try await first.value == (.created, #"{"run":1}"#))
        }
        #expect(runs == 1)
    }

    @Test(
        """
        a request whose connection ended as a statement of it that commits on its own was sent may have been done: \
        sent again, it is refused; one whose transaction was open then did nothing, and runs again
        """,
        arguments: [false, true])
    func unconfirmed(inTransaction: Bool) async throws {
        let runs = try await withThings { run, pool in
            if run > 1 { return Self.answer(run) }
            // As a repository does: its statement, and the domain error for what failed.
            let end: PostgresQuery = "SELECT pg_terminate_backend(pg_backend_pid())"
            do {
                if inTransaction {
                    _ = try await pool.withConnection { try await $0.withTransaction { try await $0.query(end) } }
                } else {
                    try await pool.query(end)
                }
                return Self.answer(1)
            } catch let error as PostgresError {
                throw domainError(error)
            }
        } _: { send, _ in
            #expect(try await send().0 == .serviceUnavailable)
            let again = try await send()
            if inTransaction {
                #expect(again == (.created, #"{"run":2}"#))
            } else {
                #expect(again.0 == .conflict && Self.code(again.1) == "outcome_unknown", "\(again)")
            }
        }
        #expect(runs == (inTransaction ? 2 : 1))
    }

    @Test("a service without a store refuses the header rather than doing the change unguarded")
    func withoutStore() async throws {
        let fixture = try await DocumentedService.inMemory()
        try await Application(router: buildRouter(fixture.dependencies)).test(.router) { client in
            var headers = fixture.keyHeader(actingAs: fixture.owner)
            headers[.idempotencyKey] = "k"
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/budget/scenarios", method: .post, headers: headers,
                body: ByteBuffer(string: #"{"name":"Main"}"#)
            ) { #expect($0.status == .badRequest) }
        }
    }
}
