import Foundation

/// A type that may be an element of a one-dimensional array parameter or column.
public protocol PostgresArrayElement: PostgresEncodable, PostgresDecodable {
    static var postgresArrayType: PostgresDataType { get }
}

extension String: PostgresArrayElement {
    public static var postgresArrayType: PostgresDataType { .textArray }
}

extension UUID: PostgresArrayElement {
    public static var postgresArrayType: PostgresDataType { .uuidArray }
}

extension Int64: PostgresArrayElement {
    public static var postgresArrayType: PostgresDataType { .int8Array }
}

extension Data: PostgresArrayElement {
    public static var postgresArrayType: PostgresDataType { .byteaArray }
}

/// One-dimensional arrays in PostgreSQL's binary array format.
extension Array: PostgresEncodable where Element: PostgresArrayElement {
    public static var postgresType: PostgresDataType { Element.postgresArrayType }

    public func encode(into buffer: inout [UInt8]) {
        precondition(Element.postgresFormat == .binary, "array elements are sent in binary format")
        buffer.appendBigEndian(Int32(isEmpty ? 0 : 1))  // dimensions
        buffer.appendBigEndian(Int32(0))  // no NULL elements
        buffer.appendBigEndian(Element.postgresType.rawValue)
        if isEmpty { return }
        buffer.appendBigEndian(Int32(count))  // length of the dimension
        buffer.appendBigEndian(Int32(1))  // lower bound
        var element: [UInt8] = []
        for value in self {
            element.removeAll(keepingCapacity: true)
            value.encode(into: &element)
            buffer.appendBigEndian(Int32(element.count))
            buffer.append(contentsOf: element)
        }
    }
}

extension Array: PostgresDecodable where Element: PostgresArrayElement {
    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> [Element] {
        guard cell.type == Element.postgresArrayType || (Element.self == String.self && cell.type == .varcharArray)
        else { throw cell.typeMismatch([Element].self) }
        var bytes = bytes
        guard let dimensions = bytes.read(Int32.self), bytes.read(Int32.self) != nil,
            let elementOID = bytes.read(UInt32.self)
        else { throw cell.error("has a malformed array value") }
        if dimensions == 0 { return [] }
        guard dimensions == 1 else { throw cell.error("has \(dimensions) dimensions; only one is supported") }
        guard let length = bytes.read(Int32.self), bytes.read(Int32.self) != nil, length >= 0 else {
            throw cell.error("has a malformed array value")
        }
        let elementCell = PostgresCell(column: cell.column, type: PostgresDataType(rawValue: elementOID))
        var result: [Element] = []
        result.reserveCapacity(Int(length))
        for _ in 0..<length {
            guard let size = bytes.read(Int32.self) else { throw cell.error("has a malformed array value") }
            guard size >= 0 else { throw cell.error("has a NULL element; \([Element].self) cannot hold it") }
            guard let element = bytes.read(count: Int(size)) else { throw cell.error("has a malformed array value") }
            result.append(try Element.decode(from: element, cell: elementCell))
        }
        return result
    }
}

/// A `jsonb` (or `json`) value, kept as its JSON text.
public struct PostgresJSON: Sendable, Hashable, PostgresEncodable, PostgresDecodable {
    public var text: String

    public init(text: String) { self.text = text }

    /// Encodes `value` with `JSONEncoder` (keys sorted, so equal values give equal text).
    public init(encoding value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        text = String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    public func decode<T: Decodable>(as type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }

    public static var postgresType: PostgresDataType { .jsonb }
    public static var postgresFormat: PostgresFormat { .text }
    public func encode(into buffer: inout [UInt8]) { buffer.append(contentsOf: text.utf8) }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> PostgresJSON {
        var bytes = bytes
        switch cell.type {
        case .jsonb:
            guard bytes.read(UInt8.self) == 1 else { throw cell.error("has an unknown jsonb format version") }
            return PostgresJSON(text: String(decoding: bytes.remainingBytes, as: UTF8.self))
        case .json:
            return PostgresJSON(text: String(decoding: bytes.remainingBytes, as: UTF8.self))
        default:
            throw cell.typeMismatch(PostgresJSON.self)
        }
    }
}
