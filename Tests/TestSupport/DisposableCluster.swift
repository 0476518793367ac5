import Foundation

/// A PostgreSQL cluster of one test's own (scripts/pg-cluster), for tests that stop or restart the server and
/// so must not share it with other tests.
public final class DisposableCluster: Sendable {
    public let directory: URL
    public let url: String

    /// Creates and starts the cluster.
    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-cluster-\(UUID().uuidString)")
        try Self.run("create", directory)
        try Self.run("start", directory)
        let port = try String(contentsOf: directory.appendingPathComponent("port"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        url = "postgresql://postgres@127.0.0.1:\(port)/postgres"
    }

    deinit { try? Self.run("destroy", directory) }

    public func stop() throws { try Self.run("stop", directory) }
    public func start() throws { try Self.run("start", directory) }
    public func restart() throws { try Self.run("restart", directory) }

    private static func run(_ command: String, _ directory: URL) throws {
        let process = Process()
        process.executableURL = repositoryRoot.appendingPathComponent("scripts/pg-cluster")
        process.arguments = [command, directory.path]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSetupError("scripts/pg-cluster \(command) exited with \(process.terminationStatus)")
        }
    }
}
