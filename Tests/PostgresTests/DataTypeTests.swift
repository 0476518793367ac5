import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Typed values round-trip through a real server")
struct DataTypeTests {
    private func withConnection(_ body: (PostgresConnection) async throws -> Void) async throws {
        try await TestDatabase.withFresh { configuration in
            let connection = try await PostgresConnection.connect(configuration)
            do {
                try await body(connection)
                await connection.close()
            } catch {
                await connection.close()
                throw error
            }
        }
    }

    /// Sends `value`, checks the server sees it equal to `literal`, and checks it decodes back unchanged.
    private func roundTrip<T: PostgresEncodable & PostgresDecodable & Equatable>(
        _ value: T, equals literal: String, type: String, on connection: PostgresConnection
    ) async throws {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT $1::\(type) AS value, $1::\(type) = (\(literal))::\(type) AS same")
                .withBinding(value))
        #expect(try rows[0].decode("same", as: Bool.self), "server saw a different \(type) than \(literal)")
        #expect(try rows[0].decode("value", as: T.self) == value)
    }

    @Test("integers at their extremes")
    func integers() async throws {
        try await withConnection { connection in
            try await roundTrip(Int16.min, equals: "-32768", type: "int2", on: connection)
            try await roundTrip(Int16.max, equals: "32767", type: "int2", on: connection)
            try await roundTrip(Int32.min, equals: "-2147483648", type: "int4", on: connection)
            try await roundTrip(Int32.max, equals: "2147483647", type: "int4", on: connection)
            try await roundTrip(Int64.min, equals: "-9223372036854775808", type: "int8", on: connection)
            try await roundTrip(Int64.max, equals: "9223372036854775807", type: "int8", on: connection)
            try await roundTrip(0, equals: "0", type: "int8", on: connection)
        }
    }

    @Test("an integer decodes from any integer column whose value fits, and from nothing else")
    func integerWidths() async throws {
        try await withConnection { connection in
            let rows = try await connection.query(
                "SELECT 7::int2 AS small, 40000::int8 AS wide, 4000000000::oid AS oid, '7' AS text")
            #expect(try rows[0].decode("small", as: Int64.self) == 7)
            #expect(try rows[0].decode("small", as: Int.self) == 7)
            #expect(try rows[0].decode("wide", as: Int32.self) == 40000)
            #expect(try rows[0].decode("oid", as: Int64.self) == 4_000_000_000)
            let tooWide = #expect(throws: PostgresError.self) { try rows[0].decode("wide", as: Int16.self) }
            #expect(tooWide?.message.contains("does not fit in Int16") == true)
            let oidTooWide = #expect(throws: PostgresError.self) { try rows[0].decode("oid", as: Int32.self) }
            #expect(oidTooWide?.message.contains("does not fit in Int32") == true)
            let text = #expect(throws: PostgresError.self) { try rows[0].decode("text", as: Int.self) }
            #expect(text?.message.contains("cannot be decoded as Int") == true)
        }
    }

    @Test("numeric is exact: 20 digits, tiny fractions, negatives")
    func numeric() async throws {
        try await withConnection { connection in
            for text in [
                "12345678901234567890", "-99999999999999999999", "1234567890.1234567890", "0.00000000000000000001",
                "-0.5", "0", "100.00", "0.01", "10000", "123456789012.34", "-9999999999.99",
                "12345678901234567890123456789012345678", "0.00000000000000000000000000000000000001",
            ] {
                let value = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
                try await roundTrip(value, equals: "'\(text)'", type: "numeric", on: connection)
            }
        }
    }

    @Test("numeric keeps its scale digits when read")
    func numericScale() async throws {
        try await withConnection { connection in
            let rows = try await connection.query(
                "SELECT 1234.50::numeric(12,2) AS a, 0.0001::numeric AS b, 10000::numeric AS c")
            #expect(try rows[0].decode("a", as: Decimal.self) == Decimal(string: "1234.5"))
            #expect(try rows[0].decode("b", as: Decimal.self) == Decimal(string: "0.0001"))
            #expect(try rows[0].decode("c", as: Decimal.self) == 10000)
        }
    }

    @Test("numeric reads exactly as hundredths; finer digits and overflow are errors")
    func hundredths() async throws {
        try await withConnection { connection in
            let cases: [(String, Int64)] = [
                ("0", 0), ("0.01", 1), ("-12.34", -1234), ("1.5", 150), ("100", 10000),
                ("9999999999.99", 999_999_999_999),
                ("10000.01", 1_000_001), ("92233720368547758.07", .max), ("-92233720368547758.07", -.max),
            ]
            for (text, expected) in cases {
                let rows = try await connection.query(PostgresQuery(unsafeSQL: "SELECT '\(text)'::numeric AS value"))
                #expect(try rows[0].decode("value", as: Hundredths.self).value == expected, "\(text)")
            }
            for text in ["0.001", "1.2345", "10000.0001", "92233720368547758.08", "1e30", "NaN"] {
                let rows = try await connection.query(PostgresQuery(unsafeSQL: "SELECT '\(text)'::numeric AS value"))
                #expect(throws: PostgresError.self, "\(text)") { try rows[0].decode("value", as: Hundredths.self) }
            }
        }
    }

    @Test("numeric beyond Decimal's range is an error, not a rounded or zeroed value")
    func numericOutOfRange() async throws {
        try await withConnection { connection in
            let rows = try await connection.query("SELECT 1e200::numeric AS huge, 1e-200::numeric AS tiny")
            for column in ["huge", "tiny"] {
                #expect(throws: PostgresError.self) { try rows[0].decode(column, as: Decimal.self) }
            }
        }
    }

    @Test("text keeps unicode and SQL metacharacters")
    func text() async throws {
        try await withConnection { connection in
            for value in [
                "", "plain", "O'Brien \"quoted\" \\ back", "💍 Hochzeit – 結婚式 – e\u{301}", "'); drop table users; --",
            ] {
                let literal = "'" + value.replacingOccurrences(of: "'", with: "''") + "'"
                try await roundTrip(value, equals: literal, type: "text", on: connection)
            }
        }
    }

    @Test("uuid, bool and bytea")
    func uuidBoolBytea() async throws {
        try await withConnection { connection in
            let id = UUID(uuidString: "0f8fad5b-d9cb-469f-a165-70867728950e")!
            try await roundTrip(id, equals: "'0f8fad5b-d9cb-469f-a165-70867728950e'", type: "uuid", on: connection)
            try await roundTrip(true, equals: "true", type: "bool", on: connection)
            try await roundTrip(false, equals: "false", type: "bool", on: connection)
            try await roundTrip(Data([0, 1, 0xfe, 0xff]), equals: "'\\x0001feff'", type: "bytea", on: connection)
        }
    }

    @Test("timestamptz far in the past and the future, and with microseconds")
    func timestamps() async throws {
        try await withConnection { connection in
            // Seconds since 1970 in the proleptic Gregorian calendar, which PostgreSQL uses for every year.
            let cases: [(TimeInterval, String)] = [
                (-62_135_596_800, "'0001-01-01 00:00:00+00'"),
                (-2_208_988_801, "'1899-12-31 23:59:59+00'"),
                (946_684_800, "'2000-01-01 00:00:00+00'"),
                (1_795_343_400, "'2026-11-22 11:30:00+01'"),
                (253_402_300_799, "'9999-12-31 23:59:59+00'"),
            ]
            for (seconds, literal) in cases {
                try await roundTrip(
                    Date(timeIntervalSince1970: seconds), equals: literal, type: "timestamptz", on: connection)
            }
            let precise = Date(timeIntervalSince1970: 1_700_000_000.123456)
            let rows = try await connection.query(
                "SELECT \(precise) AS t, extract(microseconds FROM \(precise)) AS micros")
            let back = try rows[0].decode("t", as: Date.self)
            #expect(abs(back.timeIntervalSince1970 - precise.timeIntervalSince1970) < 0.000_001)
            #expect(try rows[0].decode("micros", as: Decimal.self) == Decimal(string: "20123456"))
        }
    }

    @Test("jsonb, text[], uuid[], int8[] and bytea[]")
    func jsonAndArrays() async throws {
        try await withConnection { connection in
            let json = try PostgresJSON(encoding: ["name": "Zoë 💐", "quote": "'\"{}"])
            let rows = try await connection.query("SELECT \(json) AS doc, (\(json))->>'name' AS name")
            #expect(
                try rows[0].decode("doc", as: PostgresJSON.self).decode(as: [String: String].self)["quote"] == "'\"{}")
            #expect(try rows[0].decode("name", as: String.self) == "Zoë 💐")

            let texts = ["a", "", "with space", "comma,brace{}", "quote\"back\\slash", "NULL", "日本"]
            try await roundTrip(
                texts, equals: "ARRAY['a','','with space','comma,brace{}','quote\"back\\slash','NULL','日本']",
                type: "text[]", on: connection)
            try await roundTrip([String](), equals: "'{}'", type: "text[]", on: connection)
            let ids = [UUID(), UUID()]
            try await roundTrip(
                ids, equals: "ARRAY['\(ids[0].uuidString)','\(ids[1].uuidString)']", type: "uuid[]", on: connection)
            try await roundTrip(
                [Int64.min, -1, 0, Int64.max], equals: "ARRAY[-9223372036854775808,-1,0,9223372036854775807]",
                type: "int8[]", on: connection)
            try await roundTrip(
                [Data([0, 255, 39]), Data()], equals: #"ARRAY['\x00ff27','']::bytea[]"#, type: "bytea[]",
                on: connection)
        }
    }

    @Test("NULL decodes as nil into an optional, and is an error otherwise, naming the column")
    func nulls() async throws {
        try await withConnection { connection in
            let missing: String? = nil
            let rows = try await connection.query("SELECT \(missing) AS nothing, NULL::uuid AS no_id, 5 AS five")
            #expect(try rows[0].decode("nothing", as: String?.self) == nil)
            #expect(try rows[0].decode("no_id", as: UUID?.self) == nil)
            #expect(try rows[0].decode("five", as: Int32?.self) == 5)
            let error = #expect(throws: PostgresError.self) { try rows[0].decode("no_id", as: UUID.self) }
            #expect(error?.kind == .decoding)
            #expect(error?.description.contains("no_id") == true)
        }
    }

    @Test("a type mismatch names the column and both types")
    func mismatch() async throws {
        try await withConnection { connection in
            let rows = try await connection.query("SELECT 42 AS answer")
            let error = #expect(throws: PostgresError.self) { try rows[0].decode("answer", as: String.self) }
            #expect(error?.description.contains("\"answer\"") == true)
            #expect(error?.description.contains("int4") == true)
            #expect(error?.description.contains("String") == true)
            #expect(throws: PostgresError.self) { try rows[0].decode("missing_column", as: Int.self) }
        }
    }
}

extension PostgresQuery {
    /// A query whose single `$1` parameter is `value` (tests only: they build the cast text themselves).
    fileprivate func withBinding<T: PostgresEncodable>(_ value: T) -> PostgresQuery {
        var bindings = PostgresBindings()
        bindings.append(value)
        return PostgresQuery(unsafeSQL: sql, bindings: bindings)
    }
}
