import Collaboration
import Foundation
import Testing

@Suite("Ids as text")
struct UUIDTextTests {
    static let id = UUID(uuidString: "0F8FAD5B-D9CB-469F-A165-70867728950E")!

    @Test("a UUID property is written in lower case and read back")
    func property() throws {
        let user = User(id: Self.id, email: "a@example.com", displayName: nil)
        let json = String(decoding: try JSONEncoder().encode(user), as: UTF8.self)
        #expect(json.contains(#""id":"0f8fad5b-d9cb-469f-a165-70867728950e""#))
        #expect(try JSONDecoder().decode(User.self, from: Data(json.utf8)) == user)
    }

    @Test("an optional UUID is written in lower case when present and left out when absent")
    func optional() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let fresh = Invitation(
            id: Self.id, coupleID: Self.id, role: RoleName(rawValue: "planner")!, email: nil, inviter: "Olivia",
            createdAt: Date(timeIntervalSince1970: 0), expiresAt: Date(timeIntervalSince1970: 0), status: .pending,
            acceptedBy: nil)
        let accepted = Invitation(
            id: Self.id, coupleID: Self.id, role: fresh.role, email: nil, inviter: "Olivia", createdAt: fresh.createdAt,
            expiresAt: fresh.expiresAt, status: .accepted, acceptedBy: Self.id)
        #expect(!String(decoding: try encoder.encode(fresh), as: UTF8.self).contains("acceptedBy"))
        let json = String(decoding: try encoder.encode(accepted), as: UTF8.self)
        #expect(json.contains(#""acceptedBy":"0f8fad5b-d9cb-469f-a165-70867728950e""#))
        #expect(!json.contains("0F8FAD5B"))
        #expect(try JSONDecoder().decode(Invitation.self, from: Data(json.utf8)) == accepted)
    }

    @Test("parsing reads every UUID as Foundation does, in either case")
    func parsesWhatFoundationWrites() {
        for _ in 0..<1_000 {
            let id = UUID()
            #expect(UUID(parsing: id.uuidString) == id)
            #expect(UUID(parsing: id.uuidString.lowercased()) == id)
        }
        #expect(UUID(parsing: "0f8fad5b-d9cb-469f-a165-70867728950e") == Self.id)
        #expect(
            UUID(parsing: "00000000-0000-0000-0000-000000000000")
                == UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
    }

    @Test(
        "parsing refuses what is not 8-4-4-4-12 hex digits, including text sscanf would take",
        arguments: [
            "", "0f8fad5b", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5b-d9cb-469f-a165-70867728950e0",
            "0f8fad5bd9cb469fa16570867728950e", "{0f8fad5b-d9cb-469f-a165-70867728950e}",
            " f8fad5b-d9cb-469f-a165-70867728950e", "+f8fad5b-d9cb-469f-a165-70867728950e",
            "0f8fad5b-+9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165- 0867728950e",
            "0x8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950g",
            "0f8fad5b d9cb-469f-a165-70867728950e", "0f8fad5-bd9cb-469f-a165-70867728950e",
            "0f8fad5b-d9cb-469f-a165-70867728950é", "0f8fad5b-d9cb-469f-a165-70867728950e\n",
        ])
    func refusesMalformed(_ text: String) {
        #expect(UUID(parsing: text) == nil)
    }
}
