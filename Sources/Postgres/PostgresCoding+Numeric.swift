import Foundation

/// `numeric` <-> `Decimal`, exactly: values travel as decimal digits, never through `Double`.
extension Decimal: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .numeric }
    public static var postgresFormat: PostgresFormat { .text }

    public func encode(into buffer: inout [UInt8]) {
        // Decimal's description is plain decimal notation ("-1234.5"), which numeric's input accepts.
        buffer.append(contentsOf: description.utf8)
    }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Decimal {
        switch cell.type {
        case .numeric:
            return try numeric(bytes, cell: cell)
        case .int2, .int4, .int8:
            return Decimal(try Int64.decode(from: bytes, cell: cell))
        default:
            throw cell.typeMismatch(Decimal.self)
        }
    }

    /// Takes the digits four at a time into a UInt64 significand, so that an amount such as numeric(12,2)'s is
    /// built with no Decimal arithmetic at all; never through text or floating point.
    private static func numeric(_ bytes: PostgresBytes, cell: PostgresCell) throws -> Decimal {
        var digits = try NumericDigits(bytes, cell: cell)
        var value = Decimal(0)
        var index = 0
        while index < digits.count {
            // Up to four base-10000 digits (16 decimal digits) fit in a UInt64.
            var chunk: UInt64 = 0
            let end = min(index + 4, digits.count)
            for _ in index..<end { chunk = chunk * 10000 + UInt64(try digits.next()) }
            let exponent = 4 * (digits.weight - (end - 1))
            // Beyond Decimal's exponents a value would turn into NaN, or silently into zero.
            guard (-128...127).contains(exponent) || chunk == 0 else {
                throw cell.error("holds a value Decimal cannot represent")
            }
            let part = Decimal(sign: digits.negative ? .minus : .plus, exponent: exponent, significand: Decimal(chunk))
            value = index == 0 ? part : value + part
            index = end
        }
        return value
    }
}

/// A `numeric` read as a whole number of hundredths (cents), exactly, for amounts that are only to be added
/// up: far cheaper to read and to add than `Decimal`. A value with finer digits than hundredths, or beyond
/// Int64, is an error rather than a rounded number.
public struct Hundredths: PostgresDecodable, Sendable, Hashable {
    public let value: Int64

    public init(_ value: Int64) { self.value = value }

    private static let powersOfTen: [Int64] = (0...18).map { (0..<$0).reduce(1) { power, _ in power * 10 } }

    public static func decode(from bytes: PostgresBytes, cell: PostgresCell) throws -> Hundredths {
        guard cell.type == .numeric else { throw cell.typeMismatch(Hundredths.self) }
        var digits = try NumericDigits(bytes, cell: cell)
        var value: Int64 = 0
        for index in 0..<digits.count {
            let digit = try digits.next()
            // Worth 10000^(weight - index) units, that is 10^(4 * (weight - index) + 2) hundredths.
            let power = 4 * (digits.weight - index) + 2
            let hundredths: Int64
            if power >= 0 {
                let (scaled, overflow) = digit.multipliedReportingOverflow(
                    by: power < powersOfTen.count ? powersOfTen[power] : .max)
                guard !overflow || digit == 0 else { throw cell.error("is too large for Int64 hundredths") }
                hundredths = digit == 0 ? 0 : scaled
            } else if power == -2, digit % 100 == 0 {
                hundredths = digit / 100
            } else if digit == 0 {
                hundredths = 0
            } else {
                throw cell.error("has digits finer than hundredths")
            }
            let (sum, overflow) = value.addingReportingOverflow(hundredths)
            guard !overflow else { throw cell.error("is too large for Int64 hundredths") }
            value = sum
        }
        return Hundredths(digits.negative ? -value : value)
    }
}

/// numeric's binary form: the digit count, the weight (the first base-10000 digit is worth 10000^weight), the
/// sign and the display scale (which neither reader keeps), then the digits.
private struct NumericDigits {
    let count: Int
    let weight: Int
    let negative: Bool
    private var bytes: PostgresBytes
    private let cell: PostgresCell

    init(_ bytes: PostgresBytes, cell: PostgresCell) throws {
        var bytes = bytes
        guard let count = bytes.read(Int16.self), let weight = bytes.read(Int16.self),
            let sign = bytes.read(UInt16.self), bytes.read(Int16.self) != nil, count >= 0
        else { throw cell.error("has a malformed numeric value") }
        switch sign {
        case 0x0000, 0x4000: break
        case 0xC000: throw cell.error("is NaN, which is not a number to compute with")
        default: throw cell.error("is infinite, which is not a number to compute with")
        }
        (self.count, self.weight, self.negative, self.bytes, self.cell) = (
            Int(count), Int(weight), sign == 0x4000, bytes, cell
        )
    }

    /// The next digit, 0 to 9999.
    mutating func next() throws -> Int64 {
        guard let digit = bytes.read(Int16.self), (0..<10000).contains(digit) else {
            throw cell.error("has a malformed numeric value")
        }
        return Int64(digit)
    }
}
