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
struct StrictHTTP1Channel: ServerChildChannel {
    let base: HTTP1Channel

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.context(
                handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(RequestHeadRules(), position: .after(decoder.handler))
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
