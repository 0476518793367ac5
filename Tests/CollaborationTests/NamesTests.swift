import Foundation
import Testing

@testable import Collaboration

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
        #expect(throws: CollaborationError.self) { try parseCoupleID("12345") }
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

    @Test(
        "names, labels and emails with a control character or a bidirectional override are refused",
        arguments: [
            "\0", "\u{1B}[2J", "\u{01}", "\n", "\t", "\u{7F}", "\u{85}", "\u{202A}", "\u{202E}", "\u{2066}", "\u{2069}",
        ])
    func controlCharacters(control: String) {
        #expect(throws: InvalidText.self) { try validatedName("Main" + control + "plan", "name") }
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

    @Test("an echo of typed text shows its control characters escaped, and is cut at 100 characters")
    func quotedEchoes() {
        #expect(quoted("planner") == #""planner""#)
        #expect(quoted("a\u{1B}[2Jb\0") == #""a\u{1B}[2Jb\u{0}""#)
        #expect(quoted(String(repeating: "x", count: 150)) == "\"" + String(repeating: "x", count: 100) + "…\"")
        #expect((try? validatedName("  Émile & Zoë  ", "name")) == "Émile & Zoë")
    }
}
