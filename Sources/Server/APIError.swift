import Collaboration
import Foundation
import Hummingbird
import Logging
import Synchronization

/// An error as the API answers it: a status and `{"error": {"code", "message"}}`. Messages never hold tokens,
/// keys or SQL.
public struct APIError: HTTPResponseError, Sendable {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// Sent besides the content type (`Allow` with a 405).
    public let headers: HTTPFields
    /// What the operator's log shows and the client is not told (`CodedError.detail`).
    public let detail: String?
    /// For a browser: the HTML page answered instead of the JSON body.
    private(set) var page: String?

    /// The codes the API answers with besides the domains' refusals (`CollaborationErrorCode`): about the request
    /// itself, not what it asks for. The two together are every code a client can meet; openapi.json lists them.
    public enum Code: String, CaseIterable, Sendable {
        case unauthorized
        case methodNotAllowed = "method_not_allowed"
        case bodyTooLarge = "body_too_large"
        case unsupportedMediaType = "unsupported_media_type"
        case invalidRequest = "invalid_request"
        case invitationNotValid = "invitation_not_valid"
        case tooManyAttempts = "too_many_attempts"
        case missingDocument = "missing_document"
        case idempotencyKeyInUse = "idempotency_key_in_use"
        case idempotencyKeyReused = "idempotency_key_reused"
        case answerNotKept = "answer_not_kept"
        case outcomeUnknown = "outcome_unknown"
    }

    public init(_ status: HTTPResponse.Status, code: Code, _ message: String, headers: HTTPFields = [:]) {
        self.init(status, code: code.rawValue, message, headers: headers)
    }

    private init(
        _ status: HTTPResponse.Status, code: String, _ message: String, headers: HTTPFields, detail: String? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.detail = detail
    }

    /// The same error answered to a browser with `page`.
    func shown(as page: String) -> APIError {
        var shown = self
        shown.page = page
        return shown
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response: Response
        if let page {
            response = InvitationController.html(status, page)
        } else {
            let data = try PermissionAPIController.encoder.encode(ErrorBody(code: code, message: message))
            response = Response(status: status, body: .init(byteBuffer: ByteBuffer(bytes: data)))
            for field in PermissionAPIController.jsonFields { response.headers[field.name] = field.value }
        }
        for field in headers { response.headers[field.name] = field.value }
        // The database is mostly back within seconds (a restart, a failover); a client, proxy or load balancer
        // that honours this waits that long instead of retrying at once, many times over.
        if status == .serviceUnavailable { response.headers[.retryAfter] = "1" }
        return response
    }

    public static func badRequest(_ message: String) -> APIError {
        APIError(CollaborationError(.invalidInput, message))
    }
    public static let unauthorized = APIError(
        .unauthorized, code: .unauthorized, "a valid service API key is required")
    /// A body over `AppRequestContext.maxBody`; `closing` says the connection closes after the answer.
    public static func bodyTooLarge(closing: Bool = false) -> APIError {
        APIError(
            .contentTooLarge, code: .bodyTooLarge,
            "the request body is too large: this service takes at most \(AppRequestContext.maxBody) bytes",
            headers: closing ? [.connection: "close"] : [:])
    }
    public static let unavailable = APIError(
        CollaborationError(.unavailable, "the database is unavailable; try again shortly"))

    /// A method the route does not take; `allow` lists those it does, as the `Allow` header does.
    public static func methodNotAllowed(_ method: HTTPRequest.Method, allow: String) -> APIError {
        APIError(
            .methodNotAllowed, code: .methodNotAllowed,
            "this route does not take \(method.rawValue); it takes \(allow)",
            headers: [.allow: allow])
    }

    /// The HTTP answer for a domain refusal.
    public init(_ error: CollaborationError) {
        let status: HTTPResponse.Status =
            switch error.code {
            case .invalidInput, .invalidPolicy: .badRequest
            case .notAuthenticated: .unauthorized
            case .permissionDenied, .roleNotGrantable, .invitationEmailMismatch: .forbidden
            case .notFound: .notFound
            case .alreadyExists, .lastOwner, .invitationUsed, .invitationRevoked, .invitationExpired, .quotaExceeded,
                .roleInUse, .primaryScenario, .inProgress:
                .conflict
            case .rateLimited: .tooManyRequests
            case .unavailable: .serviceUnavailable
            }
        // Whole seconds, rounded up: a client that waits that long is not refused again.
        let wait = error.retryAt.map { max(1, Int($0.timeIntervalSinceNow.rounded(.up))) }
        self.init(
            status, code: error.code.rawValue, error.message, headers: wait.map { [.retryAfter: String($0)] } ?? [:],
            detail: error.detail)
    }

    /// Any error from a handler as an APIError; unexpected ones become a 503 that says nothing internal, so a
    /// check never answers "allowed" when it could not ask.
    public static func from(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError: error
        case let error as any CodedError: APIError(CollaborationError(error))
        case let error as any HTTPResponseError where error.status == .contentTooLarge: .bodyTooLarge()
        case let error as HTTPError where error.status == .badRequest:
            // Hummingbird's decoding failures: say what is expected without echoing the body.
            .badRequest("the request body is not JSON of the expected shape")
        case let error as HTTPError where error.status == .notFound:
            // The router's answer to a path the API does not have.
            APIError(CollaborationError(.notFound, error.body ?? "there is no such route; see GET /openapi.json"))
        case let error as HTTPError where error.status.code < 500:
            APIError(error.status, code: .invalidRequest, error.body ?? "the request is malformed")
        case let error as any HTTPResponseError where error.status.code < 500:
            APIError(error.status, code: .invalidRequest, "the request is malformed")
        case is DecodingError:
            .badRequest("the request body is not the expected JSON")
        default:
            .unavailable
        }
    }
}

/// Whether the service's requests fail with 503, and the lines that say so: the first 503 after a success logs an
/// error with the reason the client was given, and the first success once no 503 has come for `quietPeriod` logs
/// that requests succeed again. A line per change of state, not one per failed request (thousands a second under
/// load), nor one per turn while some requests fail and others succeed (a Citus worker down fails only its
/// couples' budgets; a pool that makes some requests wait too long fails only those). One is shared by the router
/// and `CheckFastPath`, whose checks answered from the database are successes too: a service that only answers
/// checks would otherwise never say that it is well again. The route metrics count every 503.
final class FailureLog: Sendable {
    /// How long requests must have gone without a 503 before a success is news.
    static var quietPeriod: Duration { .seconds(10) }

    private struct State {
        var failing = false
        var last: ContinuousClock.Instant?
    }
    private let state = Mutex(State())
    /// `state.failing`, which every success reads without the lock.
    private let failing = Atomic<Bool>(false)
    private let now: @Sendable () -> ContinuousClock.Instant

    init(now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) { self.now = now }

    /// Notes a 503 answered for `error`, logging the first since requests last succeeded.
    func failed(_ error: any Error, answered: APIError, logger: Logger) {
        let first = state.withLock { state in
            defer { (state.failing, state.last) = (true, now()) }
            failing.store(true, ordering: .relaxed)
            return !state.failing
        }
        guard first else { return }
        // Why, as the client was told: most often the database is away, but a delivery key that is not the
        // database's is a 503 too, and waiting for the database would not end that one. And the database's own
        // words on it, which the client is not told: they name its hosts, ports and logins.
        var metadata: Logger.Metadata = ["error": "\(type(of: error))", "reason": "\(answered.message)"]
        if let detail = answered.detail { metadata["detail"] = "\(detail)" }
        logger.error("requests fail with 503, some or all; http_requests_total counts them", metadata: metadata)
    }

    /// Notes a request answered with what the database said, logging the first once no 503 has come for
    /// `quietPeriod`.
    func succeeded(logger: Logger) {
        guard failing.load(ordering: .relaxed) else { return }
        let news = state.withLock { state in
            guard state.failing, let last = state.last, now() - last >= Self.quietPeriod else { return false }
            state.failing = false
            failing.store(false, ordering: .relaxed)
            return true
        }
        if news { logger.notice("requests succeed again: none has failed with 503 for \(Self.quietPeriod)") }
    }
}

/// Turns every error below it into an `APIError` response, noting successes and 503s in `failures`.
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Routes whose success says nothing about the database.
    static var answeredWithoutDatabase: Set<String> { ["/health", "/metrics", "/openapi.json"] }

    let failures: FailureLog

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            let response = try await next(request, context)
            if request.method != .options, !Self.answeredWithoutDatabase.contains(context.endpointPath ?? "") {
                failures.succeeded(logger: context.logger)
            }
            return response
        } catch {
            let apiError = APIError.from(error)
            if apiError.status == .serviceUnavailable {
                failures.failed(error, answered: apiError, logger: context.logger)
            }
            return try apiError.response(from: request, context: context)
        }
    }
}
