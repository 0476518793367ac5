import ChildProcess
import Foundation
import Postgres

/// A real HTTPS server on loopback (Tests/tools/https_server.py) with a certificate from a test CA
/// (scripts/test-ca): what an identity provider's endpoints look like to rbac, files swappable while it runs.
public struct HTTPSPeer: Sendable {
    /// `https://127.0.0.1:PORT`.
    public let baseURL: URL
    /// The test CA's certificate: trust it and nothing else.
    public let caFile: String
    /// The served directory: a file here is `baseURL/NAME`; `NAME.headers` (JSON) adds header fields to it.
    public let root: URL

    /// Runs `body` with a new server, and stops the server after it. `script` (in Tests/tools) is the server: it
    /// takes the certificate, its key and the root directory, and prints its port.
    public static func with<T>(script: String = "https_server.py", _ body: (HTTPSPeer) async throws -> T)
        async throws -> T
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-https-\(UUID())")
        let root = directory.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let ca = try await ChildProcess.run(
            repositoryRoot.appendingPathComponent("scripts/test-ca").path, [directory.path])
        guard ca.status == 0 else { throw ToolError(description: "scripts/test-ca failed: \(ca.errorOutput)") }
        let server = try await ChildProcess.start(
            "/usr/bin/env",
            [
                "python3", repositoryRoot.appendingPathComponent("Tests/tools/\(script)").path,
                directory.appendingPathComponent("server.pem").path,
                directory.appendingPathComponent("server.key").path, root.path,
            ], errorLog: directory.appendingPathComponent("server.log").path)
        guard server.ready, let port = server.lines.last.flatMap({ Int($0) }) else {
            await server.stop()
            throw ToolError(description: "\(script) did not start")
        }
        let peer = HTTPSPeer(
            baseURL: URL(string: "https://127.0.0.1:\(port)")!,
            caFile: directory.appendingPathComponent("ca.pem").path, root: root)
        return try await ensuring {
            try await body(peer)
        } finally: {
            await server.stop()
        }
    }

    /// Serves `contents` at `name`, with `headers` added to its answers.
    public func serve(_ name: String, _ contents: some DataProtocol, headers: [String: String] = [:]) throws {
        try Data(contents).write(to: root.appendingPathComponent(name), options: .atomic)
        try JSONEncoder().encode(headers).write(to: root.appendingPathComponent(name + ".headers"), options: .atomic)
    }
}
