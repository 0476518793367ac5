import COpenSSL

/// A JWS algorithm rbac verifies. Each key verifies exactly one, so a token cannot choose how its signature is
/// checked: no `none`, no HS256 under a public key, no RS/ES confusion.
public enum SignatureAlgorithm: String, Sendable, CaseIterable {
    case es256 = "ES256"
    case rs256 = "RS256"
    case edDSA = "EdDSA"
    case hs256 = "HS256"
}

/// Why a JWK is not taken as a key.
public struct KeyError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A key that verifies JWS signatures of one algorithm: a public key held by OpenSSL (ES256 on P-256, RS256 of
/// 2048 bits or more, EdDSA on Ed25519), or an HS256 shared secret.
public final class VerificationKey: Sendable {
    public let algorithm: SignatureAlgorithm
    /// The JWK's `kid`, when it has one.
    public let id: String?
    // Safety: an EVP_PKEY is not changed after it is built, and OpenSSL allows verifying with one key from many
    // threads at once, each with its own EVP_MD_CTX (which rbac_verify makes per call).
    nonisolated(unsafe) private let key: OpaquePointer?
    private let secret: [UInt8]

    private init(_ algorithm: SignatureAlgorithm, id: String?, key: OpaquePointer?, secret: [UInt8] = []) {
        self.algorithm = algorithm
        self.id = id
        self.key = key
        self.secret = secret
    }

    deinit { EVP_PKEY_free(key) }

    /// An HS256 key: the shared secret itself.
    public static func hmac(secret: some Collection<UInt8>, id: String? = nil) -> VerificationKey {
        VerificationKey(.hs256, id: id, key: nil, secret: Array(secret))
    }

    /// The key a JWK (RFC 7517) describes: `kty` EC with `crv` P-256, RSA, or OKP with `crv` Ed25519. `alg`, when
    /// present, must be the one the key type verifies; `use`, when present, must be `sig`. Private members are
    /// ignored.
    public static func jwk(_ fields: [String: Any]) throws(KeyError) -> VerificationKey {
        let id = fields["kid"] as? String
        if let use = fields["use"] as? String, use != "sig" { throw KeyError("key \(id ?? "") is for \(use), not sig") }
        func member(_ name: String) throws(KeyError) -> [UInt8] {
            guard let text = fields[name] as? String, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw KeyError("key \(id ?? "") has no valid \(name)")
            }
            return bytes
        }
        let algorithm: SignatureAlgorithm
        let key: OpaquePointer?
        switch (fields["kty"] as? String, fields["crv"] as? String) {
        case ("EC", "P-256"):
            algorithm = .es256
            let (x, y) = (try member("x"), try member("y"))
            guard x.count == 32, y.count == 32 else { throw KeyError("key \(id ?? "") has a P-256 point of bad size") }
            let point = [0x04] + x + y
            key = point.withUnsafeBufferPointer { rbac_p256_public_key($0.baseAddress, $0.count) }
        case ("RSA", _):
            algorithm = .rs256
            let (n, e) = (try member("n"), try member("e"))
            key = n.withUnsafeBufferPointer { n in
                e.withUnsafeBufferPointer { e in rbac_rsa_public_key(n.baseAddress, n.count, e.baseAddress, e.count) }
            }
            if let key, EVP_PKEY_get_bits(key) < 2048 {
                EVP_PKEY_free(key)
                throw KeyError("key \(id ?? "") is an RSA key of fewer than 2048 bits")
            }
        case ("OKP", "Ed25519"):
            algorithm = .edDSA
            let x = try member("x")
            key = x.withUnsafeBufferPointer { rbac_ed25519_public_key($0.baseAddress, $0.count) }
        case (let type, let curve):
            throw KeyError("key \(id ?? "") has an unsupported type \(type ?? "none") \(curve ?? "")")
        }
        guard let key else { throw KeyError("OpenSSL refuses key \(id ?? "")") }
        let made = VerificationKey(algorithm, id: id, key: key)
        if let stated = fields["alg"] as? String, stated != algorithm.rawValue {
            throw KeyError("key \(id ?? "") says alg \(stated), but its type verifies \(algorithm.rawValue)")
        }
        return made
    }

    /// Whether `signature` is this key's signature of `message` (a JWS signing input). A signature made for
    /// another algorithm never verifies.
    public func verifies(_ signature: [UInt8], of message: [UInt8], algorithm stated: String) -> Bool {
        guard stated == algorithm.rawValue else { return false }
        switch algorithm {
        case .hs256:
            return Digest.constantTimeEquals(Digest.hmacSHA256(key: secret, message: message), signature)
        case .es256:
            guard signature.count == 64 else { return false }
            var der = [UInt8](repeating: 0, count: 80)
            let length = signature.withUnsafeBufferPointer { raw in
                der.withUnsafeMutableBufferPointer { rbac_ecdsa_p256_der(raw.baseAddress, $0.baseAddress, $0.count) }
            }
            guard length > 0 else { return false }
            return verify(Array(der.prefix(Int(length))), message, digest: "SHA256")
        case .rs256:
            return verify(signature, message, digest: "SHA256")
        case .edDSA:
            return verify(signature, message, digest: nil)
        }
    }

    private func verify(_ signature: [UInt8], _ message: [UInt8], digest: String?) -> Bool {
        signature.withUnsafeBufferPointer { signature in
            message.withUnsafeBufferPointer { message in
                rbac_verify(
                    key, digest, signature.baseAddress, signature.count, message.baseAddress, message.count) == 1
            }
        }
    }
}
