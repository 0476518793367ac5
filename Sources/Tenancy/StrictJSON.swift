import Foundation

/// JSON as RFC 8259 writes it, with I-JSON's rules (RFC 7493) on top (UTF-8, no escaped half of a surrogate
/// pair, no key twice in one object), its containers nested at most `maxDepth` deep. Where two readers see one
/// document (a gateway in front of the service and the service; `rbac policy test` and the database applying
/// the policy; an identity provider and this service reading its tokens), both must read it alike, and
/// Foundation's readers do not read as others do: they take a trailing comma (`{"a":1,}`), JSONDecoder takes
/// `01` and `1.` in values it skips, it keeps the first of a key's values where PostgreSQL's jsonb and most
/// other parsers keep the last, and it reads a number of more digits or places than its `Decimal` keeps as another
/// number (`5.000000000000000000000000000000000000000001` as 5, which a budget then takes as whole cents; `1e-400`
/// as 0 where a whole number belongs). Such documents are refused.
public enum StrictJSON {
    /// How deep containers may nest: Foundation's readers refuse a document nested deeper.
    public static let maxDepth = 512

    /// The most significant digits (from a number's first digit other than zero to its last) that a number may
    /// have: Foundation's `Decimal` keeps 38 exactly (its significand is 128 bits) and cuts off the rest.
    public static let maxSignificantDigits = 38

    /// The places (powers of ten) a number's significant digits may stand at, a zero's its exponent. Below 1e-128
    /// `Decimal` rounds (its exponent is an `Int8`) and a `Double` reads 1e-400 as 0; up to 1e127 `Decimal` holds
    /// any 38 digits, above it not all, and jsonb refuses numbers far out either way.
    public static let digitPlaces = -128...127

    /// What makes a document no strict JSON: the first place it is not JSON, else the first key named twice, else
    /// the first number that would not be read as written.
    public enum Problem: Error, Hashable, CustomStringConvertible {
        /// Not JSON: what is wrong, at which byte (counted from 1).
        case malformed(String, byte: Int)
        /// An object names this key twice (compared as a decoder reads keys: escapes resolved).
        case repeatedKey(String)
        /// The number at this byte has more than `maxSignificantDigits`.
        case tooPrecise(byte: Int)
        /// The number at this byte has a digit out of `digitPlaces`.
        case outOfPlace(byte: Int)

        /// The problem, for a message that names the document first: "the body \(problem)".
        public var description: String {
            switch self {
            case .malformed(let what, let byte): "is not JSON: \(what) at byte \(byte)"
            case .repeatedKey(let key): "names \(quoted(key)) more than once in one object"
            case .tooPrecise(let byte):
                "holds a number of more than \(StrictJSON.maxSignificantDigits) significant digits at byte \(byte), "
                    + "which would be read rounded"
            case .outOfPlace(let byte):
                "holds a number with a digit out of the places 1e\(StrictJSON.digitPlaces.lowerBound) to "
                    + "1e\(StrictJSON.digitPlaces.upperBound) at byte \(byte), which would not be read as written"
            }
        }
    }

    /// The first problem of `json`; nil when it is strict JSON.
    public static func problem(in json: UnsafeRawBufferPointer) -> Problem? {
        var reader = Reader(bytes: json)
        do { try reader.document() } catch { return error }
        return nil
    }

    /// `problem(in:)` over bytes held in any contiguous form.
    public static func problem(in json: some ContiguousBytes) -> Problem? {
        json.withUnsafeBytes { problem(in: $0) }
    }
}

/// Reads a document from its first byte to its last, without recursion: the containers open around the byte
/// read are a stack.
private struct Reader {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    /// What comes next in the document.
    private enum Expecting {
        case value
        /// An object's first key or, after a comma, its next one.
        case key(first: Bool)
        /// A comma or the end of the innermost container (or of the document).
        case separator
    }

    mutating func document() throws(StrictJSON.Problem) {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { throw malformed("a byte order mark") }
        // One entry per open container: the keys an object has named so far, nil for an array.
        var open: [Set<String>?] = []
        // The first key named twice and the first number not read as written, told only once the document is
        // known to be JSON otherwise: what is no JSON at all is the problem to name first.
        var repeated: String?
        var misread: StrictJSON.Problem?
        var expecting = Expecting.value
        var afterComma = false
        while true {
            skipWhitespace()
            switch expecting {
            case .value:
                guard let byte = next else { throw malformed("the end where a value should be") }
                if afterComma, byte == UInt8(ascii: "]") { throw malformed("a comma before ]") }
                afterComma = false
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "["), open.count == StrictJSON.maxDepth {
                    throw malformed("containers nested deeper than \(StrictJSON.maxDepth)")
                }
                switch byte {
                case UInt8(ascii: "{"):
                    index += 1
                    open.append([])
                    expecting = .key(first: true)
                    continue
                case UInt8(ascii: "["):
                    index += 1
                    skipWhitespace()
                    if next == UInt8(ascii: "]") {
                        index += 1
                        expecting = .separator
                    } else {
                        open.append(nil)
                    }
                    continue
                case UInt8(ascii: "\""): _ = try string(keeping: false)
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    let problem = try number()
                    if misread == nil { misread = problem }
                case UInt8(ascii: "t"): try literal("true")
                case UInt8(ascii: "f"): try literal("false")
                case UInt8(ascii: "n"): try literal("null")
                default: throw malformed("\(described(byte)) where a value should be")
                }
                expecting = .separator
            case .key(let first):
                guard let byte = next else { throw malformed("the end where a key should be") }
                if byte == UInt8(ascii: "}") {
                    guard first else { throw malformed("a comma before }") }
                    index += 1
                    open.removeLast()
                    expecting = .separator
                    continue
                }
                guard byte == UInt8(ascii: "\"") else {
                    throw malformed("\(described(byte)) where a key (a string in double quotes) should be")
                }
                let key = try string(keeping: true)
                // In place: a copy of the set per key would make a body of many keys cost their square.
                if !open[open.count - 1]!.insert(key).inserted, repeated == nil { repeated = key }
                skipWhitespace()
                guard next == UInt8(ascii: ":") else { throw malformed("\(described(next)) where : should be") }
                index += 1
                expecting = .value
            case .separator:
                guard let container = open.last else {
                    guard next == nil else { throw malformed("\(described(next)) after the document's value") }
                    if let repeated { throw .repeatedKey(repeated) }
                    if let misread { throw misread }
                    return
                }
                let closing = container == nil ? UInt8(ascii: "]") : UInt8(ascii: "}")
                switch next {
                case UInt8(ascii: ","):
                    index += 1
                    afterComma = true
                    expecting = container == nil ? .value : .key(first: false)
                case closing:
                    index += 1
                    open.removeLast()
                default:
                    throw malformed("\(described(next)) where , or \(Character(Unicode.Scalar(closing))) should be")
                }
            }
        }
    }

    private var next: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = next, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    private func malformed(_ what: String) -> StrictJSON.Problem { .malformed(what, byte: index + 1) }

    /// A byte as a message names it: printable ASCII as itself, anything else by its value.
    private func described(_ byte: UInt8?) -> String {
        guard let byte else { return "the end" }
        return (0x21...0x7E).contains(byte)
            ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
    }

    private mutating func literal(_ word: StaticString) throws(StrictJSON.Problem) {
        let expected = UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - index >= expected.count, bytes[index..<index + expected.count].elementsEqual(expected)
        else { throw malformed("a word that is not true, false or null") }
        index += expected.count
    }

    /// `-`? then `0` or a digit from 1 and more digits, then `.` and digits, then `e` or `E`, a sign and digits;
    /// `.tooPrecise` or `.outOfPlace` when it would not be read as written. Its significant digits run from the
    /// first digit other than zero to the last.
    private mutating func number() throws(StrictJSON.Problem) -> StrictJSON.Problem? {
        let start = index
        if next == UInt8(ascii: "-") { index += 1 }
        guard let first = next, isDigit(first) else { throw malformed("a number without digits") }
        let integer = index
        index += 1
        if first == UInt8(ascii: "0"), let following = next, isDigit(following) {
            throw malformed("a number with a leading zero")
        }
        skipDigits()
        let integerDigits = integer..<index
        var fractionDigits = index..<index
        if next == UInt8(ascii: ".") {
            index += 1
            guard let digit = next, isDigit(digit) else { throw malformed("a number without digits after its point") }
            let fraction = index
            skipDigits()
            fractionDigits = fraction..<index
        }
        var exponent = 0
        if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
            index += 1
            let negative = next == UInt8(ascii: "-")
            if negative || next == UInt8(ascii: "+") { index += 1 }
            guard let digit = next, isDigit(digit) else { throw malformed("a number without digits in its exponent") }
            // Held short of overflow: past 2^31 it puts a digit out of place in any number of fewer digits.
            while let byte = next, isDigit(byte) {
                exponent = min(exponent * 10 + Int(byte - UInt8(ascii: "0")), Int(Int32.max))
                index += 1
            }
            if negative { exponent.negate() }
        }
        let bytes = bytes
        let significant = { (position: Int) in bytes[position] != UInt8(ascii: "0") }
        // The power of ten a digit stands for.
        let place = { (position: Int) in
            exponent
                + (integerDigits.contains(position)
                    ? integerDigits.upperBound - 1 - position : fractionDigits.lowerBound - 1 - position)
        }
        let highest = (integerDigits.first(where: significant) ?? fractionDigits.first(where: significant)).map(place)
        let lowest = (fractionDigits.last(where: significant) ?? integerDigits.last(where: significant)).map(place)
        guard let highest, let lowest else {
            return StrictJSON.digitPlaces.contains(exponent) ? nil : .outOfPlace(byte: start + 1)
        }
        if highest - lowest + 1 > StrictJSON.maxSignificantDigits { return .tooPrecise(byte: start + 1) }
        return StrictJSON.digitPlaces.contains(highest) && StrictJSON.digitPlaces.contains(lowest)
            ? nil : .outOfPlace(byte: start + 1)
    }

    private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private mutating func skipDigits() {
        while let byte = next, isDigit(byte) { index += 1 }
    }

    /// A string from its opening quote; its text when `keeping` (a key), resolved as the decoder resolves it
    /// (else empty).
    private mutating func string(keeping: Bool) throws(StrictJSON.Problem) -> String {
        let start = index
        index += 1
        var escaped = false
        while true {
            guard let byte = next else { throw malformed("the end inside a string") }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                let text = UnsafeRawBufferPointer(rebasing: bytes[start + 1..<index - 1])
                // Only text beyond ASCII needs checking, and only a key needs making into a String.
                if !text.allSatisfy({ $0 < 0x80 }), String(validating: text, as: UTF8.self) == nil {
                    throw .malformed("a string that is not UTF-8", byte: start + 1)
                }
                guard keeping else { return "" }
                let raw = String(decoding: text, as: UTF8.self)
                guard escaped else { return raw }
                // Escapes checked above, so the decoder reads it; it is the decoder's reading that must be unique.
                let literal = Data(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
                return (try? JSONDecoder().decode(String.self, from: literal)) ?? raw
            case UInt8(ascii: "\\"):
                escaped = true
                try escape()
            case 0x00..<0x20:
                throw malformed("a control character (\(described(byte))) inside a string, where it must be escaped")
            default:
                index += 1
            }
        }
    }

    /// An escape from its backslash: one of `\" \\ \/ \b \f \n \r \t`, or `\u` and four hex digits, where half
    /// of a surrogate pair must come with its other half.
    private mutating func escape() throws(StrictJSON.Problem) {
        index += 1
        guard let byte = next else { throw malformed("the end inside a string") }
        guard byte == UInt8(ascii: "u") else {
            guard Array(#""\/bfnrt"#.utf8).contains(byte) else { throw malformed("an escape \\ that JSON has not") }
            index += 1
            return
        }
        let unit = try hexUnit()
        switch unit {
        case 0xD800...0xDBFF:
            guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw malformed("half of a surrogate pair") }
            index += 1
            guard (0xDC00...0xDFFF).contains(try hexUnit()) else { throw malformed("half of a surrogate pair") }
        case 0xDC00...0xDFFF:
            throw malformed("half of a surrogate pair")
        default:
            break
        }
    }

    /// `u` and the four hex digits after it, read as one UTF-16 code unit.
    private mutating func hexUnit() throws(StrictJSON.Problem) -> UInt16 {
        index += 1
        guard bytes.count - index >= 4,
            let unit = UInt16(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16),
            bytes[index..<index + 4].allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "-") })
        else { throw malformed("\\u without four hex digits") }
        index += 4
        return unit
    }
}
