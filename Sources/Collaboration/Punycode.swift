/// RFC 3492's decoding (section 6.2, with its parameters), as IDNA writes a domain's labels in ASCII (`xn--…`).
/// The same algorithm as `rbac.punycode_decode` (sql/functions/addresses.sql).
enum Punycode {
    /// The text `encoded` (a label without its `xn--`) stands for; nil when it is not Punycode, or stands for ASCII
    /// alone, which no label IDNA writes so does.
    static func decode(_ encoded: [Unicode.Scalar]) -> String? {
        let (base, tmin, tmax) = (36, 1, 26)
        // The code points before the last hyphen are themselves, when there are some; the rest are digits.
        let hyphen = encoded.lastIndex(of: "-") ?? 0
        var output = Array(encoded[..<hyphen])
        var position = hyphen > 0 ? hyphen + 1 : 0
        guard output.allSatisfy(\.isASCII) else { return nil }
        // Past it, no code point can come out: checked before anything can overflow.
        let limit = 0x110000 * (encoded.count + 1)
        var (n, i, bias) = (128, 0, 72)
        while position < encoded.count {
            let start = i
            var (weight, k) = (1, base)
            while true {
                guard position < encoded.count, let digit = digit(encoded[position]) else { return nil }
                position += 1
                i += digit * weight
                guard i < limit else { return nil }
                let t = min(max(k - bias, tmin), tmax)
                if digit < t { break }
                weight *= base - t
                k += base
            }
            bias = adaptedBias(delta: i - start, points: output.count + 1, first: start == 0)
            n += i / (output.count + 1)
            i %= output.count + 1
            guard let scalar = Unicode.Scalar(UInt32(n)) else { return nil }
            output.insert(scalar, at: i)
            i += 1
        }
        guard output.contains(where: { !$0.isASCII }) else { return nil }
        var text = String.UnicodeScalarView()
        text.append(contentsOf: output)
        return String(text)
    }

    /// a to z (or A to Z) are 0 to 25, 0 to 9 are 26 to 35.
    private static func digit(_ scalar: Unicode.Scalar) -> Int? {
        switch scalar {
        case "a"..."z": Int(scalar.value - 97)
        case "A"..."Z": Int(scalar.value - 65)
        case "0"..."9": Int(scalar.value - 22)
        default: nil
        }
    }

    /// Section 6.1: damp 700 after the first code point, 2 after any other; skew 38.
    private static func adaptedBias(delta: Int, points: Int, first: Bool) -> Int {
        var delta = delta / (first ? 700 : 2)
        delta += delta / points
        var k = 0
        while delta > (35 * 26) / 2 {
            delta /= 35
            k += 36
        }
        return k + (36 * delta) / (delta + 38)
    }
}
