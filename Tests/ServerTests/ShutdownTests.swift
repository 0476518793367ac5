import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
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
    @Test("a request in flight when shutdown begins is answered; new connections are refused")
    func drainsInFlightRequests() async throws {
        let fixture = try await Fixture()
        let gate = Gate()
        let dependencies = ServerDependencies(
            repository: fixture.repository, keys: ServiceKeyService(repository: GatedKeys(gate: gate)),
            verifier: fixture.verifier, publicBaseURL: URL(string: "https://rbac.test")!, isReady: { true })
        let listening = AsyncStream.makeStream(of: Int.self)
        let app = buildApplication(
            dependencies, host: "127.0.0.1", port: 0, logger: Logger(label: "shutdown-test"),
            onServerRunning: { listening.continuation.yield($0) })
        let group = ServiceGroup(services: [app], logger: Logger(label: "shutdown-test"))

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var ports = listening.stream.makeAsyncIterator()
            let port = try #require(await ports.next())

            let client = TestClient(host: "127.0.0.1", port: port)
            client.connect()
            // Held inside the key lookup until the gate opens.
            let inFlight = Task {
                try await client.get("/v1/users/\(UUID())/couples", headers: [.authorization: "Bearer rbk_\(key)"])
            }
            await gate.waitUntilEntered()

            await group.triggerGracefulShutdown()
            // Shutdown has begun once the listener is closed: new connections are refused.
            while await Self.canConnect(port: port) { await Task.yield() }

            await gate.open()
            let response = try await inFlight.value
            #expect(response.status == .unauthorized, "answered, by the unknown key's 401, after shutdown began")
            try await client.shutdown()
            try await tasks.waitForAll()
        }
    }

    /// A well-formed key (43 base64url characters) that no repository knows.
    private let key = String(repeating: "A", count: 42) + "E"

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

/// Service keys whose lookup waits at the gate, then finds nothing.
private struct GatedKeys: ServiceKeyRepository {
    let gate: Gate

    func createKey(name: String, keyHash: [UInt8]) async throws -> ServiceKey {
        throw CollaborationError(.invalidInput, "not in this test")
    }
    func keys() async throws -> [ServiceKey] { [] }
    func revokeKey(_ id: UUID) async throws -> ServiceKey { throw CollaborationError(.notFound, "no keys") }
    func key(withHash hash: [UInt8]) async throws -> ServiceKey? {
        await gate.enter()
        return nil
    }
}
