import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's HTTP/1 channel, holding each request to rules of RFC 9112 that must hold before the fast path
/// and the router see it: two depend on the request's HTTP version, which the conversion to HTTP types drops, so
/// they are applied before it, where NIO reads both; the third refuses what neither could read right; the fourth
/// keeps a client from sending a body that will be refused.
///
/// - A request that does not keep its connection alive reaches Hummingbird (and `CheckFastPath`) with
///   `Connection: close`, the one value on which Hummingbird closes the connection after the answer. (The
///   answer does not repeat it: the client asked to close.) HTTP/1.0 closes unless it asks for keep-alive;
///   `Connection` options count in any case and in any list (section 9.3).
/// - An HTTP/1.1 request with no `Host` field, or more than one, is answered 400 and the connection closed, as
///   for a request that does not parse, after the answers owed before it (section 3.2). Two `Host` fields are
///   a way to make a proxy in front and this server disagree on where a request goes.
/// - So is a request whose `Transfer-Encoding` is anything but `chunked` alone, in any case (section 6.1 asks
///   501 of a server that does not understand a coding; this service decodes none, and a 400 here keeps the
///   answers of pipelined requests in order). NIO frames `gzip, chunked` by its last coding and hands on the
///   body as it came: gzipped, or plain though labelled gzip, which a proxy in front that decodes gzip would
///   read as another body than this server answers.
/// - A request that waits for `100 Continue` (RFC 9110, section 10.1.1) while its `Content-Length` is over what
///   the service takes (`AppRequestContext.maxBody`) reaches the router without `Expect` and with
///   `Connection: close`: it is not told to go on, the router refuses it from its head (`BodyLimitMiddleware`),
///   and the connection closes after that answer, for the client may send the body or its next request.
///
/// And it keeps track of the answers each connection owes (`RequestsInFlight`), for two more:
///
/// - A connection left idle for `idleTimeout` is closed (section 9.8), so that connections nobody uses, or that
///   send a request a byte at a time, do not pile up until the process runs out of file descriptors.
///   Hummingbird's own idle timeout cannot serve: it sits behind `CheckFastPath`, never sees the checks
///   answered there, and would close a connection busy with them.
/// - A request with `Expect: 100-continue` is told `100 Continue` as soon as it is the next to be answered
///   (RFC 9110, section 10.1.1). Hummingbird never says it, and clients that ask (curl, and PHP through it,
///   for any body over 1 KiB) wait a second for it before they send the body.
struct StrictHTTP1Channel: ServerChildChannel {
    let base: HTTP1Channel
    let idleTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.context(
                handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandlers(
                [RequestHeadRules(), RequestsInFlight(idleTimeout: idleTimeout)], position: .after(decoder.handler))
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
        let codings = head.headers[canonicalForm: "transfer-encoding"]
        if head.version != .http1_0 && head.headers["host"].count != 1
            || !codings.isEmpty && codings.map({ $0.lowercased() }) != ["chunked"]
        {
            refused = true
            // Hummingbird answers a parse error with 400 and closes the connection.
            return context.fireErrorCaught(HTTPParserError.invalidHeaderToken)
        }
        let unwanted =
            head.headers.contains(name: "expect")
            && AppRequestContext.refuses(declaredLength: head.headers["content-length"].first)
        guard unwanted || !head.isKeepAlive && head.headers["connection"] != ["close"] else {
            return context.fireChannelRead(data)
        }
        if unwanted { head.headers.remove(name: "expect") }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

/// The requests a connection has read and not yet answered in full, seen where requests leave the decoder and
/// answers reach the encoder, so the fast path's too. From them: closing the connection once `idleTimeout` has
/// passed with no answer owed and nothing read, or while a request's head is read, or its body (counted from
/// its head, or from the end of the answers owed before it: a body sent a byte at a time would otherwise hold
/// the connection for as long as its length allows); while the service works on a request it has read, or on
/// one before the request being read, nothing is closed, however long that takes; and
/// `100 Continue` for a request that waits for it, once every answer before its own has been written, so that
/// it never comes between another request's answer and its own.
private final class RequestsInFlight: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let idleTimeout: TimeAmount
    /// One entry per request read and not answered in full, oldest first: whether it still waits for
    /// `100 Continue`.
    private var owed = CircularBuffer<Bool>()
    /// A request's head was read and its end not yet.
    private var reading = false
    /// Since when the request being read owes its body: its head, or the end of the last answer owed before it.
    private var bodyAskedAt = NIODeadline.now()
    /// When a request part was last read or an answer last ended.
    private var lastActivity = NIODeadline.now()
    /// One scheduled look at the connection at a time; activity only moves `lastActivity`, so the timer is not
    /// rescheduled for every request.
    private var scheduled: Scheduled<Void>?

    init(idleTimeout: TimeAmount) { self.idleTimeout = idleTimeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { schedule(context, at: lastActivity + idleTimeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        lastActivity = .now()
        if scheduled == nil { schedule(context, at: lastActivity + idleTimeout) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastActivity = .now()
        switch unwrapInboundIn(data) {
        case .head(let head):
            reading = true
            bodyAskedAt = lastActivity
            // Only HTTP/1.1 clients understand 1xx answers (RFC 9110, section 15.2).
            let waits =
                head.version == .http1_1
                && head.headers["expect"].contains {
                    $0.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue"
                }
            // Said before the request goes on, so that it comes before any answer to it.
            if waits && owed.isEmpty { sayContinue(context) }
            owed.append(waits && !owed.isEmpty)
            context.fireChannelRead(data)
        case .body:
            context.fireChannelRead(data)
        case .end:
            reading = false
            context.fireChannelRead(data)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        lastActivity = .now()
        // A 400 for bytes that never made a request answers nothing read here.
        if !owed.isEmpty { owed.removeFirst() }
        context.write(data, promise: promise)
        if reading { bodyAskedAt = lastActivity }
        if owed.first == true {
            owed[owed.startIndex] = false
            sayContinue(context)
        }
    }

    private func sayContinue(_ context: ChannelHandlerContext) {
        context.writeAndFlush(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
    }

    private func schedule(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        scheduled = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            scheduled = nil
            // The service's turn, to answer what it has read or what comes before the request being read (whose
            // body may wait for it: for `100 Continue`, or unread while those are answered): the time starts
            // again when it has.
            if !owed.isEmpty, !reading || owed.count > 1 {
                schedule(context, at: .now() + idleTimeout)
                return
            }
            let since = reading ? bodyAskedAt : lastActivity
            if since + idleTimeout <= .now() {
                context.close(promise: nil)
            } else {
                schedule(context, at: since + idleTimeout)
            }
        }
    }

    private func cancel() {
        scheduled?.cancel()
        scheduled = nil
    }
}
