import ArgumentParser
import Collaboration
import Delivery
import Foundation
import Logging
import NIOCore
import OutboundHTTP
import Postgres
import Prometheus
import Server
import Storage

extension RBAC {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the HTTP service: invitation pages and the permission API.",
            discussion: """
                Verifies end users' tokens with the identity provider's keys (--jwt-issuer, --jwks-url or \
                --jwks-file; ES256, RS256, EdDSA) or an HS256 secret (--jwt-secret-file, or $RBAC_JWT_SECRET). \
                On SIGINT/SIGTERM it stops taking connections, answers \
                the requests in flight (for up to --drain-timeout), closes each connection after its last \
                answer, and exits 0.

                Example: rbac serve --public-url https://invite.example.com --jwt-issuer https://tenant.eu.auth0.com/
                """)

        /// The database connections serve holds, and how many of them one couple's requests, and all changes
        /// together, may take at once (`CoupleAdmission`): half and three quarters.
        static let databaseConnections = 16
        static let coupleRequests = (each: databaseConnections / 2, all: databaseConnections * 3 / 4)

        @Option(help: "Address to listen on (default $RBAC_HOST, else 127.0.0.1).") var host: String?
        @Option(parsing: .unconditional, help: "Port to listen on (default $RBAC_PORT, else 8080).") var port: Int?
        @Option(
            help: ArgumentHelp(
                "Public base URL of invitation links (default $RBAC_PUBLIC_URL, else http://HOST:PORT).",
                valueName: "url"))
        var publicURL: String?
        @Flag(help: "Answer every check from the database (no permission or key cache).") var noCache = false
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "At most this many couples' permission sets are kept in memory.", valueName: "n"))
        var cacheCapacity: Int = 100_000
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                """
                How long after a change committed elsewhere a cached answer may still ignore it: 20ms to 10s. \
                Past it, checks go to the database until the change feed has caught up.
                """, valueName: "duration"))
        var maxStaleness: ShortDuration = ShortDuration(argument: "50ms")!
        @Option(
            help: ArgumentHelp(
                """
                A reverse proxy (address or CIDR range, repeatable) whose X-Forwarded-For header (see \
                --forwarded-header) names the client, for the limit on invalid invitation links and \
                --metrics-from. Without it, the peer is the client.
                """, valueName: "cidr"))
        var trustedProxy: [String] = []
        @Option(
            help: ArgumentHelp(
                """
                The header the trusted proxies write the client's address in: X-Forwarded-For (the default) or \
                Forwarded (RFC 7239). The other one is the client's own, passed on untouched, and is ignored.
                """, valueName: "header"))
        var forwardedHeader: String?
        @Option(
            help: ArgumentHelp(
                """
                A client (address or CIDR range, repeatable) that GET /metrics answers, by its address as \
                --trusted-proxy tells it; the rest get 403. Default: this machine (127.0.0.0/8, ::1). Give the \
                scraper's: --metrics-from 10.0.0.0/8, or 0.0.0.0/0 and ::/0 for anyone.
                """, valueName: "cidr"))
        var metricsFrom: [String] = []
        @Option(
            help: ArgumentHelp(
                """
                An origin of the app's own pages (repeatable: https://app.example.com) whose scripts may call \
                the invitation's JSON preview, its acceptance and POST /v1/sign-in from the browser (CORS).
                """, valueName: "origin"))
        var corsOrigin: [String] = []
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                """
                On SIGTERM or SIGINT, how long requests in flight may take to be answered before the rest are \
                cut off: 1s to 300s.
                """, valueName: "duration"))
        var drainTimeout: ShortDuration = ShortDuration(argument: "10s")!
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                """
                Close a connection after this long with no answer owed and nothing sent, or with a request's \
                head or body taking longer than that in all: 1s to 3600s. The service's own work on a request is \
                not limited.
                """, valueName: "duration"))
        var idleTimeout: ShortDuration = ShortDuration(argument: "60s")!
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                """
                How long a statement may wait for a lock another transaction holds (a change to the same couple, \
                a migration, a session left open in psql) before its request is answered 503: 100ms to 600s. \
                Each request waiting holds a database connection; serve answers at most \
                \(Serve.coupleRequests.each) requests of one couple at once, half its connections, and \
                \(Serve.coupleRequests.all) changes in all, the rest in turn, so that other couples' \
                requests, and checks, find one. \
                It replaces a lock_timeout that the database URL's options set.
                """, valueName: "duration"))
        var lockTimeout: ShortDuration = ShortDuration(argument: "5s")!
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                """
                At most this many client connections open at once; more wait to be taken until one closes. \
                Default: what the open-file limit (ulimit -Hn, to which serve raises ulimit -n) leaves after \
                256 kept for the database and outbound connections.
                """, valueName: "n"))
        var maxConnections: Int?
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                """
                How often to record expired memberships and invitations in the audit logs and the outbox, to \
                delete outbox messages kept long enough (rbac sweep), to record which service keys were \
                used (rbac keys list), and to forget requests sent with an Idempotency-Key a day ago: 1s to \
                3600s. Expiry itself does not wait for it.
                """, valueName: "duration"))
        var sweepInterval: ShortDuration = ShortDuration(argument: "60s")!
        @OptionGroup var keeping: OutboxKeepingOptions
        @Flag(
            help: ArgumentHelp(
                """
                On a Citus cluster, read each couple's budget on the worker that holds it, not through the \
                coordinator: this server must reach the workers as the coordinator names them (pg_dist_node); \
                the couples of a worker it cannot reach are read through the coordinator, with a warning.
                """))
        var budgetReadsOnWorkers = false
        @Option(help: "Log level: trace, debug (one line per request), info, notice, warning, error, critical.")
        var logLevel: String = "info"
        @OptionGroup var tokens: TokenOptions
        @OptionGroup var signIn: SignInOptions
        @OptionGroup var delivery: DeliveryKeyOptions
        @OptionGroup var mail: MailOptions
        @OptionGroup var database: DatabaseOptions

        func validate() throws {
            guard Logger.Level(rawValue: logLevel) != nil else {
                throw ValidationError("unknown log level \(quoted(logLevel))")
            }
            _ = try trustedProxies()
            _ = try metricsClients()
            do { _ = try BrowserOrigins(parsing: corsOrigin) } catch { throw ValidationError(error.description) }
            try drainTimeout.require("--drain-timeout", from: "1s", to: "300s")
            try idleTimeout.require("--idle-timeout", from: "1s", to: "3600s")
            try lockTimeout.require("--lock-timeout", from: "100ms", to: "600s")
            guard cacheCapacity >= 1 else {
                throw ValidationError("--cache-capacity must be at least 1, not \(cacheCapacity)")
            }
            if let maxConnections, maxConnections < 1 {
                throw ValidationError("--max-connections must be at least 1, not \(maxConnections)")
            }
            try sweepInterval.require("--sweep-interval", from: "1s", to: "3600s")
            try maxStaleness.require("--max-staleness", from: "20ms", to: "10s")
        }

        /// `--max-connections`, or what the open files left beside the ones kept allow; refused beyond them.
        func clientConnections() throws -> Int {
            let openFiles = OpenFiles.raisedLimit()
            let spare = openFiles - OpenFiles.kept
            guard spare >= 1 else {
                throw CommandFailure(
                    .usage,
                    "this process may open \(openFiles) files (ulimit -Hn; LimitNOFILE under systemd), and serve "
                        + "keeps \(OpenFiles.kept) for the database and outbound connections: raise the limit")
            }
            if let maxConnections, maxConnections > spare {
                throw CommandFailure(
                    .usage,
                    "--max-connections \(maxConnections) is more than the \(spare) connections this process's "
                        + "\(openFiles) open files leave beside the \(OpenFiles.kept) serve keeps (ulimit -Hn; "
                        + "LimitNOFILE under systemd)")
            }
            return maxConnections ?? spare
        }

        /// `--trusted-proxy` and `--forwarded-header`, which says nothing without it.
        func trustedProxies() throws -> TrustedProxies {
            let header = try forwardedHeader.map {
                guard let header = TrustedProxies.Header(rawValue: $0.lowercased()) else {
                    throw ValidationError("--forwarded-header is X-Forwarded-For or Forwarded, not \(quoted($0))")
                }
                guard !trustedProxy.isEmpty else {
                    throw ValidationError("--forwarded-header names the header of the proxies --trusted-proxy names")
                }
                return header
            }
            do { return try TrustedProxies(parsing: trustedProxy, header: header ?? .xForwardedFor) } catch {
                throw ValidationError(error.message("--trusted-proxy"))
            }
        }

        /// `--metrics-from`, this machine when not given: what the service is doing (its routes' traffic, its
        /// pool, its cache) is its operator's to read, and it also answers invitees on the public internet.
        func metricsClients() throws -> AddressRanges {
            do { return try AddressRanges(parsing: metricsFrom.isEmpty ? ["127.0.0.0/8", "::1"] : metricsFrom) } catch {
                throw ValidationError(error.message("--metrics-from"))
            }
        }

        func run() async throws {
            // A server outlives whoever reads its log: once that pipe closes, a log line fails with EPIPE and is
            // dropped, instead of SIGPIPE ending the service. NIO ignores SIGPIPE too, but only from its first
            // socket on; the lines serve writes while it starts come before that.
            signal(SIGPIPE, SIG_IGN)
            let environment = ProcessInfo.processInfo.environment
            let (hostSource, host) =
                host.map { ("--host", $0) } ?? ("RBAC_HOST", environment["RBAC_HOST"] ?? "127.0.0.1")
            guard !host.isEmpty, !host.contains(where: \.isWhitespace), !containsControlCharacter(host) else {
                throw CommandFailure(
                    .usage, "\(hostSource) must be an address or host name to listen on, not \(quoted(host))")
            }
            let (portSource, text) =
                port.map { ("--port", String($0)) } ?? ("RBAC_PORT", environment["RBAC_PORT"] ?? "8080")
            // Digits only: Int reads "+80" as 80, which no port is written as.
            guard text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let port = Int(text),
                (1...65535).contains(port)
            else {
                throw CommandFailure(.usage, "\(portSource) must be a port number from 1 to 65535, not \(quoted(text))")
            }
            let baseURL = try CommandContext.publicBaseURL(
                publicURL, fallback: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")
            let maxConnections = try clientConnections()

            var configuration: PostgresConfiguration?
            do {
                var resolved = try await database.configuration()
                resolved.settings["lock_timeout"] = PostgresConfiguration.milliseconds(lockTimeout.duration)
                configuration = resolved
                let connectionWait = Duration.seconds(5)
                let pool = PostgresConnectionPool(
                    configuration: resolved, maxConnections: Self.databaseConnections, acquireTimeout: connectionWait)
                LoggingSystem.bootstrap(LineLogHandler.standardError)
                var logger = Logger(label: "rbac")
                logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
                try await Self.requireServable(pool, database: resolved, logger: logger)
                let verifier = try await tokens.verifier(
                    environment, signInIssuer: signIn.oidcIssuer, logger: logger)
                let signIn = try await signIn.signIn(
                    publicBaseURL: baseURL, http: tokens.http, leeway: tokens.jwtLeeway.duration,
                    environment: environment, logger: logger)
                let registry = PrometheusCollectorRegistry()
                let metrics = ServerDependencies.operationMetrics(registry)
                let permissionCache = PermissionCache(
                    capacity: cacheCapacity, metrics: PrometheusMetricsFactory(registry: registry))
                let keyCache = ServiceKeyCache()
                let feed = ChangeFeed(
                    configuration: resolved, permissions: permissionCache, keys: keyCache,
                    maxStaleness: maxStaleness.duration)
                // The delivery key seals invitation links into the outbox and opens webhook secrets to sign with.
                let deliveryKey = try delivery.key(environment)
                let repository = PostgresCollaborationRepository(
                    pool: pool, invalidating: permissionCache, deliveryKey: deliveryKey)
                let budgetReads =
                    budgetReadsOnWorkers
                    ? BudgetReadPools(coordinator: pool) { [logger] in logger.warning("\($0)") } : nil
                let keys = ServiceKeyService(
                    repository: PostgresServiceKeyRepository(pool: pool), cache: noCache ? nil : keyCache,
                    isCacheTrusted: feed.isTrusted, metrics: metrics)
                let idempotentRequests = PostgresIdempotentRequests(pool: pool)
                let dependencies = ServerDependencies(
                    repository: repository, keys: keys,
                    tokens: verifier, emailVerifyingIssuers: Set(tokens.trustEmailFrom), signIn: signIn,
                    publicBaseURL: baseURL,
                    trustedProxies: try trustedProxies(),
                    browserOrigins: try BrowserOrigins(parsing: corsOrigin),
                    checker: PermissionChecker(
                        repository: repository, cache: noCache ? nil : permissionCache,
                        isCacheTrusted: feed.isTrusted, metrics: metrics),
                    budgets: PostgresBudgetRepository(pool: pool, reads: budgetReads),
                    metrics: registry, sampleMetrics: Self.poolGauges(pool, registry),
                    metricsClients: try metricsClients(), idempotentRequests: idempotentRequests,
                    coupleRequests: (Self.coupleRequests.each, Self.coupleRequests.all, connectionWait),
                    isReady: { (try? await pool.query("SELECT 1")) != nil })
                logger.info(
                    "rbac serve",
                    metadata: [
                        "database": "\(resolved.redactedDescription)", "url": "\(baseURL)",
                        "cache": "\(noCache ? "off" : "on")", "connections": "\(maxConnections)",
                    ])
                // The outbox's worker: without the delivery key it can open no endpoint's secret.
                let mailer = try mail.mail(caFile: tokens.caFile)
                let worker = Task { [logger] in
                    guard let deliveryKey else {
                        return logger.notice("outbox delivery off: no delivery key (--delivery-key-file)")
                    }
                    await OutboxWorker(
                        outbox: PostgresOutbox(pool: pool),
                        http: OutboundHTTP(.init(totalTimeout: .seconds(15), caFile: tokens.caFile)), key: deliveryKey,
                        mail: mailer, links: baseURL,
                        metrics: PrometheusMetricsFactory(registry: registry)
                    ).run { logger.warning("\($0)") }
                }
                let sweeper = Task { [logger, sweepInterval, keeping] in
                    while !Task.isCancelled {
                        // Each part on its own: one that keeps failing (its statement timing out, say) does not
                        // stop the others. One warning a sweep, naming the parts that failed.
                        var failed: Logger.Metadata = [:]
                        func part(_ name: String, _ body: () async throws -> Void) async {
                            do { try await body() } catch { failed[name] = "\(error)" }
                        }
                        await part("expiries") {
                            let swept = try await repository.sweepExpired()
                            if swept.memberships + swept.invitations > 0 {
                                logger.info(
                                    "recorded expiries",
                                    metadata: [
                                        "memberships": "\(swept.memberships)", "invitations": "\(swept.invitations)",
                                    ])
                            }
                            if swept.unreached > 0 {
                                failed["expiries"] =
                                    """
                                    left \(swept.unreached) for later: their couples' Citus worker could not be \
                                    reached: \(swept.unreachedWorkers.joined(separator: ", "))
                                    """
                            }
                        }
                        await part("outbox") {
                            let pruned = try await PostgresOutbox(pool: pool).prune(
                                keepSent: keeping.keepSent.duration, keepDead: keeping.keepDead.duration)
                            if pruned.sent + pruned.dead > 0 {
                                logger.info(
                                    "deleted outbox messages kept long enough",
                                    metadata: ["sent": "\(pruned.sent)", "dead": "\(pruned.dead)"])
                            }
                        }
                        await part("keys_used") { try await keys.recordUses() }
                        await part("kept_answers") { _ = try await idempotentRequests.prune() }
                        if !failed.isEmpty {
                            logger.warning("sweeping failed in part; trying again later", metadata: failed)
                        }
                        try? await Task.sleep(for: sweepInterval.duration)
                    }
                }
                let listener = Task { [logger] in
                    guard !noCache else { return }
                    await feed.run { listening, error in
                        if listening {
                            logger.info("change feed listening; permission cache on")
                        } else {
                            logger.warning(
                                "change feed lost; permission cache off until it is back",
                                metadata: error.map { ["error": "\($0)"] } ?? [:])
                        }
                    }
                }
                let application = buildApplication(
                    dependencies, host: host, port: port, logger: logger,
                    shutdownGrace: min(.seconds(1), drainTimeout.duration), idleTimeout: idleTimeout.duration,
                    maxConnections: maxConnections)
                // The background tasks end before serve does, also when it could not listen: otherwise one of
                // them could still log after the error that ends the process. Then the keys used since the last
                // sweep are recorded. Both within a second, as the drain is bounded: a statement in flight to a
                // database that stopped answering waits for tcp_user_timeout (15 s), cancelled or not, and must
                // not hold the exit; what is left undone then ends with the process.
                var failure: (any Error)?
                do {
                    try await serviceGroup(application, drainTimeout: drainTimeout.duration, logger: logger).run()
                } catch {
                    failure = error
                }
                listener.cancel()
                worker.cancel()
                sweeper.cancel()
                let ended = await Self.ends(within: min(.seconds(1), drainTimeout.duration)) { [logger] in
                    await listener.value
                    await worker.value
                    await sweeper.value
                    do { try await keys.recordUses() } catch {
                        logger.warning(
                            "could not record which service keys were used", metadata: ["error": "\(error)"])
                    }
                }
                if !ended {
                    // Held by a database that stopped answering: a webhook or an email on its way ends when
                    // cancelled.
                    logger.warning(
                        """
                        stopping with background work unfinished: a message being sent goes again once its lease \
                        lapses, and the service keys used since the last sweep may stay unrecorded
                        """)
                }
                await budgetReads?.close()
                await pool.close()
                if let failure { throw failure }
                logger.info("rbac serve stopped")
            } catch let error as IOError {
                // The only sockets NIO opens here are the server's: binding failed (port taken, say).
                let reason = String(cString: strerror(error.errnoCode)).lowercased()
                throw CommandFailure(.usage, "cannot listen on \(host):\(port): \(reason)")
            } catch let error where error is SocketAddressError || error is SocketAddressError.UnknownHost {
                throw CommandFailure(.usage, "cannot listen on \(host):\(port): no such host")
            } catch {
                throw CommandFailure(error, database: configuration)
            }
        }
    }

    /// A short duration as people write it: 50ms, 2s.
    struct ShortDuration: ExpressibleByArgument {
        let duration: Duration
        let defaultValueDescription: String

        init?(argument: String) {
            guard let match = argument.wholeMatch(of: /(\d{1,6})(ms|s)/), let count = Int(match.1) else { return nil }
            duration = match.2 == "ms" ? .milliseconds(count) : .seconds(count)
            defaultValueDescription = argument
        }

        /// Refuses a duration outside `low` to `high`, both written as the option takes them ("100ms", "600s"),
        /// saying what was given.
        func require(_ option: String, from low: String, to high: String) throws {
            let range = Self(argument: low)!.duration...Self(argument: high)!.duration
            guard range.contains(duration) else {
                throw ValidationError("\(option) must be from \(low) to \(high), not \(defaultValueDescription)")
            }
        }
    }
}

extension RBAC.Serve {
    /// Runs `body`; whether it ended within `limit`. Past it, what `body` has not done is left undone, as the
    /// process is about to exit, rather than holding the exit for as long as `body` waits.
    static func ends(within limit: Duration, _ body: @escaping @Sendable () async -> Void) async -> Bool {
        let (ends, end) = AsyncStream<Bool>.makeStream()
        Task {
            await body()
            end.yield(true)
        }
        let timer = Task {
            try? await Task.sleep(for: limit)
            end.yield(false)
        }
        defer { timer.cancel() }
        for await ended in ends { return ended }
        return false
    }

    /// Records the pool's connections (idle and leased, of how many at most) and the tasks waiting for one, for
    /// `/metrics` to sample as it is read: a check that waits past the pool's timeout is a 503.
    static func poolGauges(_ pool: PostgresConnectionPool, _ registry: PrometheusCollectorRegistry)
        -> @Sendable () -> Void
    {
        func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Gauge {
            registry.makeGauge(
                descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        }
        let connections = "The database pool's connections, idle or leased to a task."
        let idle = gauge("rbac_database_connections", connections, [("state", "idle")])
        let leased = gauge("rbac_database_connections", connections, [("state", "leased")])
        let waiting = gauge("rbac_database_waiting_tasks", "Tasks waiting for a database connection.")
        gauge("rbac_database_connections_max", "The database pool's connections at most.")
            .set(Int64(pool.maxConnections))
        return {
            let usage = pool.usage
            idle.set(Int64(usage.idle))
            leased.set(Int64(usage.open - usage.idle))
            waiting.set(Int64(usage.waiting))
        }
    }

    /// Refuses to serve through a login role that is no operator (`CommandContext.requireOperator`), or a database
    /// that lacks a migration of this release, as when a release is deployed before `rbac migrate` ran: requests
    /// would fail one by one; or that lacks the policy after its migrations (`AccessPolicy.isPending`). A database
    /// that does not answer yet is left to `/ready` and the change feed, as always, but settings libpq refuses
    /// would never reach one; one a later release migrated further serves.
    /// Without `sql/` beside the binary there is nothing to compare with, which serve says. On Citus, it warns
    /// when the coordinator's connections to its workers would wait out TCP for a host that vanished, if its role
    /// may read that setting.
    static func requireServable(_ pool: PostgresConnectionPool, database: PostgresConfiguration, logger: Logger)
        async throws
    {
        var runner: MigrationRunner?
        do {
            runner = try MigrationRunner.load(from: try ProjectFiles.directory("sql"))
        } catch {
            logger.warning("cannot tell whether the database is migrated", metadata: ["error": "\(error)"])
        }
        do {
            try await CommandContext.requireOperator(pool, database: database)
            if let pending = try await runner?.pending(pool), let first = pending.first {
                let count = pending.count == 1 ? "a migration" : "\(pending.count) migrations"
                throw CommandFailure(
                    .conflict,
                    "the database at \(database.redactedDescription) lacks \(count) of this release, from "
                        + "\(first.fileName) on: run `rbac migrate` first")
            }
            if try await AccessPolicy.isPending(on: pool) {
                throw CommandFailure(
                    .conflict,
                    "the database at \(database.redactedDescription) lacks the access policy its migrations need "
                        + "(policies/): run `rbac migrate` first")
            }
            // Each request to a couple of a worker whose host vanished would wait on the coordinator's connection to
            // it as long as TCP does, with a connection and a couple's place; the setting is the operator's. Only a
            // superuser or a member of pg_read_all_settings sees it; pg_settings leaves it out for other roles,
            // where current_setting would fail.
            if let conninfo = try await pool.query(
                """
                SELECT s.setting FROM pg_settings s, pg_extension e
                WHERE s.name = 'citus.node_conninfo' AND e.extname = 'citus'
                """
            ).first?.decode("setting", as: String.self), !PostgresConfiguration.givesUpOnSilentServers(conninfo) {
                logger.warning(
                    """
                    Citus's connections to its workers wait about a quarter of an hour on a worker whose host \
                    vanished, and requests to its couples with them: give the coordinator's citus.node_conninfo a \
                    tcp_user_timeout (15000, say) and keepalives
                    """)
            }
        } catch let error as PostgresError where error.unreachable {
            return
        }
    }
}
