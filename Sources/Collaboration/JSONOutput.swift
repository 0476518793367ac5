import Foundation

extension JSONEncoder {
    /// How rbac writes JSON, over HTTP and for `--json` alike: snake_case keys in sorted order, ISO 8601 dates,
    /// slashes as they are (links stay readable), and ids in lower case (UUIDText.swift). `pretty` indents it for
    /// people. Encoding with one encoder from many threads is safe.
    public static func rbac(pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting =
            pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// A refusal as rbac writes it in JSON, over HTTP and for `--json` alike: `{"error": {"code", "message"}}`.
public struct ErrorBody: Encodable, Sendable {
    public struct Detail: Encodable, Sendable {
        public let code: String
        public let message: String
    }
    public let error: Detail

    public init(code: String, message: String) {
        error = Detail(code: code, message: message)
    }
}

/// A JSON value as it was read, written back as the same JSON: rows the audit logs recorded, which `--json`
/// prints as objects rather than as strings of JSON.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case number(Decimal)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer()
        if value.decodeNil() {
            self = .null
        } else if let flag = try? value.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? value.decode(Decimal.self) {
            self = .number(number)
        } else if let text = try? value.decode(String.self) {
            self = .string(text)
        } else if let elements = try? value.decode([JSONValue].self) {
            self = .array(elements)
        } else {
            self = .object(try value.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var value = encoder.singleValueContainer()
        switch self {
        case .null: try value.encodeNil()
        case .bool(let flag): try value.encode(flag)
        case .number(let number): try value.encode(number)
        case .string(let text): try value.encode(text)
        case .array(let elements): try value.encode(elements)
        case .object(let fields): try value.encode(fields)
        }
    }
}
