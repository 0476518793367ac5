import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's `RAND_bytes`.
public enum SecureRandom {
    /// `count` random bytes. Traps if OpenSSL's generator cannot be seeded, since nothing safe can follow.
    public static func bytes(count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBytes { buffer in
            RAND_bytes(buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(count))
        }
        precondition(ok == 1, "RAND_bytes failed: OpenSSL's random generator is not seeded")
        return bytes
    }
}
