import Collaboration
import Foundation

/// What the schema checker reads of a value.
extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    public var members: [String: JSONValue]? {
        guard case .object(let members) = self else { return nil }
        return members
    }

    public var string: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }

    /// A scalar as JSON writes it; a container by its kind.
    public var shown: String {
        switch self {
        case .null: "null"
        case .bool(let flag): "\(flag)"
        case .number(let number): "\(number)"
        case .string(let text): "\"\(text)\""
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// Whether this is of JSON Schema's `type` named.
    public func isOfType(_ type: String) -> Bool {
        switch (type, self) {
        case ("null", .null), ("boolean", .bool), ("number", .number), ("string", .string), ("array", .array),
            ("object", .object):
            return true
        case ("integer", .number(var number)):
            var whole = Decimal()
            NSDecimalRound(&whole, &number, 0, .plain)
            return whole == number
        default:
            return false
        }
    }
}

/// The problems of a value against a schema of the OpenAPI document, read as JSON Schema 2020-12 reads the keywords
/// the document uses. A keyword it does not know is a problem too, so that no schema passes unread.
public struct SchemaChecker: Sendable {
    public let document: JSONValue

    public init(document: JSONValue) { self.document = document }

    /// A checker of the service's OpenAPI document, `Sources/Server/openapi.json`.
    public static func openAPI() throws -> SchemaChecker {
        let file = repositoryRoot.appendingPathComponent("Sources/Server/openapi.json")
        return SchemaChecker(document: try JSONDecoder().decode(JSONValue.self, from: try Data(contentsOf: file)))
    }

    public func problems(_ value: JSONValue, _ schema: JSONValue, at path: String) -> [String] {
        guard case .object(let keywords) = schema else { return ["\(path): the schema is no object"] }
        var found: [String] = []
        func problem(_ text: String) { found.append("\(path): \(text)") }
        for (keyword, argument) in keywords.sorted(by: { $0.key < $1.key }) {
            switch (keyword, argument) {
            case ("$ref", .string(let reference)):
                guard let target = resolve(reference) else {
                    problem("\(reference) names nothing in the document")
                    continue
                }
                found += problems(value, target, at: path)
            case ("type", .string(let type)):
                if !value.isOfType(type) { problem("\(value.shown) is no \(type)") }
            case ("type", .array(let types)):
                if !types.contains(where: { $0.string.map(value.isOfType) == true }) {
                    problem("\(value.shown) is no \(types.map(\.shown))")
                }
            case ("enum", .array(let options)):
                if !options.contains(value) { problem("\(value.shown) is none of \(options.map(\.shown))") }
            case ("const", _):
                if value != argument { problem("\(value.shown) is not \(argument.shown)") }
            case ("properties", .object(let properties)):
                guard case .object(let members) = value else { continue }
                for (name, member) in members.sorted(by: { $0.key < $1.key }) {
                    if let property = properties[name] { found += problems(member, property, at: "\(path).\(name)") }
                }
            case ("required", .array(let names)):
                guard case .object(let members) = value else { continue }
                for case .string(let name) in names where members[name] == nil { problem("lacks \(name)") }
            case ("additionalProperties", _):
                guard case .object(let members) = value else { continue }
                let known = schema["properties"]?.members ?? [:]
                for (name, member) in members.sorted(by: { $0.key < $1.key }) where known[name] == nil {
                    if argument == .bool(false) {
                        problem("holds \(name), which the schema does not list")
                    } else if argument != .bool(true) {
                        found += problems(member, argument, at: "\(path).\(name)")
                    }
                }
            case ("items", _):
                guard case .array(let elements) = value else { continue }
                for (index, element) in elements.enumerated() {
                    found += problems(element, argument, at: "\(path)[\(index)]")
                }
            case ("oneOf", .array(let options)):
                let each = options.enumerated().map { problems(value, $1, at: "\(path) (oneOf[\($0)])") }
                let matching = each.filter(\.isEmpty).count
                if matching != 1 { problem("matches \(matching) of oneOf's \(options.count) schemas, not one") }
                if matching == 0 { found += each.joined() }
            case ("format", .string(let format)):
                guard case .string(let text) = value else { continue }
                if let wrong = Self.formatProblem(text, format) { problem(wrong) }
            case ("minimum", .number(let bound)):
                if case .number(let number) = value, number < bound { problem("\(number) is below \(bound)") }
            case ("maximum", .number(let bound)):
                if case .number(let number) = value, number > bound { problem("\(number) is above \(bound)") }
            case ("minLength", .number(let bound)):
                if case .string(let text) = value, Decimal(text.unicodeScalars.count) < bound { problem("too short") }
            case ("maxLength", .number(let bound)):
                if case .string(let text) = value, Decimal(text.unicodeScalars.count) > bound { problem("too long") }
            case ("pattern", .string(let pattern)):
                guard case .string(let text) = value else { continue }
                if !Self.matches(text, pattern) { problem("\(text) does not match \(pattern)") }
            case ("description", _), ("examples", _):
                continue
            default:
                problem("the checker does not read \(keyword): \(argument)")
            }
        }
        return found
    }

    /// What `#/components/...` names in the document.
    public func resolve(_ reference: String) -> JSONValue? {
        guard reference.hasPrefix("#/") else { return nil }
        return reference.dropFirst(2).split(separator: "/").reduce(document as JSONValue?) { $0?[String($1)] }
    }

    private static func formatProblem(_ text: String, _ format: String) -> String? {
        switch format {
        case "uuid":
            return UUID(uuidString: text) == nil ? "\(text) is no UUID" : nil
        case "date-time":
            return matches(text, #"\A"# + fullDate + #"T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\z"#)
                ? nil : "\(text) is no RFC 3339 date and time"
        case "date":
            return matches(text, #"\A"# + fullDate + #"\z"#) ? nil : "\(text) is no RFC 3339 date"
        case "uri":
            return URL(string: text)?.scheme == nil ? "\(text) is no URI" : nil
        case "int64":
            return nil  // a JSON number; its range is the server's own type's
        default:
            return "the checker does not read format \(format)"
        }
    }

    /// RFC 3339's full-date, its month and day in range (not checked against the month's length).
    private static let fullDate = #"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"#

    /// Whether `pattern` matches somewhere in `text`, as JSON Schema's `pattern` reads it (unanchored); the
    /// document's patterns are ICU's as much as ECMA 262's (`\uFFFF` escapes), so ICU reads them.
    private static func matches(_ text: String, _ pattern: String) -> Bool {
        (try? NSRegularExpression(pattern: pattern))?.firstMatch(in: text, range: NSRange(text.startIndex..., in: text))
            != nil
    }
}
