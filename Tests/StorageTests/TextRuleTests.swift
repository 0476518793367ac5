import Collaboration
import Postgres
import TestSupport
import Testing

@Suite("One rule for blank text, control and invisible characters")
struct TextRuleTests {
    @Test(
        """
        rbac.is_blank, rbac.has_control_character and rbac.invisible_characters judge every character as the \
        Swift rules do
        """)
    func sqlAgreesWithSwift() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            // Every code point but NUL, which text cannot hold, and the surrogates, which are no characters.
            let row = try await pool.query(
                """
                SELECT array_agg(i::int8) FILTER (WHERE rbac.is_blank(chr(i))) AS blank,
                       array_agg(i::int8) FILTER (WHERE rbac.has_control_character(chr(i))) AS control,
                       array_agg(i::int8) FILTER (WHERE chr(i) ~ rbac.invisible_characters()) AS invisible
                FROM generate_series(1, 1114111) i WHERE i NOT BETWEEN 55296 AND 57343
                """)[0]
            let scalars = (UInt32(1)...0x10FFFF).compactMap(Unicode.Scalar.init)
            let swiftBlank = Set(scalars.filter { isBlank(String($0)) }.map { Int64($0.value) })
            let swiftControl = Set(scalars.filter { containsControlCharacter(String($0)) }.map { Int64($0.value) })
            let swiftInvisible = Set(
                scalars.filter { containsInvisibleCharacter(String($0)) }.map { Int64($0.value) })
            let blank = Set(try row.decode("blank", as: [Int64].self))
            let control = Set(try row.decode("control", as: [Int64].self))
            let invisible = Set(try row.decode("invisible", as: [Int64].self))
            #expect(blank.count > 4000 && blank.contains(0x200B) && !blank.contains(0x61))
            #expect(
                blank == swiftBlank,
                "SQL alone: \(blank.subtracting(swiftBlank)), Swift alone: \(swiftBlank.subtracting(blank))")
            #expect(
                control == swiftControl,
                "SQL alone: \(control.subtracting(swiftControl)), Swift alone: \(swiftControl.subtracting(control))")
            #expect(invisible.contains(0x200B) && invisible.contains(0xFE0F) && !invisible.contains(0x20))
            #expect(
                invisible == swiftInvisible,
                """
                SQL alone: \(invisible.subtracting(swiftInvisible)), \
                Swift alone: \(swiftInvisible.subtracting(invisible))
                """)

            // Text is blank when every character of it is.
            let texts = ["", " ", "\u{200B}\u{FEFF} \u{3164}", "\u{200B}a", "a\u{2800}", "\u{2800}\u{E0020}"]
            let sql = try await pool.query("SELECT rbac.is_blank(t) AS blank FROM unnest(\(texts)::text[]) t")
            #expect(try sql.map { try $0.decode("blank", as: Bool.self) } == texts.map { isBlank($0) })
            #expect(texts.map { isBlank($0) } == [true, true, true, false, false, true])
        }
    }
}
