import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's HTTP/1 channel, in which every request that does not keep its connection alive reaches
/// Hummingbird (and `CheckFastPath`) with `Connection: close`, the one value on which Hummingbird closes the
/// connection after the answer. (The answer does not repeat it: the client asked to close.)
///
/// Whether a request keeps its connection alive depends on its HTTP version (HTTP/1.0 closes unless it asks
/// for keep-alive) and on its `Connection` options, in any case and in any list (RFC 9112, section 9.3). The
/// conversion to HTTP types drops the version, so this is decided before it, where NIO reads both.
struct HTTP1ClosingChannel: ServerChildChannel {
    let base: HTTP1Channel

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.context(
                handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(CloseUnlessKeptAlive(), position: .after(decoder.handler))
            return value
        }
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

private final class CloseUnlessKeptAlive: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), !head.isKeepAlive, head.headers["connection"] != ["close"]
        else { return context.fireChannelRead(data) }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}
