/// Base64url without padding (RFC 4648 §5), as used in tokens and JWTs.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// Each byte's 6-bit value, or `invalid`: one array read per character (every service-key check decodes one).
    private static let values: [UInt8] = alphabet.enumerated().reduce(into: [UInt8](repeating: invalid, count: 256)) {
        $0[Int($1.element)] = UInt8($1.offset)
    }
    private static let invalid: UInt8 = 0xff

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let bytes = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var group: UInt32 = 0
            for (offset, byte) in chunk.enumerated() {
                group |= UInt32(byte) << (16 - 8 * offset)
            }
            for position in 0...chunk.count {
                out.append(alphabet[Int((group >> (18 - 6 * position)) & 0x3f)])
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The decoded bytes, or nil when `text` is not unpadded base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count * 3 / 4)
        var group: UInt32 = 0
        var bits = 0
        for char in chars {
            let value = values[Int(char)]
            guard value != invalid else { return nil }
            group = (group << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((group >> UInt32(bits)) & 0xff))
            }
        }
        // Leftover bits must be zero, so that every byte string has exactly one encoding.
        guard group & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}
