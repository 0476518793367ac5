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
