import Collaboration
import Foundation
import HTTPTypes
import Hummingbird

extension APIError {
    /// `text` as a UUID, else a 400 saying that `name` must be one.
    static func uuid(_ text: String?, _ name: String) throws -> UUID {
        guard let text, let id = UUID(parsing: text) else { throw APIError.badRequest("\(name) must be a UUID") }
        return id
    }
}

extension HTTPField.Name {
    /// The end user a backend acts for, on the routes that act for one (`Request.actingUserID()`).
    static let actingUser = HTTPField.Name("X-Acting-User")!
}

extension HTTPFields {
    /// The credential of `Authorization: Bearer ...`, when there is exactly that one Authorization field;
    /// several are refused, never joined into one (as `self[.authorization]` would, at a cost per request). The
    /// scheme's name is case-insensitive and one or more spaces follow it (RFC 9110, 11.1; RFC 6750, 2.1):
    /// clients send `bearer` too.
    var bearerCredential: String? {
        let fields = self[values: .authorization]
        guard fields.count == 1, let field = fields.first else { return nil }
        let space = UInt8(ascii: " ")
        let scheme = field.utf8.prefix(7)
        guard scheme.count == 7, scheme.last == space, zip(scheme, "bearer".utf8).allSatisfy({ $0 | 0x20 == $1 })
        else { return nil }
        return String(decoding: field.utf8.dropFirst(7).drop { $0 == space }, as: UTF8.self)
    }
}

extension Request {
    /// The query's names and values, decoded as the WHATWG URL standard reads a query
    /// (application/x-www-form-urlencoded): `+` is a space and `%2B` a plus, then each `%XX` is a byte of UTF-8.
    /// Python's urlencode, Go's url.Values, Node's URLSearchParams and Java's URLEncoder send a space as `+`, and
    /// so do OAuth 2.0 redirects (RFC 6749, 4.1.2); read as RFC 3986 alone, as Hummingbird reads it, a search for
    /// "Sam Alvarez" from any of them looked for "Sam+Alvarez". A `%` without two hex digits after it, or bytes
    /// that are not UTF-8, are a 400 that names the parameter, never its value (a sign-in's code is one).
    func queryItems() throws(APIError) -> [(name: String, value: String)] {
        guard let query = uri.query else { return [] }
        return try query.split(separator: "&").map { (item) throws(APIError) in
            let equals = item.firstIndex(of: "=")
            guard let name = Self.formDecoded(item[..<(equals ?? item.endIndex)]) else {
                throw APIError.badRequest("a query parameter's name is not percent-encoded UTF-8")
            }
            guard let value = Self.formDecoded(equals.map { item[item.index(after: $0)...] } ?? "") else {
                throw APIError.badRequest("query parameter \(quoted(name)) is not percent-encoded UTF-8")
            }
            return (name, value)
        }
    }

    private static func formDecoded(_ text: Substring) -> String? {
        text.replacing("+", with: " ").removingPercentEncoding
    }

    /// Query parameter `name` (`queryItems`), or nil when absent. One given twice is a 400, never one of its
    /// values: a proxy or cache ahead of this service may have read the other (as with a JSON key named twice).
    /// Names are compared decoded, so `%6Cimit` is `limit`.
    func queryParameter(_ name: Substring) throws -> String? {
        let values = try queryItems().filter { $0.name == name }.map(\.value)
        guard values.count < 2 else { throw APIError.badRequest("\(name) is given more than once in the query") }
        return values.first
    }

    /// Query parameter `name` as a whole number in `range` (digits only: no sign, no exponent), or nil when
    /// absent; otherwise a 400 saying that it must be `expected`.
    func queryNumber<Number: FixedWidthInteger>(_ name: Substring, in range: ClosedRange<Number>, _ expected: String)
        throws -> Number?
    {
        try queryParameter(name).map { text in
            guard text.isDigits, let value = Number(text), range.contains(value) else {
                throw APIError.badRequest("\(name) must be \(expected)")
            }
            return value
        }
    }

    /// The end user a backend acts for (`actingUserID()`), as the services take an actor.
    func actingUser() throws -> Actor { .user(try actingUserID()) }

    /// The end user a backend acts for, named by one `X-Acting-User`; a 400 when it is missing, sent more than
    /// once or not a UUID.
    func actingUserID() throws -> UUID {
        let fields = headers[values: .actingUser]
        guard let header = fields.first else {
            throw APIError.badRequest("X-Acting-User must name the user this request acts for")
        }
        guard fields.count == 1 else { throw APIError.badRequest("send one X-Acting-User, not \(fields.count)") }
        return try APIError.uuid(header, "X-Acting-User")
    }
}

extension HTTPFields {
    /// Whether a body sent with these fields may be read as JSON: `Content-Type` is `application/json` or a
    /// `+json` type, with any parameters, or is missing. Read without building strings for the usual spelling:
    /// this runs for every check.
    var declaresJSONOrNothing: Bool {
        for field in self where field.name == .contentType {
            let type = field.value
            if type == "application/json" || type.utf8.starts(with: "application/json;".utf8) { continue }
            let media = Self.mediaType(type)
            guard media == "application/json" || (media.hasPrefix("application/") && media.hasSuffix("+json")) else {
                return false
            }
        }
        return true
    }

    /// Whether the body is an HTML form's (`application/x-www-form-urlencoded`), as a browser posts one.
    var declaresForm: Bool {
        self[.contentType].map(Self.mediaType) == "application/x-www-form-urlencoded"
    }

    /// Whether a body sent with these fields comes as it is: no `Content-Encoding` but `identity`. This service
    /// decodes none, and a body labelled gzip yet read as it came could be one request here and another to a
    /// proxy or gateway that decodes it.
    var declaresNoContentCoding: Bool {
        for field in self where field.name == .contentEncoding {
            guard field.value.trimmingCharacters(in: .whitespaces).lowercased() == "identity" else { return false }
        }
        return true
    }

    /// The media type of a `Content-Type` value, without its parameters (`; charset=UTF-8`) and in lower case,
    /// as its name is case-insensitive.
    static func mediaType(_ contentType: String) -> String {
        contentType.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).lowercased()
    }
}

/// Refuses with 415 a JSON route's body declared as something else (`text/plain`, a form) or in a content coding
/// (gzip): what a client says it sent is not read as plain JSON behind its back. A body declared empty holds
/// nothing to read either way, and clients label one anyway (`curl -d ''` and Python's urllib as a form), so its
/// labels are not looked at: a route that takes no body is not refused for them.
struct JSONBodyMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard [.post, .put, .patch].contains(request.method), request.headers[.contentLength] != "0" else {
            return try await next(request, context)
        }
        guard request.headers.declaresJSONOrNothing else {
            throw APIError(
                .unsupportedMediaType, code: .unsupportedMediaType,
                "send the body as Content-Type: application/json")
        }
        guard request.headers.declaresNoContentCoding else { throw APIError.contentCoded }
        return try await next(request, context)
    }
}

/// Refuses with 413 a body whose `Content-Length` is over the limit before reading any of it: a client sending
/// megabytes learns at once, not after the first 64 KiB of them (a chunked body, which declares no length, is
/// refused once that much has come). What it sends after the answer is read and dropped, as for any request
/// whose body was not read, up to the idle timeout; a client that waits for `100 Continue` is not told it
/// (`StrictHTTP1Channel`), and its connection closes after the answer. A form a browser posts (accepting an
/// invitation) is answered with a page, as the route would answer it.
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard AppRequestContext.refuses(declaredLength: request.headers[.contentLength]) else {
            return try await next(request, context)
        }
        let refusal = APIError.bodyTooLarge(closing: request.headers[.connection] == "close")
        guard request.headers.declaresForm else { throw refusal }
        throw InvitationController.answer(refusal, json: InvitationController.asksForJSON(request))
    }
}

extension APIError {
    /// A body in a content coding (`declaresNoContentCoding` is false): 415, naming the one coding taken.
    static let contentCoded = APIError(
        .unsupportedMediaType, code: .unsupportedMediaType,
        "send the body without Content-Encoding: this service decodes none", headers: [.acceptEncoding: "identity"])
}

extension KeyedDecodingContainer {
    /// For a field an edit may clear: nil when `key` is absent (keep), `.some(nil)` when it is null (clear).
    func decodeNullable<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T?? {
        contains(key) ? .some(try decodeIfPresent(type, forKey: key)) : nil
    }
}
