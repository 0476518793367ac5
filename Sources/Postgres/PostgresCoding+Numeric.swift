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
            let text = try numericText(bytes, cell: cell)
            guard let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                throw cell.error("holds a value Decimal cannot represent")
            }
            return value
        case .int2, .int4, .int8:
            return Decimal(try Int64.decode(from: bytes, cell: cell))
        default:
            throw cell.typeMismatch(Decimal.self)
        }
    }

    /// Renders numeric's binary form (base-10000 digits with a weight and display scale) as text.
    private static func numericText(_ bytes: PostgresBytes, cell: PostgresCell) throws -> String {
        var bytes = bytes
        guard let digitCount = bytes.read(Int16.self), let weight = bytes.read(Int16.self),
            let sign = bytes.read(UInt16.self), let scale = bytes.read(Int16.self), digitCount >= 0
        else { throw cell.error("has a malformed numeric value") }
        switch sign {
        case 0x0000, 0x4000: break
        case 0xC000: throw cell.error("is NaN, which this column's Decimal cannot hold")
        default: throw cell.error("is infinite, which Decimal cannot hold")
        }
        var digits: [Int16] = []
        for _ in 0..<digitCount {
            guard let digit = bytes.read(Int16.self), (0..<10000).contains(digit) else {
                throw cell.error("has a malformed numeric value")
            }
            digits.append(digit)
        }
        // Digit i is worth 10000^(weight - i).
        var integerPart = ""
        if weight >= 0 {
            for index in 0...Int(weight) {
                let digit = index < digits.count ? digits[index] : 0
                let group = String(digit)
                integerPart += index == 0 ? group : String(repeating: "0", count: 4 - group.count) + group
            }
        } else {
            integerPart = "0"
        }
        var fraction = ""
        if scale > 0 {
            let firstFractionIndex = Int(weight) + 1
            var index = firstFractionIndex
            while fraction.count < Int(scale) {
                let digit = index >= 0 && index < digits.count ? digits[index] : 0
                let group = String(digit)
                fraction += String(repeating: "0", count: 4 - group.count) + group
                index += 1
            }
            fraction = String(fraction.prefix(Int(scale)))
        }
        let magnitude = fraction.isEmpty ? integerPart : "\(integerPart).\(fraction)"
        return sign == 0x4000 ? "-" + magnitude : magnitude
    }
}
