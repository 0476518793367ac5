import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Tenancy

/// The query parameters and JSON body keys each API route may be sent, which of those keys may be null, and whether it
/// acts for the user `X-Acting-User` names, as `openapi.json` documents them. Any other is refused with a 400 naming
/// it: read without it, a client's `is_primary` for `primary`, `folderId` for `folder_id` or `?serch=` for `?search=`
/// would change nothing, or list everything, while the answer said the request was done; and a backend that names a
/// user to a route that answers for the service key alone would take what it is shown for what that user may see. Taken
/// from the document, so that what it promises and what the service reads cannot drift.
enum DocumentedRequests {
    /// What a schema says of the keys a JSON value may hold, and whether it may be null.
    struct Shape: Sendable {
        indirect enum Kind: Sendable {
            /// An object of these keys only, those in `required` always.
            case object([String: Shape], required: Set<String>)
            /// An array, each element of this shape.
            case array(Shape)
            /// Anything else, or a choice of shapes: not looked into.
            case unchecked
        }

        let kind: Kind
        /// False when the schema names its types and `null` is not among them: read without this, a `null` for
        /// an optional key would pass for the key left out, so `"event": null` would keep an item's event while
        /// `"folder_id": null`, which the document allows, takes it out of its folder.
        let nullable: Bool

        static let unchecked = Shape(kind: .unchecked, nullable: true)
    }

    /// What one documented operation may be sent.
    struct Operation: Sendable {
        var query: Set<String> = []
        /// Whether it takes `X-Acting-User`, and whether it needs one.
        var actsForUser = false
        var needsActingUser = false
        /// The parameters of its path that are ids (`format: uuid`), in the order the path names them.
        var ids: [String] = []
        /// The shape of its JSON body, if it takes one.
        var body: Shape?
    }

    /// Each documented operation, by `METHOD /path/{parameter}`.
    static let operations: [String: Operation] = {
        guard let data = try? openAPIDocument(),
            let document = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let paths = document["paths"] as? [String: [String: Any]]
        else { return [:] }
        let components = document["components"] as? [String: Any] ?? [:]
        let schemas = components["schemas"] as? [String: Any] ?? [:]
        let parameters = components["parameters"] as? [String: Any] ?? [:]
        var operations: [String: Operation] = [:]
        for (path, entries) in paths {
            for (method, entry) in entries {
                guard let entry = entry as? [String: Any] else { continue }
                var operation = Operation()
                var ids: Set<String> = []
                for parameter in entry["parameters"] as? [Any] ?? [] {
                    guard let parameter = resolved(parameter, in: parameters), let name = parameter["name"] as? String
                    else { continue }
                    switch parameter["in"] as? String {
                    case "query": operation.query.insert(name)
                    case "header" where HTTPField.Name(name) == .actingUser:
                        operation.actsForUser = true
                        operation.needsActingUser = parameter["required"] as? Bool == true
                    case "path" where (parameter["schema"] as? [String: Any])?["format"] as? String == "uuid":
                        ids.insert(name)
                    default: continue
                    }
                }
                operation.ids = path.split(separator: "/").filter { $0.first == "{" && $0.last == "}" }
                    .map { String($0.dropFirst().dropLast()) }.filter(ids.contains)
                let content = (entry["requestBody"] as? [String: Any])?["content"] as? [String: Any]
                if let schema = (content?["application/json"] as? [String: Any])?["schema"] {
                    operation.body = shape(of: schema, schemas)
                }
                operations["\(method.uppercased()) \(path)"] = operation
            }
        }
        return operations
    }()

    /// `object`, or what its `$ref` names in `section` of the document's components.
    private static func resolved(_ object: Any, in section: [String: Any]) -> [String: Any]? {
        guard let object = object as? [String: Any] else { return nil }
        guard let reference = object["$ref"] as? String else { return object }
        return section[String(reference.split(separator: "/").last ?? "")] as? [String: Any]
    }

    private static func shape(of schema: Any, _ schemas: [String: Any]) -> Shape {
        guard let schema = resolved(schema, in: schemas) else { return .unchecked }
        let nullable = allowsNull(schema, schemas)
        if let properties = schema["properties"] as? [String: Any] {
            let required = Set(schema["required"] as? [String] ?? [])
            return Shape(
                kind: .object(properties.mapValues { shape(of: $0, schemas) }, required: required), nullable: nullable)
        }
        if schema["type"] as? String == "array", let items = schema["items"] {
            return Shape(kind: .array(shape(of: items, schemas)), nullable: nullable)
        }
        return Shape(kind: .unchecked, nullable: nullable)
    }

    /// Whether a schema lets its value be null: `null` among its types or its choices' types, or no type named.
    private static func allowsNull(_ schema: [String: Any], _ schemas: [String: Any]) -> Bool {
        if let type = schema["type"] as? String { return type == "null" }
        if let types = schema["type"] as? [String] { return types.contains("null") }
        guard let choices = (schema["oneOf"] ?? schema["anyOf"]) as? [Any] else { return true }
        return choices.contains { resolved($0, in: schemas).map { allowsNull($0, schemas) } ?? true }
    }

    /// A 400 naming the first key (by name) in `body`, strict JSON, that the route's documented body does not
    /// take. Nothing when there is none or when the route takes no JSON body.
    static func refuseUnknownKeys(_ body: ByteBuffer, method: HTTPRequest.Method, route: String?) throws(APIError) {
        guard let shape = operation(method, route)?.body else { return }
        guard
            let value = try? JSONSerialization.jsonObject(
                with: Data(body.readableBytesView), options: .fragmentsAllowed)
        else {
            // Strict JSON holds only numbers a Double reads; should Foundation still refuse it, so is the body.
            throw APIError.badRequest("the body cannot be read as JSON")
        }
        try refuse(value, shape, at: Self.whole)
    }

    /// A 400 for what a request's path and headers get wrong, before anything reads its body, so that a client
    /// learns of a mistyped id or a forgotten header first, not after mending a body that was never the problem:
    /// the first id in the path (`parameters`, as the router read them) that is not a UUID, an `X-Acting-User`
    /// missing, repeated or no UUID where one is needed or sent to a route that does not take it, or the first query
    /// parameter (by name) that the route does not take; names are compared decoded, as `Request.queryParameter`
    /// reads them. Nothing for a route the document does not know.
    static func refuseBeforeBody(_ request: Request, route: String?, parameters: Parameters) throws {
        guard let operation = operation(request.method, route) else { return }
        for name in operation.ids { _ = try APIError.uuid(parameters.get(name), "\(name) id") }
        if operation.needsActingUser {
            _ = try request.actingUserID()
        } else if request.headers[.actingUser] != nil, !operation.actsForUser {
            throw APIError.badRequest(
                "this request takes no X-Acting-User: it answers for the service key, whichever user the header names")
        }
        guard request.uri.query?.isEmpty == false else { return }  // most requests: nothing to look up
        let taken = operation.query
        let names = try request.queryItems().map(\.name)
        guard let unknown = names.filter({ !taken.contains($0) }).sorted().first else { return }
        throw APIError.badRequest(
            "the query names \(quoted(unknown)), which this request does not take; it takes "
                + (taken.isEmpty ? "none" : taken.sorted().joined(separator: ", ")))
    }

    /// How a message names the body itself; a member is named by its path (`checks[1]`).
    private static let whole = "the body"

    /// Refuses, within `value`, a key `shape` does not take, and a null for an optional key that takes none.
    private static func refuse(_ value: Any, _ shape: Shape, at place: String) throws(APIError) {
        switch shape.kind {
        case .object(let keys, let required):
            guard let object = value as? [String: Any] else { return }
            for (key, member) in object.sorted(by: { $0.key < $1.key }) {
                guard let inner = keys[key] else {
                    throw APIError.badRequest(
                        "\(place) names \(quoted(key)), which this request does not take; it takes "
                            + keys.keys.sorted().joined(separator: ", "))
                }
                let name = place == Self.whole ? key : "\(place).\(key)"
                // A required key's null is its decoder's to refuse, saying what the key must be.
                if member is NSNull, !inner.nullable, !required.contains(key) {
                    throw APIError.badRequest("\(name) must not be null; leave it out instead")
                }
                try refuse(member, inner, at: name)
            }
        case .array(let element):
            guard let array = value as? [Any] else { return }
            for (index, member) in array.enumerated() { try refuse(member, element, at: "\(place)[\(index)]") }
        case .unchecked:
            return
        }
    }

    /// The documented operation a request to `route`, as the router names it (`/v1/couples/:couple` or
    /// `/v1/couples/{couple}`), is for; HEAD is GET's.
    private static func operation(_ method: HTTPRequest.Method, _ route: String?) -> Operation? {
        guard let route else { return nil }
        let path = route.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
        return operations["\(method == .head ? "GET" : method.rawValue) /\(path.joined(separator: "/"))"]
    }
}

/// A JSON body collected for its decoder, after the refusals every one meets: one that is not strict JSON (a
/// gateway in front of this service that checks a body's `permission` could read another value of a repeated
/// key, or refuse what Foundation takes; `StrictJSON`), a key its route does not take or a null where it takes
/// none (`DocumentedRequests`).
func documentedJSONBody(_ request: Request, _ context: some RequestContext) async throws -> ByteBuffer {
    let buffer = try await request.body.collect(upTo: context.maxUploadSize)
    if let problem = buffer.withUnsafeReadableBytes({ StrictJSON.problem(in: $0) }) {
        throw APIError.badRequest("the body \(problem)")
    }
    try DocumentedRequests.refuseUnknownKeys(buffer, method: request.method, route: context.endpointPath)
    return buffer
}

/// Every JSON body's decoder (Hummingbird's request decoder, and the budget routes' with their key spelling):
/// JSONDecoder reading dates as ISO 8601, after the refusals of `documentedJSONBody`. A body that does not fit is
/// a 400 naming the key at fault and what it must be, never the decoder's own words about Swift types.
public struct StrictJSONDecoder: RequestDecoder {
    var keys: JSONDecoder.KeyDecodingStrategy = .useDefaultKeys

    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext)
        async throws -> T
    {
        let buffer = try await documentedJSONBody(request, context)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        decoder.keyDecodingStrategy = keys
        do {
            return try decoder.decode(T.self, from: buffer)
        } catch let error as DecodingError {
            throw APIError.badRequest(error.misfit(in: "the body", snakeCase: true))
        }
    }
}

/// Refuses a malformed id in the path, a missing or malformed `X-Acting-User`, and a header or query parameter the
/// route does not take (`DocumentedRequests.refuseBeforeBody`), before the route reads any of them or the body.
struct DocumentedRequestMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        try DocumentedRequests.refuseBeforeBody(request, route: context.endpointPath, parameters: context.parameters)
        return try await next(request, context)
    }
}
