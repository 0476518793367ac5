import Collaboration
import Foundation
import TestSupport
import Testing

@Suite("JSON objects that name a key twice")
struct RepeatedJSONKeysTests {
    static func repeated(_ json: String) -> String? {
        RepeatedJSONKeys.first(in: Array(json.utf8))
    }

    @Test("a key named twice in one object is found as a decoder reads it; alike keys elsewhere are not")
    func scanner() {
        #expect(Self.repeated(#"{"permission":"a","permission":"b"}"#) == "permission")
        #expect(Self.repeated(#"{"permission":"a","\u0070ermission":"b"}"#) == "permission", "escapes resolved")
        #expect(Self.repeated(#"{ "a" : 1 , "b" : {"a": 2, "c": [ {"a":3}, {"a":4, "a":5} ] } }"#) == "a")
        #expect(Self.repeated(#"{"checks":[{"a":1,"b":2},{"a":1,"b":2}],"b":{"b":{"b":1}}}"#) == nil)
        #expect(Self.repeated(#"{"a":"a","b":"a","c":["a","a"],"d":{}}"#) == nil, "values and arrays may repeat")
        #expect(Self.repeated(#"{"a\"{":"}\",\"a\\\"{\":","x":1}"#) == nil, "quotes and braces inside strings")
        #expect(Self.repeated(#"{"a\"{":1,"a\"{":2}"#) == #"a"{"#)
        #expect(Self.repeated(#"{"\\":1,"\u005c":2}"#) == "\\")
        for malformed in [#"{"a":1,"b""#, "}}", #"{"a":"#, "", #"{"\ud800":1,"\ud800":2}"#] {
            #expect(Self.repeated(malformed) == nil, "left to the decoder: \(malformed)")
        }
        let many = (0..<5_000).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
        #expect(Self.repeated("{\(many)}") == nil)
        #expect(Self.repeated("{\(many),\"k4999\":0}") == "k4999")
    }

    @Test("a policy document that names a key twice is refused, naming it, before the database would read it")
    func policy() throws {
        let shipped = try String(
            contentsOf: repositoryRoot.appendingPathComponent("policies/policy.json"), encoding: .utf8)
        // A second viewer who may edit the budget: the database would apply it, this reading the first.
        let twice = shipped.replacingOccurrences(
            of: #""roles": {"#,
            with: #""roles": {"viewer": {"rank": 4, "description": "x", "permissions": ["budget.edit"]},"#)
        #expect(twice != shipped)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("policy-\(UUID()).json")
        try twice.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(throws: CollaborationError(.invalidPolicy, "invalid policy: an object names \"viewer\" twice")) {
            try PolicyDocument.load(from: file)
        }
    }
}
