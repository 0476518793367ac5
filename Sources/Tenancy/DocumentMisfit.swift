import Foundation

extension DecodingError {
    /// What a decoder found amiss in a strict JSON document (`StrictJSON`), as the document's writer would put it:
    /// the place as the document writes it (`checks[1].permission`) and what belongs there, never the decoder's
    /// words about Swift types. `document` names the whole, as a message begins ("the body"); `snakeCase` when the
    /// decoder read the document's snake_case keys as Swift's camelCase ones, to name them as written.
    public func misfit(in document: String, snakeCase: Bool = false) -> String {
        func place(_ path: [any CodingKey]) -> String {
            guard !path.isEmpty else { return document }
            return path.reduce(into: "") { place, key in
                if let index = key.intValue {
                    place += "[\(index)]"
                } else {
                    place += (place.isEmpty ? "" : ".") + (snakeCase ? key.stringValue.snakeCased : key.stringValue)
                }
            }
        }
        switch self {
        case .keyNotFound(let key, let context):
            return "\(document) lacks \(quoted(place(context.codingPath + [key])))"
        case .typeMismatch(let expected, let context), .valueNotFound(let expected, let context):
            return "\(place(context.codingPath)) must be \(Self.kind(expected))"
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            // Strict JSON: what the decoder could not read is a number beyond what its field's type holds (a
            // fraction for an Int, 1e30 for an Int64), which it reports without saying where, as JSON it cannot
            // parse.
            return "\(document) holds a number its field cannot take: a fraction where a whole number belongs, or "
                + "one too large"
        case .dataCorrupted(let context):
            // Foundation's words for a string that is no UUID name a Swift type; every document says it this way.
            if context.debugDescription == "Attempted to decode UUID from invalid UUID string." {
                return "\(place(context.codingPath)) must be a UUID"
            }
            let detail = context.debugDescription.isEmpty ? "" : ": \(context.debugDescription)"
            return "\(place(context.codingPath)) is malformed\(detail)"
        @unknown default:
            return "\(document) does not hold what belongs there"
        }
    }

    /// What JSON a Swift type is read from, for a writer who wrote something else.
    private static func kind(_ type: Any.Type) -> String {
        switch type {
        case is Decimal.Type: "a number, e.g. 1250 or 99.90"
        case is Int.Type, is Int64.Type: "a whole number"
        case is Double.Type: "a number"
        case is Bool.Type: "true or false"
        case is String.Type: "a string"
        case is [Any].Type: "an array"
        case is [String: Any].Type: "an object"
        default: "JSON of another type"
        }
    }
}

extension String {
    /// `budgetItemId` as `budget_item_id`.
    fileprivate var snakeCased: String {
        reduce(into: "") { result, character in
            if character.isUppercase {
                result += "_" + character.lowercased()
            } else {
                result.append(character)
            }
        }
    }
}
