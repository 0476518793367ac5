import Foundation

extension Bool: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .bool }

    public func encode(into buffer: inout [UInt8]) { buffer.append(self ? 1 : 0) }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Bool {
        var bytes = bytes
        guard cell.type == .bool, bytes.count == 1, let byte = bytes.read(UInt8.self) else {
            throw cell.typeMismatch(Bool.self)
        }
        return byte != 0
    }
}

/// An integer parameter goes as its own width; an integer decodes from any integer column whose value fits.
public protocol PostgresInteger: FixedWidthInteger, PostgresEncodable, PostgresDecodable {}

extension PostgresInteger {
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(self) }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Self {
        var bytes = bytes
        let wide: Int64?
        switch cell.type {
        case .int2: wide = bytes.read(Int16.self).map(Int64.init)
        case .int4: wide = bytes.read(Int32.self).map(Int64.init)
        case .int8: wide = bytes.read(Int64.self)
        case .oid: wide = bytes.read(UInt32.self).map(Int64.init)
        default: throw cell.typeMismatch(Self.self)
        }
        guard let wide, bytes.remaining == 0 else { throw cell.error("has a malformed integer value") }
        guard let value = Self(exactly: wide) else { throw cell.error("does not fit in \(Self.self)") }
        return value
    }
}

extension Int16: PostgresInteger {
    public static var postgresType: PostgresDataType { .int2 }
}

extension Int32: PostgresInteger {
    public static var postgresType: PostgresDataType { .int4 }
}

extension Int64: PostgresInteger {
    public static var postgresType: PostgresDataType { .int8 }
}

extension Int: PostgresInteger {
    public static var postgresType: PostgresDataType { .int8 }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(Int64(self)) }
}

extension String: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .text }
    public func encode(into buffer: inout [UInt8]) { buffer.append(contentsOf: utf8) }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> String {
        switch cell.type {
        case .text, .varchar, .bpchar, .name:
            return String(decoding: bytes.remainingBytes, as: UTF8.self)
        default:
            throw cell.typeMismatch(String.self)
        }
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .uuid }

    public func encode(into buffer: inout [UInt8]) {
        withUnsafeBytes(of: uuid) { buffer.append(contentsOf: $0) }
    }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> UUID {
        guard cell.type == .uuid else { throw cell.typeMismatch(UUID.self) }
        guard bytes.count == 16 else { throw cell.error("has a malformed uuid value") }
        return UUID(uuid: bytes.buffer.loadUnaligned(as: uuid_t.self))
    }
}

extension Data: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .bytea }
    public func encode(into buffer: inout [UInt8]) { buffer.append(contentsOf: self) }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Data {
        guard cell.type == .bytea else { throw cell.typeMismatch(Data.self) }
        return Data(bytes.remainingBytes)
    }
}

/// Microseconds between 1970-01-01 (Unix epoch) and 2000-01-01 (PostgreSQL's epoch).
private let postgresEpochOffsetMicroseconds: Int64 = 946_684_800 * 1_000_000

extension Date: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .timestamptz }

    /// Sent as microseconds since 2000-01-01 UTC, rounded to the nearest microsecond.
    public func encode(into buffer: inout [UInt8]) {
        let seconds = timeIntervalSince1970.rounded(.down)
        let micros = ((timeIntervalSince1970 - seconds) * 1_000_000).rounded()
        buffer.appendBigEndian(Int64(seconds) * 1_000_000 + Int64(micros) - postgresEpochOffsetMicroseconds)
    }

    /// Decodes `timestamptz`, `timestamp` (read as UTC) and `date` (midnight UTC).
    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Date {
        var bytes = bytes
        let micros: Int64
        switch cell.type {
        case .timestamptz, .timestamp:
            guard let value = bytes.read(Int64.self) else { throw cell.error("has a malformed timestamp") }
            guard value != .max, value != .min else { throw cell.error("is infinite, which Date cannot hold") }
            micros = value
        case .date:
            guard let days = bytes.read(Int32.self) else { throw cell.error("has a malformed date") }
            guard days != .max, days != .min else { throw cell.error("is infinite, which Date cannot hold") }
            micros = Int64(days) * 86_400 * 1_000_000
        default:
            throw cell.typeMismatch(Date.self)
        }
        let unixMicros = micros + postgresEpochOffsetMicroseconds
        let (seconds, remainder) = unixMicros.quotientAndRemainder(dividingBy: 1_000_000)
        return Date(timeIntervalSince1970: Double(seconds) + Double(remainder) / 1_000_000)
    }
}
