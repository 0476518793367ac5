import Collaboration
import Postgres

extension PostgresConnection {
    /// Names who acts for the rest of this transaction, the way the SQL functions and the audit log read it:
    /// an end user through request.jwt.claims (`sub`), the operator through rbac.actor_label.
    ///
    /// With `SET LOCAL`, not `set_config`: on Citus only `SET LOCAL`, with `citus.propagate_set_commands =
    /// local`, reaches the workers, where a budget row's audit trigger reads the actor. Set here too, not only
    /// for the database (`rbac migrate --citus`), so that connections opened before the distribution send it
    /// as well; on plain PostgreSQL it is an unused placeholder. Sent alone, never with other statements in
    /// one query string: Citus replays the whole string of a `SET LOCAL` on each worker the transaction reaches.
    func act(as actor: Actor) async throws {
        switch actor {
        case .user(let id):
            let claims = try PostgresJSON(encoding: ["sub": id.uuidString.lowercased()])
            try await setLocal(claims: claims.text, label: "")
        case .operator(let label):
            try await setLocal(claims: "", label: label)
        }
    }

    /// Names the end user by the identity a provider's token names, `iss` (none for development tokens) and
    /// `sub`, as PostgREST passes a verified token's claims.
    func act(through identity: ExternalIdentity) async throws {
        var claims = ["sub": identity.subject]
        if !identity.issuer.isEmpty { claims["iss"] = identity.issuer }
        try await setLocal(claims: try PostgresJSON(encoding: claims).text, label: "")
    }

    private func setLocal(claims: String, label: String) async throws {
        guard !claims.contains("\u{0}"), !label.contains("\u{0}") else {
            throw PostgresError(.invalidQuery, message: "an actor's name cannot hold a NUL character")
        }
        try await runScript(
            """
            SET LOCAL citus.propagate_set_commands = local; SET LOCAL "request.jwt.claims" = \(literal: claims); \
            SET LOCAL rbac.actor_label = \(literal: label)
            """)
    }
}
