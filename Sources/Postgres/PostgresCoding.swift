/// A Swift value that can be sent as a bind parameter (`$n`).
public protocol PostgresEncodable: Sendable {
    /// The parameter's type, declared to the server so it never has to guess.
    static var postgresType: PostgresDataType { get }
    /// The wire format `encode(into:)` writes.
    static var postgresFormat: PostgresFormat { get }
    func encode(into buffer: inout [UInt8])
}

extension PostgresEncodable {
    public static var postgresFormat: PostgresFormat { .binary }
}

/// A Swift value that can be read from a result column (results always arrive in binary format).
public protocol PostgresDecodable: Sendable {
    /// Decodes a non-NULL value. `cell` names the column and its type for error messages.
    static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Self
    /// The value for SQL NULL; only `Optional` has one.
    static func decodeNull(cell: PostgresCell) throws -> Self
}

extension PostgresDecodable {
    public static func decodeNull(cell: PostgresCell) throws -> Self {
        throw cell.error("is NULL; decode it as \(Self.self)? to accept NULL")
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Wrapped? {
        try Wrapped.decode(from: bytes, cell: cell)
    }

    public static func decodeNull(cell: PostgresCell) throws -> Wrapped? { nil }
}

/// Where a value being decoded came from: used to name the column in errors.
public struct PostgresCell: Sendable {
    public let column: String
    public let type: PostgresDataType

    @usableFromInline
    init(column: String, type: PostgresDataType) {
        self.column = column
        self.type = type
    }

    /// A decoding error that names the column and its type, never its value.
    public func error(_ problem: String) -> PostgresError {
        PostgresError(.decoding, message: "column \"\(column)\" (\(type)) \(problem)", column: column)
    }

    func typeMismatch<T>(_ swiftType: T.Type) -> PostgresError {
        error("cannot be decoded as \(swiftType)")
    }
}

/// A read cursor over one value's bytes, in PostgreSQL's binary (network byte order) format.
public struct PostgresBytes {
    let buffer: UnsafeRawBufferPointer
    private(set) var offset = 0

    @usableFromInline
    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    public var count: Int { buffer.count }
    public var remaining: Int { buffer.count - offset }
    public var remainingBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[offset...]) }

    /// Reads a big-endian integer, or nil if too few bytes remain.
    public mutating func read<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { return nil }
        defer { offset += size }
        return T(bigEndian: buffer.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// Reads `count` bytes as a nested cursor, or nil if too few remain.
    public mutating func read(count: Int) -> PostgresBytes? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return PostgresBytes(UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count]))
    }
}

extension Array where Element == UInt8 {
    @inlinable
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}
