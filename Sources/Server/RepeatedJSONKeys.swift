import Collaboration
import Foundation
import Hummingbird
import NIOCore

/// JSON leaves an object that names a key twice to each parser: JSONDecoder reads the first value, other parsers
/// the last. A gateway in front of this service that checks a body's `permission` could then pass one value
/// while this service acts on another, so every JSON body a route decodes is refused with a 400 when any of
/// its objects repeats a key.
enum RepeatedJSONKeys {
    /// A 400 naming the first key that an object of `body` names twice (compared as a decoder reads it: escapes
    /// resolved). Nothing when there is none; what else is wrong with a body its decoder says.
    static func refuse(_ body: ByteBuffer) throws(APIError) {
        let repeated = body.withUnsafeReadableBytes { firstRepeatedKey(in: $0) }
        guard let repeated else { return }
        throw APIError.badRequest("the body names \(quoted(repeated)) more than once in one object")
    }

    static func firstRepeatedKey(in json: UnsafeRawBufferPointer) -> String? {
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
}

/// Hummingbird's default request decoder (JSONDecoder reading dates as ISO 8601), after refusing a body whose
/// objects repeat a key (`RepeatedJSONKeys`).
public struct StrictJSONDecoder: RequestDecoder {
    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext)
        async throws -> T
    {
        let buffer = try await request.body.collect(upTo: context.maxUploadSize)
        try RepeatedJSONKeys.refuse(buffer)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(T.self, from: buffer)
    }
}
