import Hummingbird

extension PermissionAPIController.CheckRequest {
    /// The body of `POST /v1/check` read straight from its bytes, in the shape backends send: one flat object of
    /// the four known keys, each at most once, whose values are ASCII strings without escapes, whole numbers or
    /// null, with any JSON whitespace between. Nil for any other body, which is then left to JSONDecoder: what this
    /// accepts, JSONDecoder reads as the same request (CheckRequestScannerTests compare the two). Every check pays
    /// for reading its body: JSONDecoder takes about 2 µs, this about 0.2 µs.
    init?(scanning buffer: ByteBuffer) {
        let scanned = buffer.withUnsafeReadableBytes { bytes in
            var scanner = CheckRequestScanner(bytes: bytes)
            return try? scanner.checkRequest()
        }
        guard let scanned else { return nil }
        self = scanned
    }
}

/// Reads a check request's flat JSON object; every method throws at the first byte outside the subset.
private struct CheckRequestScanner {
    struct OutsideSubset: Error {}

    let bytes: UnsafeRawBufferPointer
    var index = 0

    mutating func checkRequest() throws(OutsideSubset) -> PermissionAPIController.CheckRequest {
        var couple: String?
        var user: String?
        var permission: String?
        var minRevision: Int64?
        var sawMinRevision = false
        try expect(UInt8(ascii: "{"))
        repeat {
            let key = try string()
            try expect(UInt8(ascii: ":"))
            switch key {
            case "couple_id" where couple == nil: couple = try string()
            case "user_id" where user == nil: user = try string()
            case "permission" where permission == nil: permission = try string()
            case "min_revision" where !sawMinRevision:
                minRevision = try nullOrInteger()
                sawMinRevision = true
            default: throw OutsideSubset()
            }
        } while skip(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
        skipWhitespace()
        guard index == bytes.count, let couple, let user, let permission else { throw OutsideSubset() }
        return .init(coupleID: couple, userID: user, permission: permission, minRevision: minRevision)
    }

    /// Skips whitespace, then `byte` if it is next.
    private mutating func skip(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func expect(_ byte: UInt8) throws(OutsideSubset) {
        guard skip(byte) else { throw OutsideSubset() }
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): index += 1
            default: return
            }
        }
    }

    /// A string of printable ASCII without escapes.
    private mutating func string() throws(OutsideSubset) -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") {
                return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index - 1]), as: UTF8.self)
            }
            guard (0x20..<0x7F).contains(byte), byte != UInt8(ascii: "\\") else { throw OutsideSubset() }
        }
        throw OutsideSubset()
    }

    /// `null` as nil, or an integer that fits in Int64; fractions, exponents and leading zeros are outside.
    private mutating func nullOrInteger() throws(OutsideSubset) -> Int64? {
        skipWhitespace()
        let rest = UnsafeRawBufferPointer(rebasing: bytes[index...])
        if rest.starts(with: "null".utf8) {
            index += 4
            return nil
        }
        let sign = rest.first == UInt8(ascii: "-") ? 1 : 0
        var end = sign
        while end < rest.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(rest[end]) { end += 1 }
        let digits = end - sign
        guard digits == 1 || (digits > 1 && rest[sign] != UInt8(ascii: "0")),
            end == rest.count || ![UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(rest[end]),
            let value = Int64(String(decoding: UnsafeRawBufferPointer(rebasing: rest[..<end]), as: UTF8.self))
        else { throw OutsideSubset() }
        index += end
        return value
    }
}
