// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "rbac",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "rbac", targets: ["rbac"])
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // Already in the graph through Hummingbird; named so the server can use Logger directly.
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // Operation timing (swift-metrics), served at /metrics in Prometheus's text format.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Already in the graph through Hummingbird; named for the server's background service and for tests that
        // drive graceful shutdown.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Already in the graph through Hummingbird; named so that `rbac serve` can tell why it cannot listen.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // Already in the graph through Hummingbird: the HTTP parts CheckFastPath reads and writes.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
    ],
    targets: [
        // C libraries, found through pkg-config (scripts/install-deps installs them).
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),

        // Runs other programs without blocking the cooperative thread pool.
        .target(name: "ChildProcess"),
        // The only module that touches libpq.
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        // The only module that touches OpenSSL.
        .target(name: "Secrets", dependencies: ["COpenSSL"]),
        // The only module that touches libcurl: HTTPS requests and SMTP mail to other services.
        .target(name: "OutboundHTTP", dependencies: ["CCurl"]),
        // End users' tokens: JWS verification against a shared secret or an identity provider's JWKS.
        .target(name: "Identity", dependencies: ["OutboundHTTP", "Secrets", "Tenancy"]),
        // What both domains share: the actor, paging, the permission checker's protocol, operation metrics.
        .target(name: "Tenancy", dependencies: [.product(name: "CoreMetrics", package: "swift-metrics")]),
        // The collaboration domain: models, repository protocols, services (actors).
        .target(
            name: "Collaboration",
            dependencies: ["Secrets", "Tenancy", .product(name: "CoreMetrics", package: "swift-metrics")]),
        // The budget domain: tenant-scoped actors keyed by couple, gated by the couple's permissions.
        .target(name: "Budget", dependencies: ["Tenancy"]),
        // Postgres-backed repositories and the migration runner.
        .target(name: "Storage", dependencies: ["Budget", "Collaboration", "Postgres", "Secrets"]),
        // The outbox's worker: webhooks signed per Standard Webhooks and invitation emails, retried on a schedule.
        .target(
            name: "Delivery",
            dependencies: [
                "Collaboration", "OutboundHTTP", "Secrets", "Storage",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]),
        // The HTTP service: invitation pages and the permission API.
        .target(
            name: "Server",
            dependencies: [
                "Budget", "Collaboration", "Identity", "Secrets",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("openapi.json")]
        ),
        .executableTarget(
            name: "rbac",
            dependencies: [
                "Budget",
                "Collaboration",
                "Delivery",
                "Identity",
                "OutboundHTTP",
                "Secrets",
                "Server",
                "Storage",
                "Postgres",
                "ChildProcess",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),

        // scripts/bench-budget: the budget overview against the N+1 pattern, at 1x and 4x data.
        .executableTarget(
            name: "BudgetBenchmark", dependencies: ["Budget", "Collaboration", "Postgres", "Storage"],
            path: "Benchmarks/BudgetBenchmark"),
        // scripts/bench-scale: the permission cache under cold traffic, and deploys under load, at 1M couples.
        .executableTarget(
            name: "ScaleBenchmark", dependencies: ["Collaboration", "Postgres", "Storage"],
            path: "Benchmarks/ScaleBenchmark"),

        // Helpers shared by the test targets: a fresh database per test on the disposable server.
        .target(
            name: "TestSupport", dependencies: ["Collaboration", "Postgres", "Storage", "ChildProcess", "Secrets"],
            path: "Tests/TestSupport"),
        // The domains' rules over in-memory state, for fast tests of the services; never built into rbac.
        .target(
            name: "InMemoryRepositories", dependencies: ["Budget", "Collaboration", "Secrets", "Tenancy"],
            path: "Tests/InMemoryRepositories"),
        .testTarget(name: "PostgresTests", dependencies: ["CLibPQ", "Postgres", "TestSupport", "ChildProcess"]),
        .testTarget(name: "SecretsTests", dependencies: ["Secrets"]),
        .testTarget(
            name: "IdentityTests", dependencies: ["Identity", "OutboundHTTP", "Secrets", "TestSupport", "ChildProcess"]),
        .testTarget(
            name: "CollaborationTests", dependencies: ["Collaboration", "InMemoryRepositories", "TestSupport"]),
        .testTarget(
            name: "BudgetTests", dependencies: ["Budget", "Collaboration", "InMemoryRepositories", "TestSupport"]),
        .testTarget(
            name: "ServerTests",
            dependencies: [
                "Server", "Budget", "Collaboration", "Identity", "InMemoryRepositories", "OutboundHTTP", "Secrets",
                "Storage", "Postgres", "TestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(name: "CLITests", dependencies: ["Postgres", "TestSupport", "ChildProcess"]),
        .testTarget(
            name: "StorageTests",
            dependencies: [
                "Storage", "Budget", "Collaboration", "Delivery", "InMemoryRepositories", "OutboundHTTP", "Postgres",
                "Secrets", "TestSupport", "ChildProcess", .product(name: "Prometheus", package: "swift-prometheus"),
            ]),
    ]
)
