import Collaboration
import Postgres

extension PostgresConnection {
    /// Names who acts for the rest of this transaction, the way the SQL functions and the audit log read it:
    /// an end user through request.jwt.claims (`sub`), the operator through rbac.actor_label.
    func act(as actor: Actor) async throws {
        switch actor {
        case .user(let id):
            let claims = try PostgresJSON(encoding: ["sub": id.uuidString.lowercased()])
            try await query(
                "SELECT set_config('request.jwt.claims', \(claims.text), true), set_config('rbac.actor_label', '', true)"
            )
        case .operator(let label):
            try await query(
                "SELECT set_config('request.jwt.claims', '', true), set_config('rbac.actor_label', \(label), true)")
        }
    }

    /// Names the end user by the identity a provider's token names, `iss` (none for development tokens) and
    /// `sub`, as PostgREST passes a verified token's claims.
    func act(through identity: ExternalIdentity) async throws {
        var claims = ["sub": identity.subject]
        if !identity.issuer.isEmpty { claims["iss"] = identity.issuer }
        let json = try PostgresJSON(encoding: claims)
        try await query("SELECT set_config('request.jwt.claims', \(json.text), true)")
    }
}
