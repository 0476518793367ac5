import Collaboration
import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Secrets
import Synchronization

extension HTTPField.Name {
    /// Names a change so that sending it again does it once (IETF draft-ietf-httpapi-idempotency-key-header).
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
}

/// A change sent with an `Idempotency-Key` runs once per service key and key: sent again with the same method,
/// target, acting user and body, it is answered as the first was, without running (a backend retrying after a
/// timeout records one payment, not two). While the first runs, the same is refused with 409 and `Retry-After`;
/// another request with a key already used, with 422. Only successes are kept, for the store's time (a day): a
/// refusal changed nothing, so the request may run again. An answer that held a secret (`secretAnswers`: an
/// invitation's token) is not kept: sent again, such a request is refused with 409 saying it was done.
///
/// A request holds its key while it runs, renewing the hold, so a request whose instance died runs again once the
/// hold lapses. What a request leaves (its answer kept, or its key given up) the store is told again until it hears
/// it, for as long as a hold lasts, the same request sent meanwhile being told it is running; a success it never
/// hears of (the database away that long) runs again when sent again. A request that failed after a statement of
/// it that could commit was sent (`UnconfirmedChanges`) may have been done: its key is kept, and the request sent
/// again refused with 409 saying so.
struct IdempotencyMiddleware: RouterMiddleware {
    let store: (any IdempotentRequestStore)?
    /// The routes (`METHOD /path/{parameter}`) whose successful answer holds a secret.
    let secretAnswers: Set<String>
    /// How often a running request renews its hold (less than half of `hold`).
    let renewEvery: Duration
    /// `rbac_idempotent_requests_total`, by outcome: how often clients send a change again, and what came of it.
    private let counted: [Outcome: Counter]

    enum Outcome: String, CaseIterable {
        case ran, replayed, running, reused, unconfirmed
        case notKept = "not_kept"
    }

    init(
        store: (any IdempotentRequestStore)?, secretAnswers: Set<String>, metrics: any MetricsFactory,
        renewEvery: Duration = .seconds(10)
    ) {
        self.store = store
        self.secretAnswers = secretAnswers
        self.renewEvery = renewEvery
        counted = Dictionary(
            uniqueKeysWithValues: Outcome.allCases.map {
                (
                    $0,
                    Counter(
                        label: "rbac_idempotent_requests_total", dimensions: [("outcome", $0.rawValue)],
                        factory: metrics)
                )
            })
    }

    /// How long a hold lasts unrenewed: three renewals by default, so that one can fail.
    static let hold = Duration.seconds(30)
    /// How often keeping an answer or giving a key up is tried again when the store did not hear it.
    static let bookkeepingAgainEvery = Duration.seconds(1)

    func handle(
        _ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        let fields = request.headers[values: .idempotencyKey]
        guard !fields.isEmpty, ![.get, .head, .options].contains(request.method) else {
            return try await next(request, context)
        }
        guard fields.count == 1, let key = fields.first, Self.takes(key) else {
            throw APIError.badRequest("send one Idempotency-Key of 1 to 255 visible ASCII characters")
        }
        guard let store, let serviceKey = context.serviceKey else {
            throw APIError.badRequest("this server keeps no requests for Idempotency-Key")
        }
        var request = request
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        let acting = request.headers[values: .actingUser].joined(separator: ",")
        let fingerprint = Digest.sha256(
            Array("\(request.method.rawValue) \(request.uri.description)\n\(acting)\n".utf8)
                + body.readableBytesView)
        // Deleting the couple deletes the answers kept for it.
        let couple = context.parameters.get("couple").flatMap(UUID.init(parsing:))
        switch try await store.claim(
            key: serviceKey.id, idempotencyKey: key, fingerprint: fingerprint, couple: couple, holdFor: Self.hold)
        {
        case .claimed(let claim):
            counted[.ran]?.increment()
            return try await run(request, context, claim: claim, store: store, next: next)
        case .answered(let status, let body, withheld: false):
            counted[.replayed]?.increment()
            return Response(
                status: .init(code: status),
                headers: body == nil ? PermissionAPIController.privateFields : PermissionAPIController.jsonFields,
                body: body.map { .init(byteBuffer: ByteBuffer(bytes: $0)) } ?? .init())
        case .answered(_, _, withheld: true):
            counted[.notKept]?.increment()
            throw APIError(
                .conflict, code: .answerNotKept,
                """
                the request first sent with this Idempotency-Key succeeded, and its answer held an invitation's \
                token, which is kept only as a hash: list the couple's invitations and resend the one it made for \
                a new link
                """)
        case .running:
            counted[.running]?.increment()
            throw APIError(
                .conflict, code: .idempotencyKeyInUse,
                "a request sent with this Idempotency-Key is running; send it again once that one is answered",
                headers: [.retryAfter: "1"])
        case .unconfirmed:
            counted[.unconfirmed]?.increment()
            throw APIError(
                .conflict, code: .outcomeUnknown,
                """
                the request first sent with this Idempotency-Key failed as the database went away while it was \
                being done, and may or may not have been: look whether it was, and if not, send it with a new key
                """)
        case .otherRequest:
            counted[.reused]?.increment()
            throw APIError(
                .unprocessableContent, code: .idempotencyKeyReused,
                """
                this Idempotency-Key was sent with another request (method, path, query, X-Acting-User or body): \
                use a new key for a new request
                """)
        }
    }

    /// Whether `key` is one this service takes: 1 to 255 visible ASCII characters, as openapi.json says.
    static func takes(_ key: String) -> Bool {
        (1...255).contains(key.utf8.count) && key.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// Runs the request that claimed its key, holding the claim while it runs, and keeps its answer if it
    /// succeeded; else gives the key up.
    private func run(
        _ request: Request, _ context: AppRequestContext, claim: UUID, store: any IdempotentRequestStore,
        next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        let renewal = Task {
            while true {
                try await Task.sleep(for: renewEvery)
                // One the database did not hear (a restart) is made again at the next, before the hold lapses;
                // false: the hold lapsed already, and the key is another request's.
                if (try? await store.renew(claim, holdFor: Self.hold)) == false { return }
            }
        }
        let unconfirmed = UnconfirmedChanges()
        let result: Result<Response, any Error>
        do {
            result = .success(
                try await UnconfirmedChanges.$current.withValue(unconfirmed) { try await next(request, context) })
        } catch { result = .failure(error) }
        renewal.cancel()
        guard case .success(var response) = result, (200..<300).contains(response.status.code) else {
            if unconfirmed.any {
                // Sent again, it is refused: it may have been done.
                await Self.settle("keep the unknown outcome of", logger: context.logger) {
                    try await store.leaveUnconfirmed(claim)
                }
            } else {
                await Self.settle("give up the key of", logger: context.logger) { try await store.release(claim) }
            }
            return try result.get()
        }
        let sink = BodySink()
        try await response.body.write(sink)
        let body = sink.bytes
        response.body = .init(byteBuffer: ByteBuffer(bytes: body))
        let withheld = secretAnswers.contains("\(request.method.rawValue) \(context.endpointPath ?? "")")
        let status = response.status.code
        // The change is made, and the client is told so even when its answer is kept only later.
        await Self.settle("keep the answer to", logger: context.logger) {
            try await store.record(
                claim, status: status, body: withheld || body.isEmpty ? nil : body, withheld: withheld)
        }
        return response
    }

    /// Runs a claim's bookkeeping (`what` it does to the request) to its end even when the request's task was
    /// cancelled (its client went away, say), which would fail its statement: a change made and left unrecorded
    /// runs again when sent again. Should the database not hear it (a restart, a failover), it is tried again
    /// every `bookkeepingAgainEvery` in the background for as long as a hold lasts, the same request sent
    /// meanwhile being told it is running; after that, its hold lapses, and sent again it runs again.
    private static func settle(
        _ what: String, logger: Logger, _ bookkeeping: @escaping @Sendable () async throws -> Void
    ) async {
        let failed = await Task {
            do { try await bookkeeping() } catch { return true }
            return false
        }.value
        guard failed else { return }
        Task {
            let until = ContinuousClock.now + hold
            var failure: any Error
            repeat {
                try? await Task.sleep(for: bookkeepingAgainEvery)
                do { return try await bookkeeping() } catch { failure = error }
            } while ContinuousClock.now < until
            logger.warning(
                "could not \(what) a request sent with an Idempotency-Key",
                metadata: ["error": "\(failure)"])
        }
    }
}

/// Collects a response's body, to keep it.
private struct BodySink: ResponseBodyWriter {
    private final class Bytes: Sendable {
        let value = Mutex<[UInt8]>([])
    }
    private let collected = Bytes()

    var bytes: [UInt8] { collected.value.withLock { $0 } }

    mutating func write(_ buffer: ByteBuffer) async throws {
        collected.value.withLock { $0.append(contentsOf: buffer.readableBytesView) }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
