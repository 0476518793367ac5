import ChildProcess
import Foundation

/// Keys and tokens made outside rbac (Tests/tools/jwt_tool.py: the openssl CLI and PyJWT), in a directory of
/// their own.
public struct TokenTool: Sendable {
    public let directory: URL

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-keys-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// A new key `name` for `algorithm` (ES256, RS256, EdDSA); its public JWK, with `kid` name.
    public func key(_ name: String, _ algorithm: String) async throws -> [String: Any] {
        let output = try await Self.run(["key", directory.path, name, algorithm])
        return try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any] ?? [:]
    }

    /// A token of `claims` signed with key `name`.
    public func sign(_ claims: [String: Any], with name: String, _ algorithm: String) async throws -> String {
        try await Self.run(["sign", directory.path, name, algorithm, Self.json(claims)])
    }

    /// A token of `claims` signed with an HS256 shared secret.
    public static func hs256(_ claims: [String: Any], secret: String) async throws -> String {
        try await run(["hs256", secret, json(claims)])
    }

    /// A JWKS document of `keys`.
    public static func jwks(_ keys: [[String: Any]]) throws -> Data {
        try JSONSerialization.data(withJSONObject: ["keys": keys])
    }

    private static func json(_ claims: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: claims), as: UTF8.self)
    }

    private static func run(_ arguments: [String]) async throws -> String {
        let result = try await ChildProcess.run(
            "/usr/bin/env",
            ["python3", repositoryRoot.appendingPathComponent("Tests/tools/jwt_tool.py").path] + arguments)
        guard result.status == 0 else {
            throw ToolError(description: "jwt_tool.py \(arguments.first ?? "") failed: \(result.errorOutput)")
        }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A test tool (a script, a server) that did not do its part.
public struct ToolError: Error, CustomStringConvertible {
    public let description: String
}
