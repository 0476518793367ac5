import COpenSSL

/// The key that seals what the outbox must keep but the database must not be able to read (an invitation's
/// token until its email is sent, webhook signing secrets): AES-256-GCM, a random 12-byte nonce per message,
/// and associated data naming what a box belongs to (its row's id), so a box moved to another row does not open.
public struct DeliveryKey: Sendable {
    private let key: [UInt8]

    /// Why a key or a box is refused; never with the key or the contents.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// A key of 64 hexadecimal digits (32 bytes), as `scripts/run` writes one.
    public init(hex text: String) throws(Failure) {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { throw Failure(description: "a delivery key is 64 hexadecimal digits") }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                throw Failure(description: "a delivery key is 64 hexadecimal digits")
            }
            bytes.append(byte)
        }
        key = bytes
    }

    /// A new random key, as hexadecimal digits.
    public static func generateHex() -> String { SecureRandom.bytes(count: 32).hexString }

    /// nonce || ciphertext || tag.
    public func seal(_ plaintext: some Collection<UInt8>, for context: String) -> [UInt8] {
        let plaintext = Array(plaintext)
        let nonce = SecureRandom.bytes(count: 12)
        let aad = Array(context.utf8)
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        let ok = out.withUnsafeMutableBufferPointer { out in
            rbac_aes256gcm_seal(key, nonce, aad, aad.count, plaintext, plaintext.count, out.baseAddress)
        }
        precondition(ok == 1, "AES-256-GCM sealing failed")
        return nonce + out
    }

    /// The contents of a box sealed for `context`; nil when the box was altered, sealed for something else, or
    /// under another key.
    public func open(_ box: some Collection<UInt8>, for context: String) -> [UInt8]? {
        let box = Array(box)
        guard box.count >= 12 + 16 else { return nil }
        let aad = Array(context.utf8)
        let sealed = Array(box[12...])
        var out = [UInt8](repeating: 0, count: sealed.count - 16)
        let ok = out.withUnsafeMutableBufferPointer { out in
            rbac_aes256gcm_open(key, Array(box[..<12]), aad, aad.count, sealed, sealed.count, out.baseAddress)
        }
        return ok == 1 ? out : nil
    }
}
