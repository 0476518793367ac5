import COpenSSL

/// SHA-256 and HMAC-SHA256 through OpenSSL's one-shot functions.
public enum Digest {
    /// SHA-256, fetched from OpenSSL's providers once. `EVP_sha256()` makes every call fetch it again (OpenSSL 3
    /// calls that an implicit fetch): 350-420 ns a digest of 52 bytes here, against 100-200 ns with this.
    nonisolated(unsafe) private static let sha256Algorithm: OpaquePointer = {
        // Safety: an EVP_MD is never modified after it is fetched, and OpenSSL allows using it from any thread.
        guard let algorithm = EVP_MD_fetch(nil, "SHA2-256", nil) else {
            preconditionFailure("OpenSSL has no SHA2-256 (EVP_MD_fetch failed)")
        }
        return algorithm
    }()

    /// The 32-byte SHA-256 of `data`.
    public static func sha256(_ data: some Collection<UInt8>) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(rbac_SHA256_DIGEST_LENGTH))
        var length: UInt32 = 0
        let ok = Array(data).withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                EVP_Digest(
                    input.baseAddress, input.count,
                    out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length,
                    sha256Algorithm, nil)
            }
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return output
    }

    /// The SHA-256 of a string's UTF-8 bytes.
    public static func sha256(_ text: String) -> [UInt8] {
        sha256(Array(text.utf8))
    }

    /// The 32-byte HMAC-SHA256 of `message` under `key` (RFC 2104).
    public static func hmacSHA256(key: some Collection<UInt8>, message: some Collection<UInt8>) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(rbac_SHA256_DIGEST_LENGTH))
        var length: UInt32 = 0
        let result = Array(key).withUnsafeBytes { key in
            Array(message).withUnsafeBytes { message in
                output.withUnsafeMutableBytes { out in
                    HMAC(
                        sha256Algorithm, key.baseAddress, Int32(key.count),
                        message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count,
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length)
                }
            }
        }
        precondition(result != nil && length == 32, "HMAC(SHA-256) failed")
        return output
    }

    /// Compares two byte strings in time that depends only on their length, not their contents.
    public static func constantTimeEquals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        let lhs = Array(lhs)
        let rhs = Array(rhs)
        guard lhs.count == rhs.count else { return false }
        if lhs.isEmpty { return true }
        return lhs.withUnsafeBytes { l in
            rhs.withUnsafeBytes { r in
                CRYPTO_memcmp(l.baseAddress, r.baseAddress, l.count) == 0
            }
        }
    }
}

extension Collection<UInt8> {
    /// Lower-case hexadecimal, two characters a byte.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var chars: [UInt8] = []
        chars.reserveCapacity(count * 2)
        for byte in self {
            chars.append(digits[Int(byte >> 4)])
            chars.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: chars, as: UTF8.self)
    }
}
