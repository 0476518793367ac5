import Collaboration
import Foundation
import Identity
import OutboundHTTP
import Secrets

/// Signing in at the app's identity provider from the invitation page: OpenID Connect's authorization code flow
/// with PKCE (S256), `state` and `nonce`. What the flow must remember between the redirect and the callback
/// lives in a short-lived cookie, HMAC-signed, HttpOnly, SameSite=Lax, bound to the invitation (its token's
/// hash, never the token); nothing is kept on the server, and nothing after the callback.
public struct OpenIDSignIn: Sendable {
    public let provider: OpenIDProvider
    public let clientID: String
    let clientSecret: String?
    /// Verifies ID tokens: the provider's keys, its issuer, the client as audience.
    let idTokens: TokenVerifier
    let http: OutboundHTTP
    let cookieKey: [UInt8]
    /// Where the accepted page sends people on.
    let appURL: URL?
    /// `<public URL>/oidc/callback`, registered at the provider as a redirect URI.
    let callbackURL: URL
    /// Cookies carry `Secure` when the public URL is https.
    let secureCookies: Bool

    static let cookieName = "rbac_sign_in"
    static let callbackPath = "/oidc/callback"
    /// How long someone may take at the provider.
    static let flowLifetime: TimeInterval = 600

    /// `cookieKey` signs the flow's cookie: the same on every instance behind one address.
    public init(
        provider: OpenIDProvider, clientID: String, clientSecret: String?, idTokens: TokenVerifier,
        http: OutboundHTTP, cookieKey: [UInt8], appURL: URL?, publicBaseURL: URL
    ) {
        self.provider = provider
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.idTokens = idTokens
        self.http = http
        self.cookieKey = cookieKey
        self.appURL = appURL
        self.callbackURL = publicBaseURL.appendingPathComponent(String(Self.callbackPath.dropFirst()))
        self.secureCookies = publicBaseURL.scheme?.lowercased() == "https"
    }

    /// What the flow remembers, in the cookie.
    struct Flow: Codable {
        /// The invitation's token hash, base64url.
        let invitation: String
        let state: String
        let nonce: String
        let verifier: String
        let expires: TimeInterval
    }

    /// Why a callback is refused; nothing has changed when it is.
    struct Refusal: Error {
        let message: String
    }

    /// The provider's authorization URL for accepting the invitation of `tokenHash`, and the cookie to set.
    func start(tokenHash: [UInt8], now: Date = Date()) throws -> (redirect: URL, cookie: String) {
        let flow = Flow(
            invitation: Base64URL.encode(tokenHash), state: Self.random(), nonce: Self.random(),
            verifier: Self.random(), expires: now.timeIntervalSince1970 + Self.flowLifetime)
        var components = URLComponents(url: provider.authorizationEndpoint, resolvingAgainstBaseURL: false)!
        components.queryItems =
            (components.queryItems ?? []) + [
                URLQueryItem(name: "response_type", value: "code"),
                URLQueryItem(name: "client_id", value: clientID),
                URLQueryItem(name: "redirect_uri", value: callbackURL.absoluteString),
                URLQueryItem(name: "scope", value: "openid email profile"),
                URLQueryItem(name: "state", value: flow.state),
                URLQueryItem(name: "nonce", value: flow.nonce),
                URLQueryItem(name: "code_challenge", value: Base64URL.encode(Digest.sha256(flow.verifier))),
                URLQueryItem(name: "code_challenge_method", value: "S256"),
            ]
        let payload = Base64URL.encode(try JSONEncoder().encode(flow))
        let value = "\(payload).\(Base64URL.encode(Digest.hmacSHA256(key: cookieKey, message: Array(payload.utf8))))"
        return (components.url!, cookie(value, maxAge: Int(Self.flowLifetime)))
    }

    /// The header that removes the flow's cookie.
    var clearingCookie: String { cookie("", maxAge: 0) }

    private func cookie(_ value: String, maxAge: Int) -> String {
        "\(Self.cookieName)=\(value); Path=\(Self.callbackPath); Max-Age=\(maxAge); HttpOnly; SameSite=Lax"
            + (secureCookies ? "; Secure" : "")
    }

    /// The identity the provider signed in, and the invitation's token hash, from a callback's `code` and
    /// `state` and the flow's cookie: the cookie must be this service's, unexpired, its state the one sent back;
    /// the code is exchanged with the PKCE verifier, and the ID token verified, its nonce the flow's.
    func finish(code: String?, state: String?, cookie: String?, now: Date = Date()) async throws(Refusal)
        -> (identity: VerifiedIdentity, tokenHash: [UInt8])
    {
        guard let flow = flow(cookie), flow.expires > now.timeIntervalSince1970 else {
            throw Refusal(message: "This sign-in has expired or was already used. Open the invitation link again.")
        }
        guard let state, Digest.constantTimeEquals(Array(state.utf8), Array(flow.state.utf8)),
            let code, !code.isEmpty, code.utf8.count <= 2048, let tokenHash = Base64URL.decode(flow.invitation)
        else { throw Refusal(message: "This sign-in does not match the one this browser started.") }

        var fields = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", callbackURL.absoluteString),
            ("code_verifier", flow.verifier),
        ]
        var headers: [String] = []
        if let clientSecret {
            let credentials = "\(Self.formEncoded(clientID)):\(Self.formEncoded(clientSecret))"
            headers.append("Authorization: Basic \(Data(credentials.utf8).base64EncodedString())")
        } else {
            fields.append(("client_id", clientID))
        }
        let idToken: String
        do {
            let response = try await http.postForm(provider.tokenEndpoint, fields, headers: headers)
            guard response.status == 200,
                let body = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
                let token = body["id_token"] as? String
            else { throw Refusal(message: "The identity provider did not sign you in (\(response.status)).") }
            idToken = token
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw Refusal(message: "The identity provider could not be reached. Try again in a moment.")
        }
        switch await idTokens.verify(idToken) {
        case .success(let identity):
            guard let nonce = identity.nonce, Digest.constantTimeEquals(Array(nonce.utf8), Array(flow.nonce.utf8))
            else { throw Refusal(message: "The identity provider's answer does not belong to this sign-in.") }
            return (identity, tokenHash)
        case .failure(let reason):
            throw Refusal(message: "The identity provider's answer could not be verified (\(reason.rawValue)).")
        }
    }

    /// The flow a cookie value holds, when this service signed it.
    private func flow(_ value: String?) -> Flow? {
        guard let value, let dot = value.firstIndex(of: ".") else { return nil }
        let payload = value[..<dot]
        guard let signature = Base64URL.decode(value[value.index(after: dot)...]),
            Digest.constantTimeEquals(signature, Digest.hmacSHA256(key: cookieKey, message: Array(payload.utf8))),
            let json = Base64URL.decode(payload)
        else { return nil }
        return try? JSONDecoder().decode(Flow.self, from: Data(json))
    }

    private static func random() -> String { Base64URL.encode(SecureRandom.bytes(count: 32)) }

    /// RFC 6749's encoding of client credentials for HTTP Basic: form-encoded first.
    private static func formEncoded(_ text: String) -> String {
        text.addingPercentEncoding(
            withAllowedCharacters: CharacterSet(
                charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? ""
    }
}
