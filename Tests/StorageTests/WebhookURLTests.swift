import Collaboration
import Foundation
import Storage
import TestSupport
import Testing

/// The URLs `rbac webhooks add` takes: one the table's check or a delivery would fail on is refused first, with a
/// reason.
@Suite("Webhook URLs")
struct WebhookURLTests {
    static let acceptedURLs = [
        ("https://hooks.example.com/rbac", "https://hooks.example.com/rbac"),
        ("HTTPS://Hooks.Example.com/rbac?Team=A", "https://Hooks.Example.com/rbac?Team=A"),
        ("Https://hooks.example.com:8443/a%20b", "https://hooks.example.com:8443/a%20b"),
        ("https://hooks.example.com:065535/", "https://hooks.example.com:065535/"),
        ("https://hooks.example.com:/", "https://hooks.example.com:/"),
        ("https://[::1]/hooks", "https://[::1]/hooks"),
        ("https://xn--bcher-kva.example/", "https://xn--bcher-kva.example/"),
        ("https://hooks.example.com/users/@me?to=a@b", "https://hooks.example.com/users/@me?to=a@b"),
        ("https://hooks.example.com./a%2e%2E?b=%C3%BC..", "https://hooks.example.com./a%2e%2E?b=%C3%BC.."),
    ]

    @Test(
        "an https URL of printable ASCII is stored with its scheme in lower case, the rest as typed",
        arguments: acceptedURLs)
    func accepted(typed: String, stored: String) throws {
        #expect(try PostgresOutbox.webhookURL(typed) == stored)
    }

    @Test("what is accepted, the table takes as stored: its check is the same rule, for raw SQL too")
    func storable() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            for (_, url) in Self.acceptedURLs {
                try await pool.query("INSERT INTO webhook_endpoints (url, secret_box) VALUES (\(url), '\\x00')")
            }
        }
    }

    @Test(
        "anything else is refused with its reason, never quoting text that may hold a password",
        arguments: [
            ("http://hooks.example.com/", "must be an https URL with a host"),
            ("https://", "must be an https URL with a host"),
            ("https:/hooks.example.com/", "must be an https URL with a host"),
            ("https://hooks.example.com/#top", "no #fragment"),
            ("https://hooks.example.com/#", "no #fragment"),
            ("https://hooks:pa55word@example.com/", "must not carry a user or password"),
            ("https://hooks:pa55word@exa mple.com/", "character 27 is not"),
            ("https://[pa55word/", "this text is not a URL"),
            ("https://hooks.example.com:99999/", "must name a port from 1 to 65535, not 99999"),
            ("https://hooks.example.com:0/", "must name a port from 1 to 65535, not 0"),
            ("https://hooks.example.com:00000/", "must name a port from 1 to 65535, not 00000"),
            (
                "https://hooks.example.com:99999999999999999999/",
                "must name a port from 1 to 65535, not 99999999999999999999"
            ),
            ("https://hooks..example.com/", "must name a host without an empty label"),
            ("https://.example.com:8443/", "must name a host without an empty label"),
            ("https://hooks.example.com../", "must name a host without an empty label"),
            ("https://hooks%2E%2Eexample.com/", "must name its host without % escapes"),
            ("https://hooks.example.com/a%zz", "two hexadecimal digits (%25 for a % itself), and character 28 does"),
            ("https://hooks.example.com/?a=%4", "and character 30 does not"),
            ("https://hooks.example.com/a%", "and character 28 does not"),
            ("https://bücher.example/", "character 10 is not: percent-encode it, or give an international domain"),
            ("https://hooks.example.com/\u{7F}", "character 27 is not"),
            ("https://hooks.example.com/a\u{A0}b", "character 28 is not"),
            // 2,003 characters to the database, though 1,011 to Swift: e and a combining accent are one Character.
            (
                "https://h.example/" + String(repeating: "e\u{301}", count: 992) + "a",
                "at most 2000 characters, not 2003"
            ),
        ])
    func refused(typed: String, reason: String) throws {
        let error = try #require(throws: CollaborationError.self) { try PostgresOutbox.webhookURL(typed) }
        #expect(error.code == .invalidInput)
        #expect(error.message.contains(reason), "\(error.message)")
        #expect(!error.message.contains("pa55word"))
    }
}
