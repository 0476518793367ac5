import Foundation
import Postgres
import Secrets

/// The access policy in `policies/`: `policy.json` (roles, permissions, which roles each role may give) and the
/// `*.sql` files (row-level security), applied together by `rbac migrate`, idempotently.
public struct AccessPolicy: Sendable {
    public struct Script: Sendable {
        public let fileName: String
        public let sql: String
    }

    public let scripts: [Script]
    /// The JSON text of `policy.json`, checked to be a JSON object.
    public let policyJSON: String

    public static let policyFileName = "policy.json"

    public init(scripts: [Script], policyJSON: String) throws {
        let parsed = try? JSONSerialization.jsonObject(with: Data(policyJSON.utf8))
        guard parsed is [String: Any] else {
            throw AccessPolicyError.notJSON(Self.policyFileName)
        }
        self.scripts = scripts
        self.policyJSON = policyJSON
    }

    public static func load(from directory: URL) throws -> AccessPolicy {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        guard names.contains(policyFileName) else {
            throw AccessPolicyError.missing(directory.appendingPathComponent(policyFileName).path)
        }
        let scripts = try names.filter { $0.hasSuffix(".sql") }.sorted().map { name in
            Script(fileName: name, sql: try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))
        }
        let json = try String(contentsOf: directory.appendingPathComponent(policyFileName), encoding: .utf8)
        return try AccessPolicy(scripts: scripts, policyJSON: json)
    }

    /// The SHA-256 of `policy.json` and the scripts, with their names, in the order they are applied.
    public var checksum: String {
        let parts = [Self.policyFileName, policyJSON] + scripts.flatMap { [$0.fileName, $0.sql] }
        return Digest.sha256(parts.map { "\($0.utf8.count):\($0)" }.joined()).hexString
    }

    /// Applies the policy in one transaction, serialised with migration runs, and records its checksum
    /// (sql/0020). Unless `force`, nothing runs when the database already holds this very policy: a `rbac
    /// migrate` with nothing new takes no lock on couples or memberships. Nothing changes if the database
    /// refuses any part (an unknown permission, say: the error names it). Returns whether it applied anything.
    @discardableResult
    public func apply(_ pool: PostgresConnectionPool, force: Bool = true) async throws -> Bool {
        let checksum = checksum
        return try await pool.withTransaction { connection in
            try await connection.execute("SELECT pg_advisory_xact_lock(\(MigrationRunner.lockKey))")
            if !force {
                let applied = try await connection.query("SELECT checksum FROM applied_policy")
                if try applied.first?.decode("checksum", as: String.self) == checksum { return false }
            }
            for script in scripts {
                try await connection.runScript(PostgresQuery(unsafeSQL: script.sql))
            }
            try await connection.execute("SELECT apply_policy(\(PostgresJSON(text: policyJSON)))")
            try await connection.execute(
                """
                INSERT INTO applied_policy (checksum) VALUES (\(checksum))
                ON CONFLICT (singleton) DO UPDATE SET checksum = excluded.checksum, applied_at = now()
                """)
            return true
        }
    }
}

public enum AccessPolicyError: Error, Equatable, CustomStringConvertible {
    case missing(String)
    case notJSON(String)

    public var description: String {
        switch self {
        case .missing(let path): "the access policy \(path) is missing"
        case .notJSON(let name): "\(name) is not a JSON object"
        }
    }
}
