import Foundation
import OutboundHTTP

/// An OpenID provider's endpoints, from its discovery document (`<issuer>/.well-known/openid-configuration`).
public struct OpenIDProvider: Sendable {
    public let issuer: String
    public let authorizationEndpoint: URL
    public let tokenEndpoint: URL
    public let jwksURI: URL

    public init(issuer: String, authorizationEndpoint: URL, tokenEndpoint: URL, jwksURI: URL) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.jwksURI = jwksURI
    }

    /// Why a provider's discovery document cannot be used.
    public struct DiscoveryError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads the discovery document of `issuer`. Its `issuer` must be the one asked for (but for a trailing
    /// slash), and every endpoint an https URL.
    public static func discover(_ issuer: String, http: OutboundHTTP) async throws -> OpenIDProvider {
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        guard let url = URL(string: base + "/.well-known/openid-configuration"), url.host != nil else {
            throw DiscoveryError(description: "the issuer \(issuer) is not a URL")
        }
        let response = try await http.get(url)
        guard response.status == 200,
            let document = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        else {
            throw DiscoveryError(description: "\(url.absoluteString) answered \(response.status), not a JSON document")
        }
        func endpoint(_ name: String) throws -> URL {
            guard let text = document[name] as? String, let url = URL(string: text),
                url.scheme?.lowercased() == "https", url.host != nil
            else { throw DiscoveryError(description: "\(url.absoluteString) names no https \(name)") }
            return url
        }
        let stated = document["issuer"] as? String ?? ""
        guard stated == issuer || stated == base || stated == base + "/" else {
            throw DiscoveryError(description: "\(url.absoluteString) names the issuer \(stated), not \(issuer)")
        }
        return OpenIDProvider(
            issuer: stated, authorizationEndpoint: try endpoint("authorization_endpoint"),
            tokenEndpoint: try endpoint("token_endpoint"), jwksURI: try endpoint("jwks_uri"))
    }
}
