import Collaboration
import Postgres
import TestSupport
import Testing

@Suite("One rule for an email address")
struct EmailAddressRuleTests {
    /// Strings near the rule's edges: shaped like an address or not, now and then holding what the rule turns on
    /// (an `@`, a space of Unicode's, a control character or a bidirectional override), text that composes or does not, combining marks
    /// after an `@` or a dot, and the length limit.
    private func candidates(_ count: Int) -> [String] {
        var generator = SystemRandomNumberGenerator()
        let good = ["a", "Z", "0", ".", "-", "+", "\u{200B}", "é", "e\u{301}", "q\u{301}", "\u{301}", "漢", "🎉"]
        let bad = [
            "@", " ", "\t", "\u{7}", "\u{1B}", "\u{7F}", "\u{85}", "\u{A0}", "\u{2028}", "\u{3000}", "\u{202E}",
            "\u{2066}",
        ]
        func part() -> String {
            (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                (Int.random(in: 0..<10, using: &generator) == 0 ? bad : good).randomElement(using: &generator)!
            }.joined()
        }
        var strings = [
            "a@b.c", "a@b", "a@.c", "@b.c", "a@b.", "a@b.c@d.e", "zoe\u{308}@example.com",
            "a@b.c" + String(repeating: "c", count: 315), "a@b.c" + String(repeating: "c", count: 316),
            // Characters of two code points that do not compose: PostgreSQL counts code points.
            "a@b.c" + String(repeating: "q\u{301}", count: 157), "a@b.c" + String(repeating: "q\u{301}", count: 158),
        ]
        while strings.count < count {
            strings.append(
                Bool.random(using: &generator) ? part() + "@" + part() + "." + part() : part() + part() + part())
        }
        return strings
    }

    @Test("the SQL function and every email column's check take exactly what EmailAddress takes")
    func sqlAgreesWithSwift() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let strings = candidates(2_000)
            let swift = strings.indices.filter { EmailAddress(rawValue: strings[$0]) != nil }.map(Int64.init)
            #expect(swift.count > 100, "the candidates should hold addresses as well as non-addresses")

            var rules = ["rbac.is_email_address(email)"]
            for row in try await pool.query(
                """
                SELECT pg_get_constraintdef(oid) AS rule FROM pg_constraint
                WHERE conname IN ('users_email_check', 'user_identities_email_check', 'invitations_email_check')
                """)
            {
                let definition: String = try row.decode("rule")
                rules.append(String(try #require(definition.wholeMatch(of: /CHECK \((.*)\)/)).output.1))
            }
            #expect(rules.count == 4)
            for rule in rules {
                var bindings = PostgresBindings()
                bindings.append(strings)
                let accepted: [Int64] = try await pool.query(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT coalesce(array_agg(n - 1 ORDER BY n), '{}') AS accepted
                            FROM unnest($1::text[]) WITH ORDINALITY AS candidate(raw, n),
                                 LATERAL normalize(raw, NFC) AS email
                            WHERE \(rule)
                            """, bindings: bindings))[0].decode("accepted")
                for index in Set(swift).symmetricDifference(accepted).sorted().prefix(5) {
                    Issue.record("\(rule) and EmailAddress disagree on \(strings[Int(index)].debugDescription)")
                }
            }
        }
    }
}
