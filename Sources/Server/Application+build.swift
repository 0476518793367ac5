import Budget
import Collaboration
import CoreMetrics
import Foundation
import Hummingbird
import HummingbirdCore
import Identity
import Logging
import NIOCore
import Prometheus
import Secrets
import ServiceLifecycle

/// What the HTTP service needs: `rbac serve` builds it over PostgreSQL, tests also over in-memory repositories.
public struct ServerDependencies: Sendable {
    public let repository: any CollaborationRepository
    public let keys: ServiceKeyService
    /// Verifies end users' bearer tokens (accepting an invitation).
    public let tokens: TokenVerifier
    /// Issuers whose every address is verified, whatever a token's `email_verified` says.
    public let emailVerifyingIssuers: Set<String>
    /// Sign-in at the app's identity provider from the invitation page, when configured.
    public let signIn: OpenIDSignIn?
    public let publicBaseURL: URL
    public let limiter: FailedAttemptLimiter
    /// Whose forwarding headers name the client (for the limiter).
    public let trustedProxies: TrustedProxies
    /// The app's origins whose pages may call the browser routes (CORS).
    public let browserOrigins: BrowserOrigins
    /// Whether the database answers (`/ready`).
    public let isReady: @Sendable () async -> Bool
    /// Answers `/v1/check`: through a permission cache when the service runs with one.
    public let checker: PermissionChecker
    /// What `/metrics` serves: route timings, and the operation timings of services built with
    /// `operationMetrics`.
    public let metrics: PrometheusCollectorRegistry
    /// One `CoupleBudget` actor per couple, over the budget storage given.
    public let budgets: BudgetRegistry
    /// Run before `/metrics` is written: records what is sampled there rather than counted as it happens.
    public let sampleMetrics: @Sendable () -> Void
    /// The clients `/metrics` answers (`rbac serve --metrics-from`), by their address as `trustedProxies` tell it;
    /// nil: anyone.
    public let metricsClients: AddressRanges?
    /// Where changes sent with an `Idempotency-Key` are kept; without one, that header is refused.
    public let idempotentRequests: (any IdempotentRequestStore)?
    /// How many requests of one couple, and changes in all, are answered at once (`CoupleAdmission`):
    /// less than the database connections, so that other couples' requests, and checks, always find one; and
    /// how long one past them waits for a turn.
    public let coupleRequests: (each: Int, all: Int, wait: Duration)
    /// Whether requests fail with 503: noted by the router and the checks answered before it.
    let failures = FailureLog()

    public init(
        repository: any CollaborationRepository, keys: ServiceKeyService, tokens: TokenVerifier,
        emailVerifyingIssuers: Set<String> = [], signIn: OpenIDSignIn? = nil, publicBaseURL: URL,
        limiter: FailedAttemptLimiter = FailedAttemptLimiter(), trustedProxies: TrustedProxies = .none,
        browserOrigins: BrowserOrigins = .none,
        checker: PermissionChecker? = nil,
        budgets: any BudgetRepository,
        metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        sampleMetrics: @escaping @Sendable () -> Void = {}, metricsClients: AddressRanges? = nil,
        idempotentRequests: (any IdempotentRequestStore)? = nil,
        coupleRequests: (each: Int, all: Int, wait: Duration) = (8, 12, .seconds(5)),
        isReady: @escaping @Sendable () async -> Bool
    ) {
        self.repository = repository
        self.keys = keys
        self.tokens = tokens
        self.emailVerifyingIssuers = emailVerifyingIssuers
        self.signIn = signIn
        self.publicBaseURL = publicBaseURL
        self.limiter = limiter
        self.trustedProxies = trustedProxies
        self.browserOrigins = browserOrigins
        self.metrics = metrics
        let operationMetrics = Self.operationMetrics(metrics)
        let checker = checker ?? PermissionChecker(repository: repository, metrics: operationMetrics)
        self.checker = checker
        self.budgets = BudgetRegistry { couple in
            CoupleBudget(couple: couple, repository: budgets, checker: checker, metrics: operationMetrics)
        }
        self.sampleMetrics = sampleMetrics
        self.metricsClients = metricsClients
        self.idempotentRequests = idempotentRequests
        self.coupleRequests = coupleRequests
        self.isReady = isReady
    }

    /// Operation metrics recorded into `registry`.
    public static func operationMetrics(_ registry: PrometheusCollectorRegistry) -> OperationMetrics {
        OperationMetrics(factory: PrometheusMetricsFactory(registry: registry))
    }

    var operationMetrics: OperationMetrics { Self.operationMetrics(metrics) }
}

/// Every route of the service, and the answers to the methods each does not take.
public func buildRouter(_ dependencies: ServerDependencies) -> Router<AppRequestContext> {
    let router = documentedRoutes(dependencies)
    answerOtherMethods(on: router)
    return router
}

/// The routes openapi.json documents.
func documentedRoutes(_ dependencies: ServerDependencies) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: RequestLogMiddleware())
    router.add(
        middleware: RouteMetricsMiddleware(
            factory: PrometheusMetricsFactory(registry: dependencies.metrics)))
    router.add(
        middleware: BrowserOriginsMiddleware(
            origins: dependencies.browserOrigins, paths: InvitationController.browserRoutes))
    router.add(middleware: APIErrorMiddleware(failures: dependencies.failures))
    router.add(middleware: BodyLimitMiddleware())
    router.get("health") { _, _ in "ok" }
    router.get("metrics") { request, context -> Response in
        let client = context.clientAddress(request, trusting: dependencies.trustedProxies)
        if let clients = dependencies.metricsClients, !clients.contains(client) {
            throw APIError(
                CollaborationError(
                    .permissionDenied,
                    "/metrics answers only the addresses --metrics-from names"))
        }
        dependencies.sampleMetrics()
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(
            status: .ok, headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: dependencies.metrics.emitToBuffer()))
        )
    }
    router.get("openapi.json") { _, _ -> Response in
        PermissionAPIController.response(json: ByteBuffer(bytes: try openAPIDocument()))
    }
    router.get("ready") { _, _ -> String in
        guard await dependencies.isReady() else { throw APIError.unavailable }
        return "ready"
    }
    let metrics = dependencies.operationMetrics
    let invitations = CollaborationInvitationService(
        repository: dependencies.repository, baseURL: dependencies.publicBaseURL, metrics: metrics)
    let admission = CoupleAdmission(
        limit: dependencies.coupleRequests.each, total: dependencies.coupleRequests.all,
        wait: dependencies.coupleRequests.wait, registry: dependencies.metrics)
    InvitationController(
        invitations: invitations, repository: dependencies.repository, tokens: dependencies.tokens,
        emailVerifyingIssuers: dependencies.emailVerifyingIssuers, signIn: dependencies.signIn,
        limiter: dependencies.limiter, proxies: dependencies.trustedProxies, admission: admission
    ).addRoutes(to: router)
    let memberships = MembershipService(repository: dependencies.repository, metrics: metrics)
    let v1 = router.group("v1").add(middleware: ServiceKeyMiddleware(keys: dependencies.keys))
        .add(middleware: JSONBodyMiddleware()).add(middleware: DocumentedRequestMiddleware())
    let permissions = CollaborationPermissionService(repository: dependencies.repository, metrics: metrics)
    PermissionAPIController(
        repository: dependencies.repository, checker: dependencies.checker, permissions: permissions,
        memberships: memberships
    ).addRoutes(to: v1.group().add(middleware: CoupleAdmissionMiddleware(admission: admission, outsideCouples: false)))
    // The routes below change things, or read a couple's; the checks above only read.
    let changes = v1.group().add(middleware: CoupleAdmissionMiddleware(admission: admission, outsideCouples: true))
        .add(
            middleware: IdempotencyMiddleware(
                store: dependencies.idempotentRequests, secretAnswers: ManagementAPIController.secretAnswers,
                metrics: PrometheusMetricsFactory(registry: dependencies.metrics)))
    ManagementAPIController(memberships: memberships, invitations: invitations, permissions: permissions)
        .addRoutes(to: changes)
    BudgetAPIController(registry: dependencies.budgets).addRoutes(to: changes)
    return router
}

/// Every route also answers the methods it does not take, with 405 and the `Allow` header (rather than
/// Hummingbird's 404, which says the route does not exist), and OPTIONS with 204 and the same header. HEAD is
/// taken wherever GET is. `OPTIONS *`, which asks about the server rather than a route (RFC 9110, 9.3.7), is
/// answered with every method some route takes. These answers need no API key: they tell no more than
/// GET /openapi.json.
func answerOtherMethods(on router: Router<AppRequestContext>) {
    var routes: [(path: RouterPath, allow: String)] = []
    var anywhere: Set<HTTPRequest.Method> = []
    for group in Dictionary(grouping: router.routes, by: \.path.description).values {
        let path = group[0].path
        var taken = Set(group.map(\.method))
        if taken.contains(.get) { taken.insert(.head) }
        taken.insert(.options)
        anywhere.formUnion(taken)
        let allow = allowField(taken)
        router.on(path, method: .options) { _, _ in Response(status: .noContent, headers: [.allow: allow]) }
        routes.append((path, allow))
    }
    // Added after every route, so that it sees only the requests no route took.
    router.add(middleware: MethodNotAllowedMiddleware(routes: routes, server: allowField(anywhere)))
}

/// An `Allow` field's value: the methods of `taken` in a fixed order.
private func allowField(_ taken: Set<HTTPRequest.Method>) -> String {
    ([.get, .head, .post, .put, .patch, .delete, .options] as [HTTPRequest.Method])
        .filter(taken.contains).map(\.rawValue).joined(separator: ", ")
}

/// The 405 for a request no route took whose path is a route's: the method is one the route does not take, a
/// common one or any of the thirty-odd others the HTTP parser lets through (PURGE, TRACE, ...). Anything else
/// goes on to the 404. No two routes' paths match the same request path (none has a literal where another
/// captures), so the first that matches is the one the router would have chosen.
struct MethodNotAllowedMiddleware: RouterMiddleware {
    let routes: [(path: RouterPath, allow: String)]
    /// What `OPTIONS *` answers: every method some route takes.
    let server: String

    func handle(
        _ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        if request.uri.path == "*" {
            // The asterisk names no resource; only OPTIONS may ask about the server with it (RFC 9112, 3.2.4).
            guard request.method == .options else {
                throw APIError.badRequest("the request target * is for OPTIONS alone")
            }
            return Response(status: .noContent, headers: [.allow: server])
        }
        let segments = request.uri.path.split(separator: "/")
        guard
            let route = routes.first(where: { route in
                route.path.count == segments.count && zip(route.path, segments).allSatisfy { $0 ~= $1 }
            })
        else { return try await next(request, context) }
        // Logged and counted under its route.
        context.coreContext.endpointPath.value = route.path.description
        throw APIError.methodNotAllowed(request.method, allow: route.allow)
    }
}

/// The OpenAPI 3.1 document of every route (Sources/Server/openapi.json, shipped as a resource).
public func openAPIDocument() throws -> Data {
    guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json") else {
        throw APIError(.internalServerError, code: .missingDocument, "the OpenAPI document is not installed")
    }
    return try Data(contentsOf: url)
}

/// The `Server` field of every response.
let serverName = "rbac"

/// The application: the router on `host:port`. `onServerRunning` is told the address the server listens on (port
/// 0 picks a free one). Checks with a cached key are answered before the router (`CheckFastPath`). When shutdown
/// begins, a connection that is idle is given `shutdownGrace` to deliver a request already sent (`CheckFastPath`).
/// A connection closes after the answer to a request that does not keep it alive, or after `idleTimeout` with
/// nothing to do, and a request without one `Host` is refused (`StrictHTTP1Channel`). At most `maxConnections`
/// are open at once (`ClientConnections`).
public func buildApplication(
    _ dependencies: ServerDependencies, host: String, port: Int, logger: Logger,
    shutdownGrace: Duration = .seconds(1), idleTimeout: Duration = .seconds(60), maxConnections: Int = 10_000,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let timings = RouteMetricsMiddleware.timings(PrometheusMetricsFactory(registry: dependencies.metrics))
    return Application(
        router: buildRouter(dependencies),
        server: HTTPServerBuilder { responder in
            StrictHTTP1Channel(
                base: HTTP1Channel(
                    responder: responder,
                    configuration: .init(
                        additionalChannelHandlers: [
                            CheckFastPath(
                                keys: dependencies.keys, checker: dependencies.checker, timings: timings,
                                failures: dependencies.failures, logger: logger, shutdownGrace: shutdownGrace)
                        ])),
                idleTimeout: TimeAmount(idleTimeout))
        },
        configuration: .init(
            address: .hostname(host, port: port), serverName: serverName,
            availableConnectionsDelegate: ClientConnections(limit: maxConnections, registry: dependencies.metrics)),
        services: [BudgetSweeper(registry: dependencies.budgets)],
        onServerRunning: { await onServerRunning($0.localAddress?.port ?? port) },
        logger: logger)
}

/// What runs `application` until SIGTERM or SIGINT, then shuts it down gracefully: the listener closes at once
/// (new connections are refused), requests in flight are answered, and connections close after their last
/// answer. Whatever is still running after `drainTimeout` is cancelled, and `run()` returns.
public func serviceGroup(_ application: some ApplicationProtocol, drainTimeout: Duration, logger: Logger)
    -> ServiceGroup
{
    var configuration = ServiceGroupConfiguration(
        services: [application], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    configuration.maximumGracefulShutdownDuration = drainTimeout
    return ServiceGroup(configuration: configuration)
}

/// One log line per request, at debug level (`rbac serve --log-level debug`: under load, info-level access
/// lines would be most of what the service writes), with Hummingbird's request id; invitation tokens in paths
/// are redacted (`redacted(_:)`).
struct RequestLogMiddleware: RouterMiddleware {
    func handle(
        _ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        let response = try await next(request, context)
        Self.log(context.logger, request.method, request.uri.path, response.status, since: started)
        return response
    }

    /// The line for one request, answered with `status` (CheckFastPath writes it too).
    static func log(
        _ logger: Logger, _ method: HTTPRequest.Method, _ path: String, _ status: HTTPResponse.Status,
        since started: ContinuousClock.Instant
    ) {
        guard logger.logLevel <= .debug else { return }
        let elapsed = ContinuousClock.now - started
        logger.debug(
            "request",
            metadata: [
                "method": "\(method)", "path": "\(redacted(path))", "status": "\(status.code)",
                "ms": "\(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)",
            ])
    }

    /// `path` with each segment that may be a secret replaced: the one after a leading `/invitations/` or
    /// `/v1/invitations/`, where the routes read a token however it is spelt, and any that starts as an invitation
    /// token or a service key does, one sent to a path no route takes.
    static func redacted(_ path: String) -> String {
        guard path.contains("inv") || path.contains("rbk_") else { return path }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        let token =
            segments.starts(with: ["", "invitations"]) ? 2 : segments.starts(with: ["", "v1", "invitations"]) ? 3 : nil
        return segments.indices.map { index in
            index == token || SecretToken.Kind.allCases.contains { segments[index].hasPrefix($0.rawValue) }
                ? "[redacted]" : segments[index]
        }.joined(separator: "/")
    }
}

/// Times every request through swift-metrics: `http_requests_total` and `http_request_duration_seconds`, by
/// method, route (the matched pattern, so ids and tokens never become labels) and status.
struct RouteMetricsMiddleware: RouterMiddleware {
    let timings: CountedTimings

    init(factory: any MetricsFactory) {
        timings = Self.timings(factory)
    }

    /// The counter and timer of every route (CheckFastPath records into them too).
    static func timings(_ factory: any MetricsFactory) -> CountedTimings {
        CountedTimings(
            counter: "http_requests_total", timer: "http_request_duration_seconds",
            dimensions: ["method", "route", "status"], factory: factory)
    }

    func handle(
        _ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            record(request, context, status: response.status.code, since: started)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            record(request, context, status: status, since: started)
            throw error
        }
    }

    private func record(
        _ request: Request, _ context: AppRequestContext, status: Int, since started: ContinuousClock.Instant
    ) {
        Self.record(timings, request.method, route: context.endpointPath ?? "unmatched", status, since: started)
    }

    /// Counts and times one request to `route` (the matched pattern), answered with `status`.
    static func record(
        _ timings: CountedTimings, _ method: HTTPRequest.Method, route: String, _ status: Int,
        since started: ContinuousClock.Instant
    ) {
        timings.record([method.rawValue, route, String(status)], duration: ContinuousClock.now - started)
    }
}

/// Sweeps idle budget actors every quarter of the registry's idle time, so that a service with no budget
/// traffic lets go of them too; it stops when the service shuts down.
struct BudgetSweeper: Service {
    let registry: BudgetRegistry

    func run() async {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: registry.idleAfter / 4)
                registry.sweepIdle()
            }
        }
    }
}
