import Foundation
import Secrets

/// The end user a verified JWT names: `sub` is the user id, `email` the address (as Supabase Auth issues them).
public struct AuthenticatedUser: Sendable, Hashable {
    public let id: UUID
    public let email: String?
}

/// Verifies HS256 JWTs with a shared secret: OpenSSL HMAC-SHA256 and a constant-time comparison, then the
/// `exp` and `nbf` claims. Anything else (other algorithms, `none`, malformed tokens) is refused.
public struct JWTVerifier: Sendable {
    private let secret: [UInt8]
    private let now: @Sendable () -> Date

    public init(secret: String, now: @escaping @Sendable () -> Date = { Date() }) {
        self.secret = Array(secret.utf8)
        self.now = now
    }

    public func verify(_ token: String) -> AuthenticatedUser? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
            let payloadBytes = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            header["alg"] as? String == "HS256"
        else { return nil }
        let expected = Digest.hmacSHA256(key: secret, message: Array("\(parts[0]).\(parts[1])".utf8))
        guard Digest.constantTimeEquals(expected, signature),
            let claims = try? JSONSerialization.jsonObject(with: Data(payloadBytes)) as? [String: Any],
            let sub = claims["sub"] as? String, let id = UUID(parsing: sub)
        else { return nil }
        let time = now().timeIntervalSince1970
        if let exp = claims["exp"] as? Double, exp <= time { return nil }
        if let nbf = claims["nbf"] as? Double, nbf > time { return nil }
        return AuthenticatedUser(id: id, email: claims["email"] as? String)
    }

    /// Signs claims with the secret: for tests and local tooling that stand in for the identity provider.
    public func sign(_ claims: [String: any Sendable]) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(Array((try? JSONSerialization.data(withJSONObject: claims)) ?? Data()))
        let signature = Digest.hmacSHA256(key: secret, message: Array("\(header).\(payload)".utf8))
        return "\(header).\(payload).\(Base64URL.encode(signature))"
    }
}
