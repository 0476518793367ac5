import Foundation

/// JSON leaves an object that names a key twice to each reader: Foundation's JSONDecoder takes the first value,
/// PostgreSQL's jsonb and most other parsers the last. Where two readers see one document (a gateway in front of
/// the service and the service; `rbac policy test` and the database applying the policy), they would act on
/// different values, so such documents are refused.
public enum RepeatedJSONKeys {
    /// The first key that an object of `json` names twice, compared as a decoder reads keys (escapes resolved);
    /// nil when there is none, and when `json` is malformed (its decoder says what is wrong).
    public static func first(in json: UnsafeRawBufferPointer) -> String? {
        // One entry per open container: the keys an object has named so far, nil for an array.
        var open: [Set<String>?] = []
        var expectingKey = false
        var index = 0
        while index < json.count {
            switch json[index] {
            case UInt8(ascii: "{"):
                open.append([])
                expectingKey = true
            case UInt8(ascii: "["):
                open.append(nil)
                expectingKey = false
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard open.popLast() != nil else { return nil }
                expectingKey = false
            case UInt8(ascii: ","):
                expectingKey = open.last.map { $0 != nil } ?? false
            case UInt8(ascii: ":"):
                expectingKey = false
            case UInt8(ascii: "\""):
                let start = index
                var escaped = false
                index += 1
                while index < json.count, json[index] != UInt8(ascii: "\"") {
                    if json[index] == UInt8(ascii: "\\") {
                        escaped = true
                        index += 1
                    }
                    index += 1
                }
                guard index < json.count else { return nil }
                if expectingKey, let last = open.indices.last, open[last] != nil {
                    let literal = UnsafeRawBufferPointer(rebasing: json[start...index])
                    let key =
                        escaped
                        ? unescaped(literal) : String(decoding: literal.dropFirst().dropLast(), as: UTF8.self)
                    guard let key else { return nil }
                    // In place: a copy of the set per key would make a body of many keys cost their square.
                    guard open[last]?.insert(key).inserted == true else { return key }
                }
                expectingKey = false
            default:
                break
            }
            index += 1
        }
        return nil
    }

    /// A key with escapes, resolved as the decoder resolves them.
    private static func unescaped(_ literal: UnsafeRawBufferPointer) -> String? {
        try? JSONDecoder().decode(String.self, from: Data(literal))
    }

    /// `first(in:)` over bytes held in any contiguous form.
    public static func first(in json: some ContiguousBytes) -> String? {
        json.withUnsafeBytes { first(in: $0) }
    }
}
