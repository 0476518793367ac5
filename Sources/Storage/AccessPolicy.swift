import Collaboration
import Foundation
import Postgres
import Secrets

/// The access policy in `policies/`: `policy.json` (roles, permissions, which roles each role may give) and the
/// `*.sql` files (row-level security), applied by `rbac migrate` when they changed, idempotently.
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
        // PostgreSQL refuses what Foundation's readers take (a trailing comma), and applies the last of a
        // repeated key's values where `rbac policy test` checks the first.
        if let problem = StrictJSON.problem(in: Data(policyJSON.utf8)) {
            throw AccessPolicyError.notStrictJSON(Self.policyFileName, problem)
        }
        guard (try? JSONSerialization.jsonObject(with: Data(policyJSON.utf8))) is [String: Any] else {
            throw AccessPolicyError.notJSON(Self.policyFileName)
        }
        self.scripts = scripts
        self.policyJSON = policyJSON
    }

    public static func load(from directory: URL) throws -> AccessPolicy {
        let file = directory.appendingPathComponent(policyFileName)
        guard FileManager.default.fileExists(atPath: file.path) else { throw AccessPolicyError.missing(file.path) }
        return try AccessPolicy(scripts: scripts(in: directory), policyJSON: String(contentsOf: file, encoding: .utf8))
    }

    /// The row-level security scripts of `directory`, in the order they are applied.
    public static func scripts(in directory: URL) throws -> [Script] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        return try names.filter { $0.hasSuffix(".sql") }.sorted().map { name in
            Script(fileName: name, sql: try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))
        }
    }

    /// This policy with `role` also granted `permission` (declared with `description` when the policy does not
    /// list it yet): a change to what one role grants, as operators make one, for tests and benchmarks.
    public func granting(_ permission: String, to role: String, description: String = "Granted for a test") throws
        -> AccessPolicy
    {
        guard var document = try JSONSerialization.jsonObject(with: Data(policyJSON.utf8)) as? [String: Any],
            var permissions = document["permissions"] as? [String: Any],
            var roles = document["roles"] as? [String: [String: Any]], roles[role] != nil
        else { throw AccessPolicyError.notJSON("\(Self.policyFileName) with the role \(role)") }
        if permissions[permission] == nil { permissions[permission] = description }
        let granted = roles[role]?["permissions"] as? [String] ?? []
        roles[role]?["permissions"] = granted + [permission]
        document["permissions"] = permissions
        document["roles"] = roles
        let json = try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])
        return try AccessPolicy(scripts: scripts, policyJSON: String(decoding: json, as: UTF8.self))
    }

    /// The SHA-256 of `policy.json` and the scripts, with their names, in the order they are applied.
    public var checksum: String { Self.checksum([Self.policyFileName, policyJSON] + scriptParts) }

    /// The SHA-256 of the scripts alone.
    var scriptsChecksum: String { Self.checksum(scriptParts) }

    private var scriptParts: [String] { scripts.flatMap { [$0.fileName, $0.sql] } }

    private static func checksum(_ parts: [String]) -> String {
        Digest.sha256(parts.map { "\($0.utf8.count):\($0)" }.joined()).hexString
    }

    /// What `applied_policy` records as the scripts' checksum once a migration made them stale.
    static let staleScripts = ""

    /// Whether the database lacks the policy its migrations need: it was never applied, or a migration since made
    /// its row-level security scripts stale, as when the `rbac migrate` that applied it ended before the policy.
    /// A table that migration added would have no row-level security yet.
    public static func isPending(on pool: PostgresConnectionPool) async throws -> Bool {
        let applied = try await pool.withConnection(applied)
        return try applied?.decode("scripts_checksum", as: String.self) == staleScripts || applied == nil
    }

    /// What `applied_policy` records; nil before the policy was first applied, or its table made.
    private static func applied(_ connection: PostgresConnection) async throws -> PostgresRow? {
        guard try await MigrationRunner.exists("applied_policy", on: connection) else { return nil }
        return try await connection.query("SELECT checksum, scripts_checksum, applied_at FROM applied_policy").first
    }

    /// The policy as `rbac migrate --status` lists it after the migrations (`policies/`): applied when the
    /// database holds this very policy, made stale by no migration since, and there are no `pendingMigrations`
    /// (after which the next run applies it again).
    public func status(_ pool: PostgresConnectionPool, pendingMigrations: Bool) async throws -> MigrationRunner.Status {
        let applied = try await pool.withConnection(Self.applied)
        let current =
            try !pendingMigrations && applied?.decode("checksum", as: String.self) == checksum
            && applied?.decode("scripts_checksum", as: String.self) == scriptsChecksum
        return MigrationRunner.Status(
            version: nil, fileName: "policies/", state: current ? .applied : .pending,
            appliedAt: try applied?.decode("applied_at", as: Date.self))
    }

    /// Applies the policy in one transaction, serialised with migration runs, and records its checksums
    /// (`applied_policy`). Unless `force`, nothing runs when the database already holds this very policy: a
    /// `rbac migrate` with nothing new takes no lock on couples or memberships. The row-level security scripts
    /// run only when they changed, or a migration since marked them stale (it may have added a table they
    /// secure), forced or not: they lock the tables they secure against every read. What roles grant is written
    /// only where it differs (`apply_policy`), so permission caches drop only the members of roles that changed.
    /// Nothing changes if the database refuses any part (an unknown permission, say: the error names it), or a
    /// statement waits longer than `lockTimeout` for a lock (as in `MigrationRunner.migrate`). Returns whether it
    /// applied anything.
    @discardableResult
    public func apply(
        _ pool: PostgresConnectionPool, force: Bool = true, lockTimeout: Duration? = nil
    ) async throws -> Bool {
        let checksum = checksum
        let scriptsChecksum = scriptsChecksum
        return try await pool.withTransaction { connection in
            try await connection.execute("SELECT pg_advisory_xact_lock(\(MigrationRunner.lockKey))")
            try await MigrationRunner.limitLockWaits(to: lockTimeout, on: connection)
            let applied = try await Self.applied(connection)
            let scriptsCurrent = try applied?.decode("scripts_checksum", as: String.self) == scriptsChecksum
            if !force, scriptsCurrent, try applied?.decode("checksum", as: String.self) == checksum { return false }
            if !scriptsCurrent {
                for script in scripts {
                    try await MigrationRunner.run(script.sql, on: connection)
                }
            }
            try await connection.execute("SELECT apply_policy(\(PostgresJSON(text: policyJSON)))")
            try await connection.execute(
                """
                INSERT INTO applied_policy (checksum, scripts_checksum) VALUES (\(checksum), \(scriptsChecksum))
                ON CONFLICT (singleton) DO UPDATE
                SET checksum = excluded.checksum, scripts_checksum = excluded.scripts_checksum, applied_at = now()
                """)
            return true
        }
    }
}

public enum AccessPolicyError: Error, Equatable, CustomStringConvertible {
    case missing(String)
    case notJSON(String)
    /// A file, and what makes it no strict JSON.
    case notStrictJSON(String, StrictJSON.Problem)

    public var description: String {
        switch self {
        case .missing(let path): "the access policy \(path) is missing"
        case .notJSON(let name): "\(name) is not a JSON object"
        case .notStrictJSON(let name, let problem): "\(name) \(problem)"
        }
    }
}
