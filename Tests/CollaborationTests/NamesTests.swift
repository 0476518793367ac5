import Foundation
import Testing

@testable import Collaboration

/// Why an address holding a character drawn as nothing is none.
private let invisible = "it holds an invisible character (a zero-width space or joiner, a direction mark, ...)"
/// Why an address that mail would read only in quotes or brackets is none.
private let quotedOnly = "it holds one of \" ( ) , : ; < > [ \\ ] (rbac takes no quoted name or bracketed domain)"
/// Why an address with a dot out of place is none.
private let dots = "a dot cannot begin or end its name or its domain, nor follow another dot"

@Suite("Names people type")
struct NamesTests {
    @Test(
        "role names, permissions and emails are checked for shape",
        arguments: ["owner", "wedding_planner", String(repeating: "a", count: 63)])
    func validRoles(name: String) {
        #expect(RoleName(rawValue: name) != nil)
    }

    @Test(
        "malformed role names are refused",
        arguments: [
            "", "Owner", "own er", "owner;", "'); drop table roles; --", "1st", "_owner", "ówner",
            String(repeating: "a", count: 64),
        ])
    func invalidRoles(name: String) {
        #expect(RoleName(rawValue: name) == nil)
        #expect(throws: CollaborationError.self) { try RoleName(validating: name) }
    }

    @Test("permissions are area.action")
    func permissions() {
        #expect(Permission(rawValue: "budget.edit") != nil)
        #expect(Permission(rawValue: "budget") == nil)
        #expect(Permission(rawValue: "budget.edit.more") == nil)
        #expect(Permission(rawValue: "Budget.Edit") == nil)
        #expect(Permission(rawValue: "budget.") == nil)
        #expect(Permission(rawValue: ".edit") == nil)
        #expect(Permission(rawValue: "budget._edit") == nil)
        #expect(Permission(rawValue: "budget.édit") == nil)
        #expect(Permission(rawValue: "gifts_and_owed.view_all") != nil)
        #expect(Permission(rawValue: "a." + String(repeating: "b", count: 99)) == nil)
        #expect(Permission(rawValue: "a." + String(repeating: "b", count: 98)) != nil)
    }

    @Test("a refused role name or permission is named, with what one looks like")
    func refusalsSayTheShape() {
        #expect(
            message { try RoleName(validating: "Owner") }
                == "\"Owner\" is not a role name (lower-case letters and underscores; at most 63)")
        #expect(
            message { try Permission(validating: "budget") }
                == "\"budget\" is not a permission (area.action, e.g. budget.edit; at most 100 characters)")
        #expect(message { _ = try Permission(validating: "budget.edit") } == nil)
    }

    private func message(_ parse: () throws -> some Any) -> String? {
        do {
            _ = try parse()
            return nil
        } catch {
            return (error as? CollaborationError)?.message ?? "\(error)"
        }
    }

    @Test("a user is named by UUID or by email address, nothing else")
    func userReferences() throws {
        let id = UUID()
        #expect(try UserReference(parsing: id.uuidString) == .id(id))
        #expect(try UserReference(parsing: "pia@example.com") == .email(EmailAddress(rawValue: "pia@example.com")!))
        // Composed and decomposed, an address is stored as the same bytes.
        let composed = "zo\u{EB}@example.com"
        #expect(
            EmailAddress(rawValue: "zoe\u{308}@example.com").map { Array($0.rawValue.utf8) } == Array(composed.utf8))
        #expect(EmailAddress(rawValue: composed).map { Array($0.rawValue.utf8) } == Array(composed.utf8))
        #expect(throws: CollaborationError(.invalidInput, "\"pia\" is neither a user id (UUID) nor an email address")) {
            try UserReference(parsing: "pia")
        }
        // One with an @ was meant as an address: told what is wrong with it.
        #expect(
            throws: CollaborationError(
                .invalidInput,
                "\"pia.@example.com\" is not an email address: a dot cannot begin or end its name or its domain, nor "
                    + "follow another dot")
        ) {
            try UserReference(parsing: "pia.@example.com")
        }
        #expect(throws: CollaborationError.self) { try parseCoupleID("12345") }
    }

    @Test(
        "a domain's labels written xn--… are stored in the letters they stand for, and mailed to as written so",
        arguments: [
            (
                "egbpdaj6bu4bxfgehfvwxn",
                "\u{644}\u{64A}\u{647}\u{645}\u{627}\u{628}\u{62A}\u{643}\u{644}\u{645}\u{648}\u{634}\u{639}\u{631}\u{628}\u{64A}\u{61F}"
            ),
            ("ihqwcrb4cv8a8dqg056pqjye", "\u{4ED6}\u{4EEC}\u{4E3A}\u{4EC0}\u{4E48}\u{4E0D}\u{8BF4}\u{4E2D}\u{6587}"),
            ("Proprostnemluvesky-uyb24dma41a", "Pro\u{10D}prost\u{11B}nemluv\u{ED}\u{10D}esky"),
            ("3B-ww4c5e180e575a65lsy2b", "3\u{5E74}B\u{7D44}\u{91D1}\u{516B}\u{5148}\u{751F}"),
            ("2-u9tlzr9756bt3uc0v", "\u{3072}\u{3068}\u{3064}\u{5C4B}\u{6839}\u{306E}\u{4E0B}2"),
            ("BCHER-KVA", "B\u{FC}CHER"),
        ])
    func internationalDomains(encoded: String, letters: String) {
        for prefix in ["xn--", "XN--", "Xn--"] {
            #expect(
                EmailAddress(rawValue: "ann@mail.\(prefix)\(encoded).example")?.rawValue.unicodeScalars.elementsEqual(
                    "ann@mail.\(letters).example".unicodeScalars) == true)
        }
        #expect(EmailAddress(rawValue: "xn--\(encoded)@example.com")?.rawValue == "xn--\(encoded)@example.com")
        // Mail goes to the ASCII spelling, lower case: Punycode encodes the letters as it decodes them.
        #expect(
            EmailAddress(rawValue: "Ann@Mail.\(letters).example")?.withASCIIDomain
                == "Ann@Mail.xn--\(encoded.lowercased()).example")
    }

    @Test(
        "a refused address is named with why",
        arguments: [
            ("ann", "it needs one @, between a name and a domain"),
            ("ann@b@example.com", "it needs one @, between a name and a domain"),
            ("ann@localhost", "it needs a name before its @ and a dot inside its domain (name@example.com)"),
            ("@example.com", "it needs a name before its @ and a dot inside its domain (name@example.com)"),
            ("ann smith@example.com", "it holds a space"),
            ("ann\u{202E}@example.com", "it holds a control character or a bidirectional override"),
            ("ann\u{200B}@example.com", invisible), ("\u{200D}@example.com", invisible),
            ("ann\u{AD}@example.com", invisible), ("ann@exa\u{2061}mple.com", invisible),
            ("ann@xn--zz.example", "a label of its domain written xn--… is not the Punycode of a label IDNA takes"),
            ("a@b.c" + String(repeating: "c", count: 316), "it is longer than 320 characters"),
            ("ann>,<bob@example.com", quotedOnly), ("\"ann\"@example.com", quotedOnly), ("ann@[192.0.2.1]", quotedOnly),
            ("ann\\bob@example.com", quotedOnly), ("ann..bob@example.com", dots), (".ann@example.com", dots),
            ("ann.@example.com", dots), ("ann@example..com", dots), ("ann@.example.com", dots),
            ("ann@example.com.", dots), ("ann@example\u{3002}\u{FF0E}com", dots),
            ("Ann Smith <ann@example.com>", "it wraps the address in <> (give ann@example.com alone)"),
            ("<ann@example.com>", "it wraps the address in <> (give ann@example.com alone)"),
            ("mailto:ann@example.com", "it begins with mailto: (give ann@example.com alone)"),
            ("Ann <ann smith@example.com", "it holds a space"),
        ])
    func refusedAddress(text: String, reason: String) {
        #expect(throws: CollaborationError(.invalidInput, "\(quoted(text)) is not an email address: \(reason)")) {
            try EmailAddress(validating: text)
        }
        #expect(EmailAddress(rawValue: text) == nil)
    }

    @Test(
        "a domain typed with compatibility forms, other full stops or characters IDNA ignores is stored mapped",
        arguments: [
            ("ann@\u{FF42}\u{FC}cher\u{FF0E}example", "ann@b\u{FC}cher.example"),
            ("ann@b\u{FC}cher\u{3002}example", "ann@b\u{FC}cher.example"),
            ("ann@b\u{FC}cher\u{FF61}example", "ann@b\u{FC}cher.example"),
            ("ann@b\u{FC}\u{AD}cher.exa\u{200B}mple", "ann@b\u{FC}cher.example"),
            ("ann@\u{FF25}\u{FF38}ample.\u{FB01}", "ann@EXample.fi"),
            // The local part is the mailbox's to read: only the domain is mapped.
            ("\u{FF41}nn@example.com", "\u{FF41}nn@example.com"),
        ])
    func mappedDomains(typed: String, stored: String) {
        #expect(EmailAddress(rawValue: typed)?.rawValue.unicodeScalars.elementsEqual(stored.unicodeScalars) == true)
    }

    @Test(
        """
        a label written xn--… that is not Punycode, or stands for ASCII, for xn--, or for what mapping changes, is no \
        address
        """,
        arguments: [
            "zz", "abc-", "-abc", "", "a!b", "b\u{FC}cher-kva", "99999999999", "ab-8ya\u{301}", "xn--ab-8ya",
            "cher-zra77610b", "bcher-kva0835f",
        ])
    func notPunycode(encoded: String) {
        #expect(EmailAddress(rawValue: "ann@xn--\(encoded).example") == nil)
    }

    @Test(
        "names, labels and emails with a control character or a bidirectional override are refused",
        arguments: [
            "\0", "\u{1B}[2J", "\u{01}", "\n", "\t", "\u{7F}", "\u{85}", "\u{202A}", "\u{202E}", "\u{2066}", "\u{2069}",
        ])
    func controlCharacters(control: String) {
        #expect(throws: InvalidText.self) { try validatedName("Main" + control + "plan", "name") }
        // At either end too, where spaces are trimmed: a line break or a tab there is no space.
        #expect(throws: InvalidText.self) { try validatedName(control + "Main", "name") }
        #expect(throws: InvalidText.self) { try validatedName("Main" + control, "name") }
        #expect(throws: CollaborationError.self) { try CoupleRole.validateDescription("Helps" + control) }
        #expect(throws: InvalidText.self) { try refuseControlCharacters("Bakery" + control, "vendor") }
        #expect(EmailAddress(rawValue: "a" + control + "b@example.com") == nil)
        #expect(!quoted("x" + control).unicodeScalars.contains(control.unicodeScalars.first!))
    }

    @Test("the marks that set a direction, and names written right to left, are kept")
    func directionMarks() throws {
        for name in ["\u{5E9}\u{5E8}\u{5D4} & Dan", "Dan\u{200F} & \u{5E9}\u{5E8}\u{5D4}", "\u{627}\u{61C}1"] {
            #expect(try validatedName(name, "name") == name)
        }
        #expect(quoted("a\u{202E}b") == #""a\u{202E}b""#)
    }

    @Test(
        "an echo of typed text shows its control characters and those drawn as nothing escaped, and is cut at 100"
    )
    func quotedEchoes() {
        #expect(quoted("planner") == #""planner""#)
        #expect(quoted("a\u{1B}[2Jb\0") == #""a\u{1B}[2Jb\u{0}""#)
        #expect(quoted("pia\u{200B}@example.com") == #""pia\u{200B}@example.com""#)
        #expect(quoted(String(repeating: "x", count: 150)) == "\"" + String(repeating: "x", count: 100) + "…\"")
        #expect((try? validatedName("  Émile & Zoë  ", "name")) == "Émile & Zoë")
    }

    @Test("a name is 1 to 200 characters without the whitespace around it, and at most 200 as given")
    func nameLengths() throws {
        let longest = String(repeating: "é", count: 200)
        #expect(try validatedName(longest, "name") == longest)
        #expect(try validatedName(" " + String(longest.dropFirst()), "name") == String(longest.dropFirst()))
        for refused in ["", longest + "é", " " + longest, longest + "\n"] {
            #expect(throws: InvalidText("name must be 1 to 200 characters")) { try validatedName(refused, "name") }
        }
    }

    @Test("a name or description that shows nothing is refused: zero-width spaces, joiners, fillers, blank Braille")
    func blankNames() throws {
        let blank = InvalidText(
            "name must show something, not only spaces and invisible characters (zero-width spaces, joiners, "
                + "fillers, ...)")
        for refused in [
            "\u{200B}\u{200C}", " \u{FEFF} ", "\u{2060}\u{200D}", "\u{3164}", "\u{2800}", "\u{AD}\u{3000}\u{FE0F}",
            " ", "\u{200B}",
        ] {
            #expect(throws: blank) { try validatedName(refused, "name") }
            #expect(throws: CollaborationError.self) { try CoupleRole.validateDescription(refused) }
        }
        for kept in ["\u{200C}Ann", "Ann\u{200D}Bo", "\u{2800}x"] {
            #expect(try validatedName(kept, "name") == kept)
        }
    }

    @Test("a provider's name is kept as a typed one would be, trimmed; one that is none is dropped, not refused")
    func providerNames() {
        let named = { (name: String) in ExternalIdentity(issuer: "https://id.example", subject: "s", name: name).name }
        #expect(named("  Ann Lee  ") == "Ann Lee")
        #expect(named(String(repeating: "é", count: 200)) != nil)
        for dropped in [
            "", "  ", "Ann Lee\n", "\u{200B}\u{3164}", "Eve\u{1B}[2J", "Eve\u{202E}",
            String(repeating: "é", count: 201),
        ] {
            #expect(named(dropped) == nil, "\(dropped.unicodeScalars.map(\.value))")
        }
    }
}

@Suite("The policy document")
struct PolicyDocumentTests {
    private func document(_ json: String) throws -> PolicyDocument {
        try JSONDecoder().decode(PolicyDocument.self, from: Data(json.utf8))
    }

    @Test("inheritance is flattened transitively")
    func flattening() throws {
        let roles = try document(
            """
            {"permissions": {"a.view": "", "a.edit": "", "a.own": ""},
             "roles": {"owner": {"rank": 1, "description": "", "inherits": ["editor"], "permissions": ["a.own"], "grants": ["viewer"]},
                       "editor": {"rank": 2, "description": "", "inherits": ["viewer"], "permissions": ["a.edit"]},
                       "viewer": {"rank": 3, "description": "", "permissions": ["a.view"]}}}
            """
        ).flattened()
        #expect(roles.map(\.name.rawValue) == ["owner", "editor", "viewer"])
        #expect(roles[0].permissions.map(\.rawValue) == ["a.edit", "a.own", "a.view"])
        #expect(roles[0].grants.map(\.rawValue) == ["viewer"])
    }

    @Test("unknown permissions and roles are named; cycles are refused")
    func validation() throws {
        let unknown = try document(
            """
            {"permissions": {"a.view": ""},
             "roles": {"owner": {"rank": 1, "description": "", "permissions": ["a.veiw"], "grants": ["boss"]}}}
            """)
        #expect(throws: CollaborationError.self) { try unknown.flattened() }
        do {
            _ = try unknown.flattened()
        } catch {
            #expect(error.message.contains("unknown permission \"a.veiw\""))
            #expect(error.message.contains("unknown role \"boss\""))
        }
        let cycle = try document(
            """
            {"permissions": {},
             "roles": {"owner": {"rank": 1, "description": "", "inherits": ["b"]},
                       "b": {"rank": 2, "description": "", "inherits": ["owner"]}}}
            """)
        #expect(throws: CollaborationError.self) { try cycle.flattened() }
        // couple.transfer goes with ownership, inherited or not.
        let transferring = try document(
            """
            {"permissions": {"couple.transfer": ""},
             "roles": {"owner": {"rank": 1, "description": "", "permissions": ["couple.transfer"]},
                       "heir": {"rank": 2, "description": "", "inherits": ["owner"]}}}
            """)
        #expect {
            try transferring.flattened()
        } throws: {
            ($0 as? CollaborationError)?.message
                == "invalid policy: couple.transfer goes with ownership, and only \"owner\" may hold it, not: heir"
        }
    }

    @Test("the shipped policy is valid and has the four roles")
    func shippedPolicy() throws {
        var root = URL(fileURLWithPath: #filePath)
        while !FileManager.default.fileExists(atPath: root.appendingPathComponent("Package.swift").path) {
            root.deleteLastPathComponent()
        }
        let roles = try PolicyDocument.load(from: root.appendingPathComponent("policies/policy.json")).flattened()
        #expect(roles.map(\.name.rawValue) == ["owner", "partner", "planner", "viewer"])
    }
}
