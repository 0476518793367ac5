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

    /// A check this handler may answer, held until its end arrives.
    private struct Held {
        let head: HTTPRequest
        var body: ByteBuffer?
        let since: ContinuousClock.Instant
    }
    /// Nil between requests, and while a request goes on to Hummingbird.
    private var held: Held?
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
        switch (held, unwrapInboundIn(data)) {
        case (nil, .head(let head)) where unanswered == 0 && Self.mayAnswer(head):
            held = Held(head: head, body: nil, since: .now)
        case (var held?, .body(var chunk)):
            if var body = held.body {
                body.writeBuffer(&chunk)
                chunk = body
            }
            held.body = chunk
            guard chunk.readableBytes <= Self.maxBody else { return passOn(held, context: context) }
            self.held = held
        case (let held?, .end(let trailers)):
            self.held = nil
            if trailers == nil, let answer = answer(held.head, held.body ?? ByteBuffer()) {
                return writeAnswer(answer, since: held.since, context: context)
            }
            passOn(held, context: context)
            context.fireChannelRead(data)
        case (_, let part):
            // Nothing is held: the decoder ends each request before it begins the next.
            if case .head = part { unanswered += 1 }
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
        if event is ChannelShouldQuiesceEvent, let held { passOn(held, context: context) }
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
    private func passOn(_ held: Held, context: ChannelHandlerContext) {
        unanswered += 1
        self.held = nil
        context.fireChannelRead(wrapInboundOut(.head(held.head)))
        if let body = held.body { context.fireChannelRead(wrapInboundOut(.body(body))) }
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
