import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's HTTP/1 channel, holding each request to two rules of RFC 9112 that depend on the request's
/// HTTP version, which the conversion to HTTP types drops; they are applied before it, where NIO reads both.
///
/// - A request that does not keep its connection alive reaches Hummingbird (and `CheckFastPath`) with
///   `Connection: close`, the one value on which Hummingbird closes the connection after the answer. (The
///   answer does not repeat it: the client asked to close.) HTTP/1.0 closes unless it asks for keep-alive;
///   `Connection` options count in any case and in any list (section 9.3).
/// - An HTTP/1.1 request with no `Host` field, or more than one, is answered 400 and the connection closed, as
///   for a request that does not parse, after the answers owed before it (section 3.2). Two `Host` fields are
///   a way to make a proxy in front and this server disagree on where a request goes.
///
/// And it closes a connection left idle for `idleTimeout` (section 9.8), so that connections nobody uses, or
/// that send a request a byte at a time, do not pile up until the process runs out of file descriptors.
/// Hummingbird's own idle timeout cannot serve: it sits behind `CheckFastPath`, never sees the checks answered
/// there, and would close a connection busy with them.
struct StrictHTTP1Channel: ServerChildChannel {
    let base: HTTP1Channel
    let idleTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.context(
                handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandlers(
                [IdleConnectionCloser(timeout: idleTimeout), RequestHeadRules()], position: .after(decoder.handler))
            return value
        }
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

private final class RequestHeadRules: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    /// A request was refused: nothing after it is read, as nothing is after a request that does not parse.
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        guard case .head(var head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        if head.version != .http1_0, head.headers["host"].count != 1 {
            refused = true
            // Hummingbird answers a parse error with 400 and closes the connection.
            return context.fireErrorCaught(HTTPParserError.invalidHeaderToken)
        }
        guard !head.isKeepAlive, head.headers["connection"] != ["close"] else { return context.fireChannelRead(data) }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

/// Closes the connection once `timeout` has passed with no answer owed and nothing read, or with a request's
/// head or body arriving no faster than that. While the service works on a request it has read, nothing is
/// closed, however long that takes. It sees every request and answer, the fast path's included: it sits where
/// requests leave the decoder and answers reach the encoder.
private final class IdleConnectionCloser: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let timeout: TimeAmount
    /// Requests whose head was read and whose answer has not ended yet.
    private var unanswered = 0
    /// A request's head was read and its end not yet.
    private var reading = false
    /// When a request part was last read or an answer last ended.
    private var lastActivity = NIODeadline.now()
    /// One scheduled look at the connection at a time; activity only moves `lastActivity`, so the timer is not
    /// rescheduled for every request.
    private var scheduled: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { schedule(context, at: lastActivity + timeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        lastActivity = .now()
        if scheduled == nil { schedule(context, at: lastActivity + timeout) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            reading = true
        case .body: break
        case .end: reading = false
        }
        lastActivity = .now()
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            // A 400 for bytes that never made a request is an answer to nothing read here.
            unanswered = max(0, unanswered - 1)
            lastActivity = .now()
        }
        context.write(data, promise: promise)
    }

    private func schedule(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        scheduled = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            scheduled = nil
            if unanswered > 0, !reading {
                // The service's turn: the time starts again when its last answer ends.
                schedule(context, at: .now() + timeout)
            } else if lastActivity + timeout <= .now() {
                context.close(promise: nil)
            } else {
                schedule(context, at: lastActivity + timeout)
            }
        }
    }

    private func cancel() {
        scheduled?.cancel()
        scheduled = nil
    }
}
