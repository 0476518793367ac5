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
