import Collaboration
import Foundation
import Hummingbird
import NIOCore

/// A gateway in front of this service that checks a body's `permission` could pass one value of a repeated key
/// while this service acts on another, so every JSON body a route decodes is refused with a 400 when any of
/// its objects repeats a key.
extension RepeatedJSONKeys {
    /// A 400 naming the first key that an object of `body` names twice (compared as a decoder reads it: escapes
    /// resolved). Nothing when there is none; what else is wrong with a body its decoder says.
    static func refuse(_ body: ByteBuffer) throws(APIError) {
        let repeated = body.withUnsafeReadableBytes { first(in: $0) }
        guard let repeated else { return }
        throw APIError.badRequest("the body names \(quoted(repeated)) more than once in one object")
    }
}

/// Hummingbird's default request decoder (JSONDecoder reading dates as ISO 8601), after refusing a body whose
/// objects repeat a key or name one the route does not take (`documentedJSONBody`).
public struct StrictJSONDecoder: RequestDecoder {
    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext)
        async throws -> T
    {
        let buffer = try await documentedJSONBody(request, context)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(T.self, from: buffer)
    }
}
