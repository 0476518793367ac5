import Collaboration
import Postgres

/// The statements that name who acts for the rest of a transaction, the way the SQL functions and the audit log
/// read it: an end user through request.jwt.claims (`sub`), the operator through rbac.actor_label. They go in
/// the round trip that begins the transaction (`withTransaction(opening:)`).
///
/// `SET LOCAL`, not `set_config`: on Citus only `SET LOCAL`, with `citus.propagate_set_commands = local`,
/// reaches the workers, where a budget row's audit trigger reads the actor. Set here too, not only for the
/// database (`rbac migrate --citus`), so that connections opened before the distribution send it as well; on
/// plain PostgreSQL it is an unused placeholder. Each a query of its own, as a pipeline sends them: Citus
/// replays the whole query string of a `SET LOCAL` on each worker the transaction reaches.
///
/// The pool's `lock_timeout` (serve's `--lock-timeout`) goes the same way: a session setting holds on the
/// coordinator alone, and a worker would wait for a budget row another session keeps locked as long as its own
/// setting says, for ever by default.
enum Acting {
    static func statements(_ actor: Actor, on pool: PostgresConnectionPool) throws -> [PostgresQuery] {
        switch actor {
        case .user(let id):
            let claims = try PostgresJSON(encoding: ["sub": id.uuidString.lowercased()])
            return try statements(claims: claims.text, label: "", pool)
        case .operator(let label):
            return try statements(claims: "", label: label, pool)
        }
    }

    /// Names the end user by the identity a provider's token names, `iss` (none for development tokens) and
    /// `sub`, as PostgREST passes a verified token's claims.
    static func statements(_ identity: ExternalIdentity, on pool: PostgresConnectionPool) throws -> [PostgresQuery] {
        var claims = ["sub": identity.subject]
        if !identity.issuer.isEmpty { claims["iss"] = identity.issuer }
        return try statements(claims: try PostgresJSON(encoding: claims).text, label: "", pool)
    }

    private static func statements(claims: String, label: String, _ pool: PostgresConnectionPool) throws
        -> [PostgresQuery]
    {
        guard !claims.contains("\u{0}"), !label.contains("\u{0}") else {
            throw PostgresError(.invalidQuery, message: "an actor's name cannot hold a NUL character")
        }
        var statements: [PostgresQuery] = [
            "SET LOCAL citus.propagate_set_commands = local",
            "SET LOCAL \"request.jwt.claims\" = \(literal: claims)",
            "SET LOCAL rbac.actor_label = \(literal: label)",
        ]
        if let lockTimeout = pool.configuration.settings["lock_timeout"] {
            statements.append("SET LOCAL lock_timeout = \(literal: lockTimeout)")
        }
        return statements
    }
}
