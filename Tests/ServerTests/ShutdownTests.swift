import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import InMemoryRepositories
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import Testing

@testable import Server

/// Graceful shutdown over real HTTP: a request in flight when shutdown begins is still answered.
@Suite("Graceful shutdown", .timeLimit(.minutes(1)))
struct ShutdownTests {
    /// Serves `keys` (with the fixture's other dependencies) on a free port, run by the group `makeGroup` makes,
    /// and hands `body` a client connected to it and the group; waits for the group to finish afterwards.
    private static func serving(
        keys: ServiceKeyService? = nil, shutdownGrace: Duration = .seconds(1),
        group makeGroup: (any ApplicationProtocol) -> ServiceGroup = {
            ServiceGroup(services: [$0], logger: Logger(label: "shutdown-test"))
        },
        _ body: (_ client: TestClient, _ port: Int, _ group: ServiceGroup) async throws -> Void
    ) async throws {
        let fixture = try await Fixture()
        let dependencies = ServerDependencies(
            repository: fixture.repository, keys: keys ?? fixture.keys, tokens: fixture.tokens,
            publicBaseURL: URL(string: "https://rbac.test")!, budgets: InMemoryBudgetRepository(), isReady: { true })
        let listening = AsyncStream.makeStream(of: Int.self)
        let group = makeGroup(
            buildApplication(
                dependencies, host: "127.0.0.1", port: 0, logger: Logger(label: "shutdown-test"),
                shutdownGrace: shutdownGrace, onServerRunning: { listening.continuation.yield($0) }))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var ports = listening.stream.makeAsyncIterator()
            let port = try #require(await ports.next())
            let client = TestClient(host: "127.0.0.1", port: port)
            client.connect()
            try await body(client, port, group)
            try? await client.shutdown()
            try await tasks.waitForAll()
        }
    }

    @Test("a request in flight when shutdown begins is answered; new connections are refused")
    func drainsInFlightRequests() async throws {
        let gate = Gate()
        try await Self.serving(keys: ServiceKeyService(repository: GatedKeys(gate: gate))) { client, port, group in
            // Held inside the key lookup until the gate opens.
            let inFlight = Task {
                try await client.get(
                    "/v1/users/\(UUID())/couples", authority: "rbac.test",
                    headers: [.authorization: "Bearer rbk_\(Self.key)"])
            }
            await gate.waitUntilEntered()

            await group.triggerGracefulShutdown()
            // Shutdown has begun once the listener is closed: new connections are refused.
            while await Self.canConnect(port: port) { await Task.yield() }

            await gate.open()
            let response = try await inFlight.value
            #expect(response.status == .unauthorized, "answered, by the unknown key's 401, after shutdown began")
        }
    }

    @Test("a request sent on an idle keep-alive connection as shutdown begins is answered, and the connection closes")
    func answersRequestOnIdleConnection() async throws {
        // A grace far longer than the test needs: the request is sent well within it.
        try await Self.serving(shutdownGrace: .seconds(30)) { client, port, group in
            #expect(
                try await client.get("/health", authority: "rbac.test").status == .ok,
                "the connection is now idle, kept alive")

            await group.triggerGracefulShutdown()
            while await Self.canConnect(port: port) { await Task.yield() }

            let late = try await client.get("/health", authority: "rbac.test")
            #expect(late.status == .ok, "answered, on the connection that was idle when shutdown began")
            await #expect(throws: (any Error).self, "the connection closed after that answer") {
                _ = try await client.get("/health", authority: "rbac.test")
            }
        }
    }

    @Test("a request still unanswered when the drain time is up is cancelled, and the service stops")
    func drainIsBounded() async throws {
        let gate = Gate()
        let stuck = Mutex<Task<TestClient.Response, any Error>?>(nil)
        let drainingBriefly = { (app: any ApplicationProtocol) in
            serviceGroup(app, drainTimeout: .milliseconds(200), logger: Logger(label: "shutdown-test"))
        }
        try await Self.serving(
            keys: ServiceKeyService(repository: GatedKeys(gate: gate, whenEntered: .seconds(3600))),
            group: drainingBriefly
        ) { client, _, group in
            // Held for an hour once it has passed the gate.
            stuck.withLock {
                $0 = Task {
                    try await client.get(
                        "/v1/users/\(UUID())/couples", authority: "rbac.test",
                        headers: [.authorization: "Bearer rbk_\(Self.key)"])
                }
            }
            await gate.waitUntilEntered()
            await group.triggerGracefulShutdown()
        }
        let cutOff = try? await stuck.withLock { $0 }?.value
        #expect(cutOff?.status != .unauthorized, "not answered as the lookup would have answered")
    }

    /// A well-formed key (43 base64url characters) that no repository knows.
    private static let key = String(repeating: "A", count: 42) + "E"

    private static func canConnect(port: Int) async -> Bool {
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: port).get()
            try? await channel.close()
            return true
        } catch {
            return false
        }
    }
}

/// Lets a test hold a request at a known point: `enter` waits until the test calls `open`.
private actor Gate {
    private var entered: [CheckedContinuation<Void, Never>] = []
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var isEntered = false
    private var isOpen = false

    func enter() async {
        isEntered = true
        for continuation in entered { continuation.resume() }
        entered = []
        if isOpen { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    func waitUntilEntered() async {
        if isEntered { return }
        await withCheckedContinuation { entered.append($0) }
    }

    func open() {
        isOpen = true
        for continuation in waiting { continuation.resume() }
        waiting = []
    }
}

/// Service keys whose lookup waits at the gate, then (for `whenEntered`, or until cancelled) finds nothing.
private struct GatedKeys: ServiceKeyRepository {
    let gate: Gate
    var whenEntered: Duration = .zero

    func createKey(name: String, keyHash: [UInt8]) async throws -> ServiceKey {
        throw CollaborationError(.invalidInput, "not in this test")
    }
    func keys() async throws -> [ServiceKey] { [] }
    func revokeKey(_ id: UUID) async throws -> (key: ServiceKey, revokedNow: Bool) {
        throw CollaborationError(.notFound, "no keys")
    }
    func key(withHash hash: [UInt8]) async throws -> ServiceKey? {
        if whenEntered > .zero {
            Task { await gate.enter() }
            try await Task.sleep(for: whenEntered)
        } else {
            await gate.enter()
        }
        return nil
    }
    func recordUse(of keys: Set<UUID>) async throws {}
}

extension TestClient {
    /// `get` with the `Host` field an HTTP/1.1 request must carry, which `get` leaves out and `StrictHTTP1Channel`
    /// refuses a request without.
    fileprivate func get(_ uri: String, authority: String, headers: HTTPFields = [:]) async throws -> Response {
        try await execute(.init(uri, method: .get, authority: authority, headers: headers))
    }
}
