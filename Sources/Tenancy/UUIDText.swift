import Foundation

// Ids are written in lower case, as RFC 9562 asks and as PostgreSQL, the CLI's tables and the error messages
// write them, so that a backend comparing ids as strings finds ours equal to its own. Foundation encodes a UUID
// as `uuidString`, in upper case. These overloads are more specific than `encode<T: Encodable>(_:forKey:)`, so
// every keyed container in the modules that import this one, synthesized conformances included, picks them
// for UUID properties. (UUIDs inside arrays would still be upper case; no output holds such an array.)
extension KeyedEncodingContainer {
    public mutating func encode(_ value: UUID, forKey key: Key) throws {
        try encode(value.uuidString.lowercased(), forKey: key)
    }

    public mutating func encodeIfPresent(_ value: UUID?, forKey key: Key) throws {
        try encodeIfPresent(value?.uuidString.lowercased(), forKey: key)
    }
}

extension UUID {
    /// A UUID written as RFC 9562 writes one: 32 hex digits in either case, grouped 8-4-4-4-12 by hyphens; nil
    /// for any other text. Ids from outside are read with this, not `UUID(uuidString:)`: on Linux that reads
    /// with sscanf, which takes some malformed text and makes another id of it (" 9f7e979-..." is 9F7E9709-...,
    /// "a9f7e979-+5d6-..." is A9F7E979-05D6-...). It is also several times faster.
    ///
    /// It takes a `String`, not `some StringProtocol`: a generic initializer is not specialized for callers in
    /// other modules, and unspecialized it cost about eight times as much (two of them were 4% of a check).
    public init?(parsing text: String) {
        var text = text
        guard let value = text.withUTF8(uuidValue) else { return nil }
        self.init(uuid: value)
    }
}

private func uuidValue(_ text: UnsafeBufferPointer<UInt8>) -> uuid_t? {
    let hyphen = UInt8(ascii: "-")
    guard text.count == 36, text[8] == hyphen, text[13] == hyphen, text[18] == hyphen, text[23] == hyphen else {
        return nil
    }
    var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var invalid: UInt8 = 0
    withUnsafeMutableBytes(of: &value) { bytes in
        var position = 0
        for index in 0..<16 {
            if position == 8 || position == 13 || position == 18 || position == 23 { position += 1 }
            let (high, low) = (hexValue(text[position]), hexValue(text[position + 1]))
            invalid |= high | low
            bytes[index] = high << 4 | low & 0x0F
            position += 2
        }
    }
    return invalid & 0xF0 == 0 ? value : nil
}

/// The value of a hex digit; 0xFF for any other character.
private func hexValue(_ character: UInt8) -> UInt8 {
    switch character {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
    default: 0xFF
    }
}
