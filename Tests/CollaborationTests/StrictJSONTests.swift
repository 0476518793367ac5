import Collaboration
import Foundation
import TestSupport
import Testing

@Suite("Strict JSON: what RFC 8259 and I-JSON take, and no more")
struct StrictJSONTests {
    static func problem(_ json: String) -> StrictJSON.Problem? {
        StrictJSON.problem(in: Array(json.utf8))
    }

    static func repeated(_ json: String) -> String? {
        guard case .repeatedKey(let key) = problem(json) else { return nil }
        return key
    }

    @Test("a key named twice in one object is found as a decoder reads it; alike keys elsewhere are not")
    func repeatedKeys() {
        #expect(Self.repeated(#"{"permission":"a","permission":"b"}"#) == "permission")
        #expect(Self.repeated(#"{"permission":"a","\u0070ermission":"b"}"#) == "permission", "escapes resolved")
        #expect(Self.repeated(#"{ "a" : 1 , "b" : {"a": 2, "c": [ {"a":3}, {"a":4, "a":5} ] } }"#) == "a")
        #expect(Self.problem(#"{"checks":[{"a":1,"b":2},{"a":1,"b":2}],"b":{"b":{"b":1}}}"#) == nil)
        #expect(Self.problem(#"{"a":"a","b":"a","c":["a","a"],"d":{}}"#) == nil, "values and arrays may repeat")
        #expect(Self.problem(#"{"a\"{":"}\",\"a\\\"{\":","x":1}"#) == nil, "quotes and braces inside strings")
        #expect(Self.repeated(#"{"a\"{":1,"a\"{":2}"#) == #"a"{"#)
        #expect(Self.repeated(#"{"\\":1,"\u005c":2}"#) == "\\")
        #expect(Self.repeated(#"{"a":1,"a":2,"b":{"c":1,"c":2}}"#) == "a", "the first of several")
        #expect(
            Self.problem(#"{"a":1,"a":2,}"#) == .malformed("a comma before }", byte: 14),
            "what is no JSON is named before a repeated key")
        #expect(Self.repeated(#"{"\ud83d\ude00\n\t\/":1,"😀\u000a\u0009/":2}"#) == "😀\n\t/", "pairs and escapes")
        // Swift's strings compare canonically equivalent text as equal, and so do the decoder's keys.
        #expect(Self.repeated(#"{"é":1,"e\u0301":2}"#) == "é")
        let many = (0..<5_000).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
        #expect(Self.problem("{\(many)}") == nil)
        #expect(Self.repeated("{\(many),\"k4999\":0}") == "k4999")
    }

    @Test("what Foundation's readers take beyond JSON is refused, saying what and where")
    func malformed() {
        for (json, what, byte) in [
            (#"{"a":1,}"#, "a comma before }", 8), (#"[1,2,]"#, "a comma before ]", 6),
            (#"{"a":[1,]}"#, "a comma before ]", 9), (#"{"n":01}"#, "a number with a leading zero", 7),
            (#"{"n":1.}"#, "a number without digits after its point", 8), (#"{"n":-}"#, "a number without digits", 7),
            (#"{"n":1e}"#, "a number without digits in its exponent", 8),
            (#"{"n":+1}"#, "'+' where a value should be", 6),
            (#"{"n":.5}"#, "'.' where a value should be", 6), (#"{"n":NaN}"#, "'N' where a value should be", 6),
            (#"{"n":tru}"#, "a word that is not true, false or null", 6),
            (#"{'a':1}"#, "''' where a key (a string in double quotes) should be", 2),
            (#"{a:1}"#, "'a' where a key (a string in double quotes) should be", 2),
            (#"{"a" 1}"#, "'1' where : should be", 6),
            (#"{"a":1 "b":2}"#, #"'"' where , or } should be"#, 8), (#"{"a":1}x"#, "'x' after the document's value", 8),
            (#"{"a":1} {}"#, "'{' after the document's value", 9),
            ("{\"a\":\"x\ty\"}", "a control character (byte 0x9) inside a string, where it must be escaped", 8),
            (#"{"a":"\x"}"#, "an escape \\ that JSON has not", 8), (#"{"a":"\u12"}"#, "\\u without four hex digits", 9),
            (#"{"a":"\u+123"}"#, "\\u without four hex digits", 9),
            (#"{"a":"\ud800"}"#, "half of a surrogate pair", 13),
            (#"{"a":"\udc00"}"#, "half of a surrogate pair", 13),
            (#"{"a":"\ud800\u0041"}"#, "half of a surrogate pair", 19),
            (#"{"a":"x"#, "the end inside a string", 8), (#"{"a":"#, "the end where a value should be", 6),
            (#"{"a":1,"#, "the end where a key should be", 8), ("", "the end where a value should be", 1),
            ("  ", "the end where a value should be", 3), (#"{"a":1/**/}"#, "'/' where , or } should be", 7),
        ] {
            #expect(Self.problem(json) == .malformed(what, byte: byte), "\(json)")
        }
        #expect(
            StrictJSON.problem(in: [0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == .malformed("a byte order mark", byte: 1))
        #expect(
            StrictJSON.problem(in: Array(#"{"a":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8))
                == .malformed("a string that is not UTF-8", byte: 6))
        #expect(Self.problem(#"{"a":1}"#)?.description == nil)
        #expect(Self.problem(#"{"a":1,}"#)?.description == "is not JSON: a comma before } at byte 8")
    }

    @Test("JSON of every kind is taken, as deep as Foundation reads it")
    func wellFormed() {
        for json in [
            #"{}"#, #"[]"#, #" { } "#, #"[ ]"#, "\t\r\n[\n1\n]\n", #"0"#, #"-0"#, #"-0.0e-0"#, #"1E+2"#,
            #"123.456e78"#,
            #""""#, #""\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00""#, #"true"#, #"false"#, #"null"#,
            #"{"a":[{},[],"",0,true]}"#,
            #""é😀""#, #"[[[[]]]]"#, #"{"a":{"a":{"a":1}}}"#,
        ] {
            #expect(Self.problem(json) == nil, "\(json)")
        }
        let deepest =
            String(repeating: "[", count: StrictJSON.maxDepth) + String(repeating: "]", count: StrictJSON.maxDepth)
        #expect(Self.problem(deepest) == nil)
        #expect((try? JSONSerialization.jsonObject(with: Data(deepest.utf8))) != nil, "Foundation reads it too")
        let deeper = "{\"a\":" + deepest + "}"
        #expect(Self.problem(deeper) == .malformed("containers nested deeper than 512", byte: 517))
        #expect((try? JSONSerialization.jsonObject(with: Data(deeper.utf8))) == nil, "as Foundation refuses it")
        let endless = String(repeating: "[", count: 60_000)
        #expect(Self.problem(endless) == .malformed("containers nested deeper than 512", byte: 513))
    }

    @Test("a number of more significant digits than Foundation's Decimal keeps is refused, as it would be read rounded")
    func precision() throws {
        let zeros = { (count: Int) in String(repeating: "0", count: count) }
        // 38 significant digits: read as written. Zeros before the first or after the last do not count.
        for json in [
            "5." + zeros(36) + "1", "-12345678901234567890123456789012345678e-40", "0." + zeros(60) + "25",
            "12.34" + zeros(60), "1" + zeros(60), "[1." + zeros(36) + "1, 2]",
        ] {
            #expect(Self.problem(json) == nil, "\(json)")
            if !json.hasPrefix("[") {
                let read = try JSONDecoder().decode(Decimal.self, from: Data(json.utf8))
                #expect(read == Decimal(string: json), "Foundation reads \(json) as written: \(read)")
            }
        }
        // One more, and Foundation cuts it off: 5.000…001 would be 5, whole cents.
        let fiveAndABit = "5." + zeros(37) + "1"
        #expect(try JSONDecoder().decode(Decimal.self, from: Data(fiveAndABit.utf8)) == 5)
        for (json, byte) in [
            (fiveAndABit, 1), (#"{"a":1,"b":-123456789012345678901234567890123456789}"#, 12),
            ("[1.5," + "1" + zeros(20) + "." + zeros(17) + "1e5]", 6),
        ] {
            #expect(Self.problem(json) == .tooPrecise(byte: byte), "\(json)")
        }
        #expect(
            Self.problem("[" + fiveAndABit + ",]") == .malformed("a comma before ]", byte: 43),
            "what is no JSON at all is named first")
        #expect(
            Self.problem(fiveAndABit)?.description
                == "holds a number of more than 38 significant digits at byte 1, which would be read rounded")
    }

    @Test("a number with a digit out of the places Foundation reads as written is refused")
    func places() throws {
        let zeros = { (count: Int) in String(repeating: "0", count: count) }
        // Its digits from 1e127 down to 1e-128, a zero's exponent among them: read as written.
        for json in [
            "1e127", "-9.9e127", "99e126", "1e-128", "-2.5e-127", "0." + zeros(127) + "1", "1" + zeros(127),
            "0e-128", "0e127", "1e+0000000000000000000000000000000000000001", "4" + zeros(100) + "e-100",
        ] {
            #expect(Self.problem(json) == nil, "\(json)")
            if !json.hasPrefix("0e") {
                let read = try JSONDecoder().decode(Decimal.self, from: Data(json.utf8))
                #expect(read == Decimal(string: json), "Foundation reads \(json) as \(read)")
            }
            #expect((try? JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed)) != nil)
        }
        // Past them Foundation reads another number or none: a whole number from 1e-400 is 0.
        #expect(try JSONDecoder().decode(Int.self, from: Data("1e-400".utf8)) == 0)
        for (json, byte) in [
            ("1e128", 1), ("12e127", 1), ("1.5e-128", 1), ("1e-129", 1), ("1e-400", 1), ("1" + zeros(128), 1),
            ("0." + zeros(128) + "1", 1), ("0e128", 1), ("0.0e-99999999999999999999999999", 1),
            (#"{"a":1,"b":-1e99999999999999999999}"#, 12), ("[1.5e-10,0E+128]", 10),
        ] {
            #expect(Self.problem(json) == .outOfPlace(byte: byte), "\(json)")
        }
        #expect(Self.problem("[1e400,]") == .malformed("a comma before ]", byte: 8), "no JSON at all is named first")
        #expect(
            Self.problem("[1e400," + "1" + zeros(39) + "]") == .outOfPlace(byte: 2), "the first number misread")
        #expect(
            Self.problem("1e400")?.description
                == "holds a number with a digit out of the places 1e-128 to 1e127 at byte 1, "
                + "which would not be read as written")
    }

    @Test("a policy document that is not strict JSON is refused, saying why, before the database would read it")
    func policy() throws {
        let shipped = try String(
            contentsOf: repositoryRoot.appendingPathComponent("policies/policy.json"), encoding: .utf8)
        // A second viewer who may edit the budget: the database would apply it, this reading the first.
        let twice = shipped.replacingOccurrences(
            of: #""roles": {"#,
            with: #""roles": {"viewer": {"rank": 4, "description": "x", "permissions": ["budget.edit"]},"#)
        // A trailing comma, which Foundation reads and the database refuses.
        let trailing = shipped.replacingOccurrences(of: "\n  }\n}", with: "\n  },\n}")
        #expect(twice != shipped && trailing != shipped && trailing.contains("},\n}"))
        for (document, message) in [
            (twice, "invalid policy: policy.json names \"viewer\" more than once in one object"),
            (trailing, "invalid policy: policy.json is not JSON: a comma before }"),
        ] {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("policy-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("policy.json")
            try document.write(to: file, atomically: true, encoding: .utf8)
            #expect {
                try PolicyDocument.load(from: file)
            } throws: {
                ($0 as? CollaborationError)?.code == .invalidPolicy
                    && ($0 as? CollaborationError)?.message.hasPrefix(message) == true
            }
        }
    }
}
