import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Tenancy

/// The keys each route's JSON body may hold, as `openapi.json` documents them. A body that names any other key
/// is refused with a 400 naming it and the keys the route takes: read without it, a client's `is_primary` for
/// `primary`, or `folderId` for `folder_id`, would change nothing while the answer said the write was done.
/// Taken from the document, so that what it promises and what the service reads cannot drift.
enum DocumentedBodies {
    /// What a schema says of the keys a JSON value may hold.
    indirect enum Shape: Sendable {
        /// An object of these keys only.
        case object([String: Shape])
        /// An array, each element of this shape.
        case array(Shape)
        /// Anything else, or a choice of shapes: not looked into.
        case unchecked
    }

    /// Each documented request body's shape, by `METHOD /path/{parameter}`.
    static let shapes: [String: Shape] = {
        guard let data = try? openAPIDocument(),
            let document = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let paths = document["paths"] as? [String: [String: Any]]
        else { return [:] }
        let components = (document["components"] as? [String: Any])?["schemas"] as? [String: Any] ?? [:]
        var shapes: [String: Shape] = [:]
        for (path, operations) in paths {
            for (method, operation) in operations {
                guard let body = (operation as? [String: Any])?["requestBody"] as? [String: Any],
                    let content = body["content"] as? [String: Any],
                    let json = content["application/json"] as? [String: Any],
                    let schema = json["schema"]
                else { continue }
                shapes["\(method.uppercased()) \(path)"] = shape(of: schema, components)
            }
        }
        return shapes
    }()

    private static func shape(of schema: Any, _ components: [String: Any]) -> Shape {
        guard var schema = schema as? [String: Any] else { return .unchecked }
        if let reference = schema["$ref"] as? String,
            let resolved = components[String(reference.split(separator: "/").last ?? "")] as? [String: Any]
        {
            schema = resolved
        }
        if let properties = schema["properties"] as? [String: Any] {
            return .object(properties.mapValues { shape(of: $0, components) })
        }
        if schema["type"] as? String == "array", let items = schema["items"] {
            return .array(shape(of: items, components))
        }
        return .unchecked
    }

    /// A 400 naming the first key (by name) in `body` that the route's documented body does not take. Nothing when there
    /// is none, when the body is not JSON (its decoder says what is wrong) or when the route takes no JSON body.
    static func refuseUnknownKeys(_ body: ByteBuffer, method: HTTPRequest.Method, route: String?) throws(APIError) {
        guard let route, let shape = shapes["\(method.rawValue) \(documentedPath(route))"],
            let value = try? JSONSerialization.jsonObject(
                with: Data(body.readableBytesView), options: .fragmentsAllowed)
        else { return }
        try refuse(value, shape, at: Self.whole)
    }

    /// How a message names the body itself; a member is named by its path (`checks[1]`).
    private static let whole = "the body"

    private static func refuse(_ value: Any, _ shape: Shape, at place: String) throws(APIError) {
        switch shape {
        case .object(let keys):
            guard let object = value as? [String: Any] else { return }
            for (key, member) in object.sorted(by: { $0.key < $1.key }) {
                guard let inner = keys[key] else {
                    throw APIError.badRequest(
                        "\(place) names \(quoted(key)), which this request does not take; it takes "
                            + keys.keys.sorted().joined(separator: ", "))
                }
                try refuse(member, inner, at: place == Self.whole ? key : "\(place).\(key)")
            }
        case .array(let element):
            guard let array = value as? [Any] else { return }
            for (index, member) in array.enumerated() { try refuse(member, element, at: "\(place)[\(index)]") }
        case .unchecked:
            return
        }
    }

    /// A route as the router names it (`/v1/couples/:couple` or `/v1/couples/{couple}`), as the document does.
    static func documentedPath(_ route: String) -> String {
        "/"
            + route.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
            .joined(separator: "/")
    }
}

/// A JSON body collected for its decoder, after the refusals every one meets: an object that names a key twice
/// (`RepeatedJSONKeys`), a key its route does not take (`DocumentedBodies`).
func documentedJSONBody(_ request: Request, _ context: some RequestContext) async throws -> ByteBuffer {
    let buffer = try await request.body.collect(upTo: context.maxUploadSize)
    try RepeatedJSONKeys.refuse(buffer)
    try DocumentedBodies.refuseUnknownKeys(buffer, method: request.method, route: context.endpointPath)
    return buffer
}
