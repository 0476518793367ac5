import Collaboration
import Foundation
import TestSupport
import Testing

/// The checker the answers, webhook and `--json` tests hold output to: it must refuse what a schema refuses, or
/// those tests could not fail.
@Suite("Schema checker")
struct SchemaCheckerTests {
    let checker = SchemaChecker(document: .object([:]))

    func problems(_ value: JSONValue, _ schema: [String: JSONValue]) -> [String] {
        checker.problems(value, .object(schema), at: "v")
    }

    func text(_ text: String) -> JSONValue { .string(text) }

    @Test("dates and times as RFC 3339 writes them, whole; nothing before or after")
    func dates() {
        let dateTime = ["format": text("date-time")]
        for good in ["2026-12-11T03:30:45Z", "2026-12-11T03:30:45.04485+00:00"] {
            #expect(problems(text(good), dateTime).isEmpty, "\(good)")
        }
        for bad in ["2026-12-11 03:30:45Z", "2026-13-11T03:30:45Z", "2026-12-11T03:30:45Z\n", "x2026-12-11T03:30:45Z"] {
            #expect(problems(text(bad), dateTime).count == 1, "\(bad)")
        }
        #expect(problems(text("2026-12-11"), ["format": text("date")]).isEmpty)
        #expect(problems(text("2026-12-11\n"), ["format": text("date")]).count == 1)
    }

    @Test("a pattern matches anywhere, as JSON Schema reads it, and its \\u escapes are read")
    func patterns() {
        let printable = ["pattern": text(#"^[^\u0000-\u001f]*$"#)]
        #expect(problems(text("abc"), ["pattern": text("b")]).isEmpty)
        #expect(problems(text("abc"), printable).isEmpty)
        #expect(problems(text("a\u{1}c"), printable).count == 1)
    }

    @Test("required keys, keys not listed, oneOf, and keywords the checker does not read are problems")
    func objects() {
        let schema: [String: JSONValue] = [
            "type": text("object"), "required": .array([text("id")]),
            "properties": .object(["id": .object(["type": text("string")])]), "additionalProperties": .bool(false),
        ]
        #expect(problems(.object(["id": text("x")]), schema).isEmpty)
        #expect(problems(.object([:]), schema) == ["v: lacks id"])
        #expect(
            problems(.object(["id": text("x"), "other": .null]), schema)
                == ["v: holds other, which the schema does not list"])
        let either = ["oneOf": JSONValue.array([.object(["type": text("string")]), .object(["type": text("null")])])]
        #expect(problems(text("x"), either).isEmpty)
        #expect(!problems(.bool(true), either).isEmpty)
        #expect(problems(text("x"), ["contains": .object([:])]).count == 1)
    }
}
