import Collaboration
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes

/// Answers `POST /v1/check` before Hummingbird sees the request, when the key is cached and trusted
/// (`ServiceKeyService.cachedKey`, asked when the head arrives):
/// - on the event loop when the cache holds the answer (`PermissionChecker.cachedCheck`);
/// - otherwise from the repository (`checkKnown`, as the route asks), in a task that runs on the event loop
///   but for the database's own hop. What the connection reads meanwhile waits, and reading stops once
///   something waits.
///
/// Such a check skips the hops to and from Swift concurrency's threads, the router and four middlewares, and
/// costs about 40% less server time, warm or not (docs/performance.md).
///
/// Everything else goes on to Hummingbird unchanged, in order, and its `/v1/check` route gives the same answers
/// and every error. A check the repository fails to answer goes on too: one the route would answer 503 (the
/// database down or not answering) marked `CheckAnswer.unavailable`, so that the router answers it without
/// asking again for its key or the check; any other, to be asked again there for the route's error.
///
/// A check is answered here only when
/// - no request handed on earlier is still unanswered, so answers never overtake one another;
/// - it does not ask to close the connection (Hummingbird closes it after the answer; `StrictHTTP1Channel` has
///   made every such request say `Connection: close`), has no trailers, and its body is at most `maxBody`
///   bytes;
/// - the server is not shutting down.
///
/// An answer here writes what the route's answer writes: the same header fields and body, the request's log
/// line, and its count and time in the route metrics.
///
/// Hummingbird's idle timeout does not see the requests answered here; `rbac serve` sets none.
///
/// Being the handler that sees every request, it also keeps shutdown from losing one that a client sent just
/// before: Hummingbird closes a connection that owes no answer as soon as it hears of the shutdown
/// (`ChannelShouldQuiesceEvent`), and a request already on its way on an idle keep-alive connection was lost
/// with it. On such a connection (one that has sent a request, and is owed no answer) the event waits until the
/// next request begins, which is then answered with the connection closed after it, or until `shutdownGrace`
/// has passed with none. A connection that never sent a request closes at once: Hummingbird no longer serves
/// new connections then.
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
    private let failures: FailureLog
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
    /// A check is being answered from the repository: what is read meanwhile waits in `waiting`, and a read
    /// asked for once something waits is made afterwards (`readWanted`).
    private var answering = false
    private var waiting = CircularBuffer<HTTPRequestPart>()
    private var readWanted = false
    /// An error read meanwhile (a request after the check did not parse), passed on after what waited, so that
    /// Hummingbird's 400 and close follow the answers owed before it.
    private var waitingError: (any Error)?
    /// Runs the tasks that answer from the repository; made for the first.
    private var executor: EventLoopTaskExecutor?
    /// Shutting down: everything goes on to Hummingbird.
    private var quiescing = false
    private let shutdownGrace: TimeAmount
    private var servedOne = false
    /// The shutdown event, held for an idle connection's grace.
    private var heldShutdown: Scheduled<Void>?
    /// The `Date` field, formatted once a second.
    private var date: (second: Int, field: String) = (0, "")

    /// `timings`: the route metrics (`RouteMetricsMiddleware.timings`); `failures`: the router's
    /// (`ServerDependencies.failures`); `logger`: the application's.
    init(
        keys: ServiceKeyService, checker: PermissionChecker, timings: CountedTimings, failures: FailureLog,
        logger: Logger, shutdownGrace: Duration = .seconds(1)
    ) {
        self.shutdownGrace = .nanoseconds(
            shutdownGrace.components.seconds * 1_000_000_000 + shutdownGrace.components.attoseconds / 1_000_000_000)
        self.keys = keys
        self.checker = checker
        self.timings = timings
        self.failures = failures
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if answering {
            waiting.append(part)
        } else {
            read(part, context: context)
        }
    }

    private func read(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        guard case .head = part else { return take(part, context: context) }
        servedOne = true
        guard let heldShutdown else { return take(part, context: context) }
        // The request the grace waited for: once it is on its way, the shutdown event follows it, and Hummingbird
        // closes the connection after answering it.
        heldShutdown.cancel()
        self.heldShutdown = nil
        take(part, context: context)
        quiesce(context: context)
    }

    private func take(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch (held, part) {
        case (nil, .head(let head)) where unanswered == 0 && !quiescing && mayAnswer(head):
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
            guard trailers == nil, let check = parsedCheck(held) else {
                passOn(held, context: context)
                return context.fireChannelRead(wrapInboundOut(part))
            }
            if let answer = checker.cachedCheck(
                couple: check.couple, user: check.user, permission: check.permission, minRevision: check.minRevision)
            {
                return writeAnswer(answer, since: held.since, context: context)
            }
            answerFromRepository(check, held, context: context)
        case (_, .head(var head)):
            // Nothing is held: the decoder ends each request before it begins the next.
            unanswered += 1
            head.headerFields[CheckAnswer.unavailable] = nil
            context.fireChannelRead(wrapInboundOut(.head(head)))
        case (_, let part):
            context.fireChannelRead(wrapInboundOut(part))
        }
    }

    /// Answers `check` as the route does, in a task on this event loop: `checkKnown` leaves it only for the
    /// repository's own hops.
    private func answerFromRepository(
        _ check: PermissionAPIController.ParsedCheck, _ held: Held, context: ChannelHandlerContext
    ) {
        answering = true
        let executor = executor ?? EventLoopTaskExecutor(eventLoop: context.eventLoop)
        self.executor = executor
        let (checker, promise) = (checker, context.eventLoop.makePromise(of: PermissionCheck.self))
        Task(executorPreference: executor) {
            do {
                promise.succeed(
                    try await checker.checkKnown(
                        couple: check.couple, user: check.user, permission: check.permission,
                        minRevision: check.minRevision))
            } catch {
                promise.fail(error)
            }
        }
        promise.futureResult.assumeIsolated().whenComplete { result in
            self.answered(result, held, context: context)
        }
    }

    /// Writes the repository's answer, or hands the check on; then reads what waited, and makes the read and
    /// the shutdown event put off meanwhile.
    private func answered(_ result: Result<PermissionCheck, any Error>, _ held: Held, context: ChannelHandlerContext) {
        answering = false
        guard context.channel.isActive else {
            waitingError = nil
            return waiting.removeAll()
        }
        switch result {
        case .success(let answer):
            writeAnswer(answer, since: held.since, context: context)
            // A cached answer says nothing about the database; this one is the database's.
            failures.succeeded(logger: logger)
        case .failure(let error):
            passOn(held, unavailable: APIError.from(error).status == .serviceUnavailable, context: context)
            context.fireChannelRead(wrapInboundOut(.end(nil)))
        }
        while !answering, let part = waiting.popFirst() { read(part, context: context) }
        if !answering, let error = waitingError {
            waitingError = nil
            context.fireErrorCaught(error)
        }
        channelReadComplete(context: context)
        guard !answering else { return }
        if readWanted {
            readWanted = false
            context.read()
        }
        if quiescing { context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if answering { waitingError = error } else { context.fireErrorCaught(error) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if answeredThisRead {
            answeredThisRead = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    /// On shutdown, Hummingbird closes the connection once it owes no answer: a check held here is handed on
    /// first, to be answered before that, and one being answered here delays the event until it is.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        guard servedOne, !quiescing, heldShutdown == nil, !answering, held == nil, unanswered == 0 else {
            return quiesce(context: context)
        }
        heldShutdown = context.eventLoop.assumeIsolated().scheduleTask(in: shutdownGrace) {
            self.heldShutdown = nil
            self.quiesce(context: context)
        }
    }

    private func quiesce(context: ChannelHandlerContext) {
        quiescing = true
        guard !answering else { return }
        if let held { passOn(held, context: context) }
        context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
    }

    func channelInactive(context: ChannelHandlerContext) {
        heldShutdown?.cancel()
        heldShutdown = nil
        context.fireChannelInactive()
    }

    func read(context: ChannelHandlerContext) {
        if answering && !waiting.isEmpty {
            readWanted = true
        } else {
            context.read()
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { unanswered -= 1 }
        context.write(data, promise: promise)
    }

    /// Whether `head` is a check this handler may answer, its key cached. Decided on the head: a request
    /// without a known key goes on at once, so that the route's 401 does not wait for the body; one that names an
    /// acting user or a content coding goes on to be refused.
    private func mayAnswer(_ head: HTTPRequest) -> Bool {
        head.method == .post && head.path == CheckAnswer.route && head.headerFields[.connection] != "close"
            && head.headerFields[.actingUser] == nil && head.headerFields[.contentEncoding] == nil
            && head.headerFields.declaresJSONOrNothing
            && head.headerFields.bearerCredential.map { keys.cachedKey($0) != nil } == true
    }

    /// The held check, if its body is well formed.
    private func parsedCheck(_ held: Held) -> PermissionAPIController.ParsedCheck? {
        guard let request = PermissionAPIController.CheckRequest(scanning: held.body ?? ByteBuffer()) else {
            return nil
        }
        return try? PermissionAPIController.parse(request)
    }

    /// Hands a held request to Hummingbird: its head, marked `CheckAnswer.unavailable` when the database did not
    /// answer it, and its body so far. The rest follows as it comes.
    private func passOn(_ held: Held, unavailable: Bool = false, context: ChannelHandlerContext) {
        unanswered += 1
        self.held = nil
        var head = held.head
        head.headerFields[CheckAnswer.unavailable] = unavailable ? "1" : nil
        context.fireChannelRead(wrapInboundOut(.head(head)))
        if let body = held.body { context.fireChannelRead(wrapInboundOut(.body(body))) }
    }

    private func writeAnswer(_ answer: PermissionCheck, since: ContinuousClock.Instant, context: ChannelHandlerContext)
    {
        let (head, body) = CheckAnswer.head(answer, date: dateField())
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
        answeredThisRead = true
        CheckAnswer.recordAsRoute(timings, logger, since: since)
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

/// Runs the jobs of the tasks that prefer it on an event loop.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
