import Collaboration
import Foundation
import Testing

@Suite("Ids in JSON")
struct UUIDEncodingTests {
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
}
