import Collaboration
import Postgres
import TestSupport
import Testing

@Suite("One rule for an email address")
struct EmailAddressRuleTests {
    /// Strings near the rule's edges: shaped like an address or not, now and then holding what the rule turns on
    /// (an `@`, a space of Unicode's, a control character, a bidirectional override, a character drawn as nothing,
    /// what needs quotes, dots side by side or at an end), text that composes or does not, combining marks after an
    /// `@` or a dot, the length limit, what IDNA maps, and labels written `xn--…`: Punycode or not, for letters or
    /// for ASCII alone.
    private func candidates(_ count: Int) -> [String] {
        var generator = SystemRandomNumberGenerator()
        let good = [
            "a", "Z", "0", ".", "-", "+", "\u{200B}", "é", "e\u{301}", "q\u{301}", "\u{301}", "漢", "🎉", "xn--",
            "XN--", "xn--bcher-kva", "xn--ab-8ya", "xn--egbpdaj6bu4bxfgehfvwxn", "xn--zz", "xn--abc-", "xn--a",
            // What IDNA maps: compatibility forms (one of them to an @), other full stops, ignored characters; and
            // labels written xn--… for what it maps.
            "\u{FF42}", "\u{FF2E}", "\u{FB01}", "\u{2460}", "\u{FF20}", "\u{2024}", "\u{FF0E}", "\u{3002}",
            "\u{FF61}", "\u{AD}", "\u{2060}", "\u{FEFF}", "xn--cher-zra77610b", "xn--bcher-kva0835f",
        ]
        let bad = [
            "@", " ", "\t", "\u{7}", "\u{1B}", "\u{7F}", "\u{85}", "\u{A0}", "\u{2028}", "\u{3000}", "\u{202E}",
            "\u{2066}",
            // Drawn as nothing, and not ignored by IDNA: a joiner, a direction mark, a variation selector.
            "\u{200D}", "\u{200E}", "\u{FE0F}",
            // What mail reads only in quotes or a bracketed domain, and a dot next to another.
            "\"", "(", ",", ":", "<", ">", "[", "\\", "]", "..",
        ]
        func part() -> String {
            (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                (Int.random(in: 0..<10, using: &generator) == 0 ? bad : good).randomElement(using: &generator)!
            }.joined()
        }
        var strings = [
            "a@b.c", "a@b", "a@.c", "@b.c", "a@b.", "a@b.c@d.e", ".a@b.c", "a.@b.c", "a@b..c", "a@b.c.", "a@[1.2.3.4]",
            "zoe\u{308}@example.com",
            "a@b.c" + String(repeating: "c", count: 315), "a@b.c" + String(repeating: "c", count: 316),
            // Characters of two code points that do not compose: PostgreSQL counts code points.
            "a@b.c" + String(repeating: "q\u{301}", count: 157), "a@b.c" + String(repeating: "q\u{301}", count: 158),
            "ann@xn--bcher-kva.example", "Ann@XN--BCHER-KVA.Example", "xn--bcher-kva@example.com",
            "ann@\u{FF42}\u{FC}cher\u{3002}example", "\u{FF41}nn@example.com",
            "a@xn--ab-8ya.c", "a@xn--zz.c", "a@xn--abc-.c", "a@b.c@xn--bcher-kva.d",
            // Addresses as mail programs and links copy them.
            "Pia <pia@example.com>", "<pia@example.com>", "\"Pia, P.\" <pia@example.com>", "Pia <pia@exa mple.com>",
            "<a@b.c> <d@e.f>", "Pia <pia@example.com", "mailto:pia@example.com", "MailTo:a\u{200B}@b.c", "mailto:",
        ]
        while strings.count < count {
            let candidate =
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: part() + "@" + part() + "." + part()
                // Parts between letters: what they hold, not where they stand, decides.
                case 1: "a" + part() + "a@a" + part() + "a.a" + part() + "a"
                default: part() + part() + part()
                }
            strings.append(candidate)
        }
        return strings
    }

    @Test(
        """
        rbac.stored_email writes text as EmailAddress does, rbac.email_refusal gives its reasons, and each email \
        column takes text only so written
        """)
    func sqlAgreesWithSwift() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let strings = candidates(2_000)
            let swift = strings.map { EmailAddress(rawValue: $0).map { Array($0.rawValue.utf8) } }
            // Why Swift refuses each, as the end of its message: `"…" is not an email address: <reason>`.
            let swiftRefusals = strings.map { text -> String? in
                do throws(CollaborationError) {
                    _ = try EmailAddress(validating: text)
                    return nil
                } catch {
                    return error.message
                }
            }
            // About 270 of the 2,000 are addresses (252 to 293 in a dozen runs); the bound sits far enough below that
            // to hold on any run.
            #expect(swift.count { $0 != nil } > 150, "the candidates should hold addresses as well as non-addresses")
            #expect(
                strings.indices.contains { swift[$0] != nil && swift[$0] != Array(strings[$0].utf8) },
                "and addresses that are stored written otherwise")

            // Each table's checks on its email column, as one condition.
            var columns: [String: [String]] = [:]
            for row in try await pool.query(
                """
                SELECT conrelid::regclass::text AS "table", pg_get_constraintdef(oid) AS rule FROM pg_constraint
                WHERE conrelid IN ('users'::regclass, 'user_identities'::regclass, 'invitations'::regclass)
                  AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%email%'
                """)
            {
                let definition: String = try row.decode("rule")
                let rule = String(try #require(definition.wholeMatch(of: /CHECK \((.*)\)/)).output.1)
                columns[try row.decode("table"), default: []].append("coalesce(\(rule), true)")
            }
            #expect(columns.count == 3 && columns.values.allSatisfy { $0.count == 6 })
            let takes = columns.sorted { $0.key < $1.key }.map { $0.value.joined(separator: " AND ") }

            var bindings = PostgresBindings()
            bindings.append(strings)
            let rows = try await pool.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT rbac.stored_email(email) AS stored, rbac.stored_email(email) IS NOT DISTINCT FROM email
                               AS as_stored, rbac.email_refusal(email) AS refusal,
                               \(takes.enumerated().map { "\($1) AS takes\($0)" }.joined(separator: ", "))
                        FROM unnest($1::text[]) WITH ORDINALITY AS candidate(email, n) ORDER BY n
                        """, bindings: bindings))
            var disagreements = 0
            for (index, row) in rows.enumerated() {
                let stored: String? = try row.decode("stored")
                let asStored: Bool = try row.decode("as_stored")
                let refusal: String? = try row.decode("refusal")
                let taken = try takes.indices.map { try row.decode("takes\($0)", as: Bool.self) }
                let sameRefusal =
                    switch (refusal, swiftRefusals[index]) {
                    case (nil, nil): true
                    case (let reason?, let message?): message.hasSuffix("is not an email address: \(reason)")
                    default: false
                    }
                if stored.map({ Array($0.utf8) }) != swift[index] || taken.contains(where: { $0 != asStored })
                    || !sameRefusal
                {
                    disagreements += 1
                    if disagreements <= 5 {
                        let swiftStored = EmailAddress(rawValue: strings[index])?.rawValue
                        Issue.record(
                            """
                            \(strings[index].debugDescription): stored \(stored.debugDescription), \
                            Swift \(swiftStored.debugDescription), columns take it: \(taken), refused by SQL \
                            for \(refusal.debugDescription), by Swift: \(swiftRefusals[index].debugDescription)
                            """)
                    }
                }
            }
            #expect(rows.count == strings.count && disagreements == 0)
        }
    }
}
