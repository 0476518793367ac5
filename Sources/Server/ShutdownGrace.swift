import NIOCore
import NIOHTTPTypes

/// Gives a keep-alive connection that is idle when shutdown begins a moment to deliver the request its client
/// sent just before: Hummingbird closes a connection that owes no answer as soon as it hears of the shutdown
/// (`ChannelShouldQuiesceEvent`), and a request already on its way, or waiting in the socket, was lost with it.
///
/// The event goes on at once while a request is being answered (Hummingbird then closes the connection after the
/// answer), and on a connection that has sent no request yet (a client that connected just before the listener
/// closed: Hummingbird no longer serves new connections then). On an idle keep-alive connection it waits until
/// the next request begins, which is then answered with the connection closed after it, or until `grace` has
/// passed with none.
final class ShutdownGrace: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let grace: TimeAmount
    /// Requests begun whose answers have not been written to the end.
    private var unanswered = 0
    private var servedOne = false
    /// The shutdown event, held for the idle connection's grace.
    private var held: Scheduled<Void>?

    init(grace: Duration) {
        self.grace = .nanoseconds(
            grace.components.seconds * 1_000_000_000 + grace.components.attoseconds / 1_000_000_000)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        unanswered += 1
        servedOne = true
        context.fireChannelRead(data)
        if let held {
            held.cancel()
            self.held = nil
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { unanswered -= 1 }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, servedOne, unanswered == 0, held == nil else {
            return context.fireUserInboundEventTriggered(event)
        }
        held = context.eventLoop.assumeIsolated().scheduleTask(in: grace) {
            self.held = nil
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        held?.cancel()
        held = nil
        context.fireChannelInactive()
    }
}
