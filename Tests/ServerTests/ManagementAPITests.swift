import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import Server

@Suite("Membership and invitation management API (in-memory repositories)")
struct ManagementAPITests {
    @Test("acting for a user: their permissions decide, refusals have the documented statuses")
    func actingUser() async throws {
        let fixture = try await Fixture()
        let planner = try await fixture.repository.addUser(
            email: EmailAddress(rawValue: "pia@example.com")!, displayName: nil
        ).id
        try await fixture.application().test(.router) { client in
            var headers = fixture.keyHeader
            let grant = ByteBuffer(string: #"{"user_id":"\#(planner)","role":"planner"}"#)
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members", method: .post, headers: headers, body: grant
            ) {
                #expect($0.status == .badRequest, "the acting user is required")
            }
            headers[.init("X-Acting-User")!] = fixture.owner.uuidString
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members", method: .post, headers: headers, body: grant
            ) {
                #expect($0.status == .ok)
                #expect(String(buffer: $0.body).contains("\"role\":\"planner\""))
            }
            try await client.execute(uri: "/v1/couples/\(fixture.couple)/leave", method: .post, headers: headers) {
                response in
                #expect(response.status == .conflict)
                #expect(String(buffer: response.body).contains("\"code\":\"last_owner\""))
            }
            var asPlanner = fixture.keyHeader
            asPlanner[.init("X-Acting-User")!] = planner.uuidString
            let escalate = ByteBuffer(string: #"{"user_id":"\#(planner)","role":"owner"}"#)
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members", method: .post, headers: asPlanner, body: escalate
            ) {
                #expect($0.status == .forbidden)
            }
            let invite = ByteBuffer(string: #"{"role":"viewer","email":"guest@example.com"}"#)
            let issued = try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/invitations", method: .post, headers: asPlanner, body: invite
            ) { response in
                #expect(response.status == .created)
                #expect(response.headers[.cacheControl] == "no-store")
                return try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
            }
            let invitation = try #require((issued?["invitation"] as? [String: Any])?["id"] as? String)
            #expect((issued?["link"] as? String)?.hasPrefix("https://rbac.test/invitations/inv_") == true)
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/invitations?status=pending", method: .get, headers: headers
            ) {
                #expect(String(buffer: $0.body).contains(invitation))
            }
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/invitations/\(invitation)", method: .delete, headers: headers
            ) {
                #expect($0.status == .noContent)
            }
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/invitations/\(invitation)", method: .delete, headers: headers
            ) {
                #expect($0.status == .conflict)
            }
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members/\(planner)", method: .delete, headers: headers
            ) {
                #expect($0.status == .ok)
            }
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members/\(planner)", method: .delete, headers: headers
            ) {
                #expect($0.status == .notFound)
            }
        }
    }
}
