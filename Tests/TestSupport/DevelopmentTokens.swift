import Foundation
import Secrets

/// HS256 tokens as a development identity provider signs them with the shared secret: for tests of what the
/// service does with a signed-in user. (Tests of verification itself use tokens signed elsewhere: TokenTool.)
public enum DevelopmentTokens {
    public static func sign(_ claims: [String: any Sendable], secret: String) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(Array((try? JSONSerialization.data(withJSONObject: claims)) ?? Data()))
        let signature = Digest.hmacSHA256(key: Array(secret.utf8), message: Array("\(header).\(payload)".utf8))
        return "\(header).\(payload).\(Base64URL.encode(signature))"
    }
}
