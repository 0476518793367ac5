import ChildProcess
import Foundation
import Postgres

/// A PostgreSQL cluster of one test's own (scripts/pg-cluster), for tests that stop or restart the server and
/// so must not share it with other tests.
public final class DisposableCluster: Sendable {
    public let directory: URL
    public let url: String

    /// Runs `body` with a new, started cluster, and deletes the cluster afterwards.
    public static func with<T>(_ body: (DisposableCluster) async throws -> T) async throws -> T {
        let cluster = try await DisposableCluster()
        return try await ensuring {
            try await body(cluster)
        } finally: {
            try await run("destroy", cluster.directory)
        }
    }

    private init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-cluster-\(UUID().uuidString)")
        try await Self.run("create", directory)
        try await Self.run("start", directory)
        let port = try String(contentsOf: directory.appendingPathComponent("port"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        url = "postgresql://postgres@127.0.0.1:\(port)/postgres"
    }

    public func stop() async throws { try await Self.run("stop", directory) }
    public func start() async throws { try await Self.run("start", directory) }
    public func restart() async throws { try await Self.run("restart", directory) }

    private static func run(_ command: String, _ directory: URL) async throws {
        let result = try await ChildProcess.run(
            repositoryRoot.appendingPathComponent("scripts/pg-cluster").path, [command, directory.path])
        guard result.status == 0 else {
            throw TestSetupError(
                "scripts/pg-cluster \(command) exited with \(result.status): \(result.errorOutput)")
        }
    }
}
