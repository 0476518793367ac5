import Collaboration
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes

/// Answers `POST /v1/check` on the event loop, before Hummingbird sees the request, when the caches can: the
/// key and the answer are cached and trusted (`ServiceKeyService.cachedKey`, `PermissionChecker.cachedCheck`).
/// Such a check then costs about 40% less (README, Benchmarks): it skips the hops to and from Swift
/// concurrency's threads, the router and four middlewares.
///
/// Everything else goes on to Hummingbird unchanged, in order, and its `/v1/check` route gives the same answers
/// and every error. A check is answered here only when
/// - no request handed on earlier is still unanswered, so answers never overtake one another;
/// - it does not ask to close the connection (Hummingbird closes it after the answer), has no trailers, and its
///   body is at most `maxBody` bytes.
///
/// An answer here writes what the route's answer writes: the same header fields and body, the request's log
/// line, and its count and time in the route metrics.
///
/// Hummingbird's idle timeout does not see the requests answered here; `rbac serve` sets none.
final class CheckFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// A larger body goes on to Hummingbird, whose limit applies. A check's body is about 150 bytes.
    static let maxBody = 4096

    private let keys: ServiceKeyService
    private let checker: PermissionChecker
    private let timings: CountedTimings
    private let logger: Logger

    private enum Reading {
        /// Between requests.
        case idle
        /// A check this handler may answer, held until its end arrives.
        case holding(HTTPRequest, body: ByteBuffer?, since: ContinuousClock.Instant)
        /// A request on its way to Hummingbird.
        case passing
    }
    private var reading = Reading.idle
    /// Requests passed on whose answers have not been written to the end.
    private var unanswered = 0
    private var answeredThisRead = false
    /// The `Date` field, formatted once a second.
    private var date: (second: Int, field: String) = (0, "")

    /// `timings`: the route metrics (`RouteMetricsMiddleware.timings`); `logger`: the application's.
    init(keys: ServiceKeyService, checker: PermissionChecker, timings: CountedTimings, logger: Logger) {
        self.keys = keys
        self.checker = checker
        self.timings = timings
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (reading, unwrapInboundIn(data)) {
        case (.idle, .head(let head)) where unanswered == 0 && Self.mayAnswer(head):
            reading = .holding(head, body: nil, since: .now)
        case (.holding(let head, let body, let since), .body(var chunk)):
            if var body {
                body.writeBuffer(&chunk)
                chunk = body
            }
            guard chunk.readableBytes <= Self.maxBody else { return passOn(head, chunk, context: context) }
            reading = .holding(head, body: chunk, since: since)
        case (.holding(let head, let body, let since), .end(let trailers)):
            if trailers == nil, let answer = answer(head, body ?? ByteBuffer()) {
                reading = .idle
                return writeAnswer(answer, since: since, context: context)
            }
            passOn(head, body, context: context)
            reading = .idle
            context.fireChannelRead(data)
        case (_, .head):
            unanswered += 1
            reading = .passing
            context.fireChannelRead(data)
        case (_, .body):
            context.fireChannelRead(data)
        case (_, .end):
            reading = .idle
            context.fireChannelRead(data)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if answeredThisRead {
            answeredThisRead = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    /// On shutdown, Hummingbird closes the connection once it owes no answer: a check held here is handed on
    /// first, to be answered before that.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, case .holding(let head, let body, _) = reading {
            passOn(head, body, context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { unanswered -= 1 }
        context.write(data, promise: promise)
    }

    private static func mayAnswer(_ head: HTTPRequest) -> Bool {
        head.method == .post && head.path == "/v1/check" && head.headerFields[.connection] != "close"
    }

    /// The answer's body, if the caches can give it now.
    private func answer(_ head: HTTPRequest, _ body: ByteBuffer) -> ByteBuffer? {
        guard let credential = head.headerFields.bearerCredential, keys.cachedKey(credential) != nil,
            let request = PermissionAPIController.CheckRequest(scanning: body),
            let check = try? PermissionAPIController.parse(request),
            let answer = checker.cachedCheck(
                couple: check.couple, user: check.user, permission: check.permission, minRevision: check.minRevision)
        else { return nil }
        return PermissionAPIController.checkBody(answer)
    }

    /// Hands a held request to Hummingbird: its head, and its body so far. The rest follows as it comes.
    private func passOn(_ head: HTTPRequest, _ body: ByteBuffer?, context: ChannelHandlerContext) {
        unanswered += 1
        reading = .passing
        context.fireChannelRead(wrapInboundOut(.head(head)))
        if let body { context.fireChannelRead(wrapInboundOut(.body(body))) }
    }

    private func writeAnswer(_ body: ByteBuffer, since: ContinuousClock.Instant, context: ChannelHandlerContext) {
        var fields = HTTPFields()
        fields[.contentType] = PermissionAPIController.jsonContentType
        fields[.contentLength] = String(body.readableBytes)
        fields[.date] = dateField()
        fields[.server] = serverName
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .ok, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
        answeredThisRead = true
        RouteMetricsMiddleware.record(timings, .post, route: "/v1/check", 200, since: since)
        if logger.logLevel <= .info {
            var logger = logger
            logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
            RequestLogMiddleware.log(logger, .post, "/v1/check", .ok, since: since)
        }
    }

    /// The `Date` field as Hummingbird writes it (RFC 9110's IMF-fixdate), e.g. `Tue, 24 Nov 2026 07:03:58 GMT`.
    private func dateField() -> String {
        var now = time(nil)
        guard now != date.second else { return date.field }
        var parts = tm()
        gmtime_r(&now, &parts)
        let field = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { buffer in
            let count = strftime(buffer.baseAddress!, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
            return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: count), as: UTF8.self)
        }
        date = (now, field)
        return field
    }
}
