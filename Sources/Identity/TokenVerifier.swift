import Foundation
import Secrets
import Tenancy

/// Who a verified token names: the identity `(issuer, subject)`, and what the token says of the person.
public struct VerifiedIdentity: Sendable, Hashable {
    /// `iss`; empty for a token without one (a development token signed with the shared secret).
    public let issuer: String
    public let subject: String
    public let email: String?
    /// `email_verified` was true (or the string "true", as some providers send it).
    public let emailVerified: Bool
    public let name: String?
    public let nonce: String?

    public init(
        issuer: String, subject: String, email: String? = nil, emailVerified: Bool = false, name: String? = nil,
        nonce: String? = nil
    ) {
        self.issuer = issuer
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        self.name = name
        self.nonce = nonce
    }
}

/// Why a token was refused. Every refusal is answered the same way (401); the reason goes to the log only.
public enum TokenRefusal: String, Error, Sendable, CaseIterable {
    case tooLong = "too_long"
    case malformed
    case unsupportedAlgorithm = "unsupported_alg"
    case unknownKey = "unknown_key"
    case badSignature = "bad_signature"
    case noExpiry = "no_exp"
    case expired
    case notYetValid = "not_yet_valid"
    case issuedInFuture = "issued_in_future"
    case wrongIssuer = "wrong_issuer"
    case wrongAudience = "wrong_audience"
    case noSubject = "no_sub"
}

/// What a token must satisfy besides its signature.
public struct TokenPolicy: Sendable {
    /// Accepted `iss` values; empty accepts any (and `serve` warns).
    public var issuers: [String]
    /// Accepted `aud` values, one of which the token must name; empty accepts any.
    public var audiences: [String]
    /// How far `exp`, `nbf` and `iat` may be off, for clocks that disagree.
    public var leeway: Duration
    /// Longer tokens are refused before anything is decoded.
    public var maxLength: Int

    public init(
        issuers: [String] = [], audiences: [String] = [], leeway: Duration = .seconds(60), maxLength: Int = 8192
    ) {
        self.issuers = issuers
        self.audiences = audiences
        self.leeway = leeway
        self.maxLength = maxLength
    }
}

/// Verifies compact JWS tokens (JWTs): the signature with the key the header's `kid` and `alg` select (the
/// shared secret for HS256, the identity provider's JWKS for the others), then `exp` (required, numeric), `nbf`
/// and `iat` (when present), `iss` and `aud` (when the policy names them).
public struct TokenVerifier: Sendable {
    public let policy: TokenPolicy
    private let secret: VerificationKey?
    private let keySet: KeySetCache?
    private let now: @Sendable () -> Date

    public init(
        secret: VerificationKey? = nil, keySet: KeySetCache? = nil, policy: TokenPolicy = TokenPolicy(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.secret = secret
        self.keySet = keySet
        self.policy = policy
        self.now = now
    }

    public func verify(_ token: String) async -> Result<VerifiedIdentity, TokenRefusal> {
        do { return .success(try await verified(token)) } catch { return .failure(error) }
    }

    private func verified(_ token: String) async throws(TokenRefusal) -> VerifiedIdentity {
        guard token.utf8.count <= policy.maxLength else { throw .tooLong }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
            let payloadBytes = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]),
            // A header or claim named twice is refused (RFC 7519, 4): JSONDecoder would read the first, most
            // others the last. The claims are read once the signature holds.
            StrictJSON.problem(in: headerBytes) == nil,
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes))
        else { throw .malformed }
        // A critical extension rbac does not know must not be ignored (RFC 7515, 4.1.11).
        guard header.crit == nil, let algorithm = SignatureAlgorithm(rawValue: header.alg) else {
            throw .unsupportedAlgorithm
        }
        let keys: [VerificationKey]
        if algorithm == .hs256 {
            keys = secret.map { [$0] } ?? []
        } else {
            keys = await keySet?.candidates(id: header.kid, algorithm: header.alg) ?? []
        }
        guard !keys.isEmpty else { throw .unknownKey }
        let signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        guard keys.contains(where: { $0.verifies(signature, of: signingInput, algorithm: header.alg) }) else {
            throw .badSignature
        }

        guard StrictJSON.problem(in: payloadBytes) == nil,
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(payloadBytes))
        else { throw .malformed }
        let time = now().timeIntervalSince1970
        let leeway = Double(policy.leeway.components.seconds)
        guard let exp = claims.exp else { throw .noExpiry }
        guard time < exp + leeway else { throw .expired }
        if let nbf = claims.nbf, time + leeway < nbf { throw .notYetValid }
        if let iat = claims.iat, time + leeway < iat { throw .issuedInFuture }
        if !policy.issuers.isEmpty, !policy.issuers.contains(claims.iss ?? "") { throw .wrongIssuer }
        if !policy.audiences.isEmpty, !(claims.aud ?? []).contains(where: policy.audiences.contains) {
            throw .wrongAudience
        }
        guard let subject = claims.sub, !subject.isEmpty, subject.utf8.count <= 255 else { throw .noSubject }
        return VerifiedIdentity(
            issuer: claims.iss ?? "", subject: subject, email: claims.email, emailVerified: claims.emailVerified,
            name: claims.name, nonce: claims.nonce)
    }

    private struct Header: Decodable {
        let alg: String
        let kid: String?
        let crit: [String]?
    }

    /// The registered claims rbac reads. A time claim that is not a JSON number (a string, say) makes the token
    /// malformed rather than unlimited.
    private struct Claims: Decodable {
        let iss: String?
        let sub: String?
        let aud: [String]?
        let exp: Double?
        let nbf: Double?
        let iat: Double?
        let email: String?
        let emailVerified: Bool
        let name: String?
        let nonce: String?

        enum CodingKeys: String, CodingKey {
            case iss, sub, aud, exp, nbf, iat, email, name, nonce
            case emailVerified = "email_verified"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            iss = try container.decodeIfPresent(String.self, forKey: .iss)
            sub = try container.decodeIfPresent(String.self, forKey: .sub)
            // `aud` is one string or an array of them (RFC 7519, 4.1.3).
            if let one = try? container.decodeIfPresent(String.self, forKey: .aud) {
                aud = [one]
            } else {
                aud = try container.decodeIfPresent([String].self, forKey: .aud)
            }
            exp = try Self.time(container, .exp)
            nbf = try Self.time(container, .nbf)
            iat = try Self.time(container, .iat)
            email = try? container.decodeIfPresent(String.self, forKey: .email)
            name = try? container.decodeIfPresent(String.self, forKey: .name)
            nonce = try? container.decodeIfPresent(String.self, forKey: .nonce)
            if let flag = try? container.decodeIfPresent(Bool.self, forKey: .emailVerified) {
                emailVerified = flag
            } else {
                emailVerified = (try? container.decodeIfPresent(String.self, forKey: .emailVerified)) == "true"
            }
        }

        /// A NumericDate: a JSON number, finite. `true` and "1700000000" are refused.
        private static func time(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Double? {
            guard container.contains(key), try !container.decodeNil(forKey: key) else { return nil }
            if (try? container.decode(Bool.self, forKey: key)) != nil {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not a number")
            }
            let value = try container.decode(Double.self, forKey: key)
            guard value.isFinite else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not finite")
            }
            return value
        }
    }
}
