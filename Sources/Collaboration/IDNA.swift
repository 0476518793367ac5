/// A domain's two spellings (IDNA): each label with letters beyond ASCII is also written in ASCII, `xn--` and
/// the label in Punycode (RFC 3492). As sql/functions/addresses.sql writes them.
public enum IDNA {
    /// `domain` with each label written `xn--…` in the letters it stands for, for people to read; as it is when
    /// one of those is not Punycode.
    public static func inLetters(_ domain: String) -> String {
        unicodeDomain(domain.unicodeScalars[...]) ?? domain
    }

    /// Each label of `domain` with letters beyond ASCII lowered, composed and written `xn--…`, as
    /// `rbac.ascii_domain` writes such a label.
    static func asciiDomain(_ domain: Substring.UnicodeScalarView) -> String {
        domain.split(separator: ".", omittingEmptySubsequences: false).map { label in
            let label = String(label)
            guard !label.unicodeScalars.allSatisfy(\.isASCII) else { return label }
            return "xn--" + encode(Array(label.lowercased().precomposedStringWithCanonicalMapping.unicodeScalars))
        }.joined(separator: ".")
    }

    /// `domain` as UTS 46 maps what people type before IDNA reads it (`rbac.mapped_domain`): compatibility forms
    /// in their plain form (NFKC: `ｂücher．example` is `bücher.example`), the ideographic full stops (U+3002,
    /// U+FF61) as dots, and what UTS 46 ignores, the soft hyphen and the zero-width space, word joiner and
    /// no-break space, dropped. Case is left as written: addresses are compared lowered.
    static func mapped(_ domain: some StringProtocol) -> String {
        guard !domain.utf8.allSatisfy({ $0 < 0x80 }) else { return String(domain) }
        var mapped = String.UnicodeScalarView()
        for scalar in String(domain).precomposedStringWithCompatibilityMapping.unicodeScalars {
            switch scalar {
            case "\u{3002}": mapped.append(".")
            case "\u{AD}", "\u{200B}", "\u{2060}", "\u{FEFF}": continue
            default: mapped.append(scalar)
            }
        }
        return String(mapped)
    }

    /// Each label of `domain` written `xn--…` (in either case) in the letters it stands for
    /// (`rbac.unicode_domain`); nil when one of those is not Punycode, or stands for a label IDNA refuses: one
    /// with hyphens third and fourth (RFC 5891, 4.2.3.1), which in letters would read as written in ASCII, or one
    /// that mapping changes (UTS 46, 4.1), which DNS would know by another name than its letters'.
    static func unicodeDomain(_ domain: Substring.UnicodeScalarView) -> String? {
        var labels: [String] = []
        for label in domain.split(separator: ".", omittingEmptySubsequences: false) {
            guard isASCIISpelling(label) else {
                labels.append(String(label))
                continue
            }
            guard let letters = decode(Array(label.dropFirst(4))),
                !letters.unicodeScalars.dropFirst(2).starts(with: "--".unicodeScalars),
                mapped(letters).unicodeScalars.elementsEqual(letters.unicodeScalars)
            else { return nil }
            labels.append(letters)
        }
        return labels.joined(separator: ".")
    }

    /// Whether `label` starts `xn--`, in either case.
    private static func isASCIISpelling(_ label: Substring.UnicodeScalarView) -> Bool {
        let start = Array(label.prefix(4))
        return start.count == 4 && "xX".unicodeScalars.contains(start[0]) && "nN".unicodeScalars.contains(start[1])
            && start[2] == "-" && start[3] == "-"
    }

    /// Section 6.3's encoding of a label's code points, without the `xn--`.
    private static func encode(_ label: [Unicode.Scalar]) -> String {
        let (base, tmin, tmax) = (36, 1, 26)
        var output = String(String.UnicodeScalarView(label.filter(\.isASCII)))
        let basic = output.unicodeScalars.count
        var handled = basic
        if basic > 0 { output.append("-") }
        var (n, delta, bias) = (128, 0, 72)
        while handled < label.count {
            let next = label.lazy.map { Int($0.value) }.filter { $0 >= n }.min()!
            delta += (next - n) * (handled + 1)
            n = next
            for point in label.lazy.map({ Int($0.value) }) {
                if point < n { delta += 1 }
                guard point == n else { continue }
                var (q, k) = (delta, base)
                while true {
                    let t = min(max(k - bias, tmin), tmax)
                    if q < t { break }
                    output.unicodeScalars.append(digitScalar(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.unicodeScalars.append(digitScalar(q))
                bias = adaptedBias(delta: delta, points: handled + 1, first: handled == basic)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return output
    }

    /// The text `encoded` (a label without its `xn--`) stands for; nil when it is not Punycode, or stands for ASCII
    /// alone, which no label IDNA writes so does.
    private static func decode(_ encoded: [Unicode.Scalar]) -> String? {
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

    /// 0 to 25 are a to z, 26 to 35 are 0 to 9.
    private static func digitScalar(_ digit: Int) -> Unicode.Scalar {
        Unicode.Scalar(UInt8(digit < 26 ? 97 + digit : 22 + digit))
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
