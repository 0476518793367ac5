import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import Server

/// A couple's own roles and expiring memberships over HTTP (in-memory repositories, the test clock).
@Suite("Roles and expiry over the management API")
struct RolesAPITests {
    @Test("roles: create, list, grant until an instant, refuse bad input with 400 and a held delete with 409")
    func roles() async throws {
        let fixture = try await Fixture()
        let guest = try await fixture.user("mom", displayName: "Mom")
        var owner = fixture.keyHeader(actingAs: fixture.owner)
        owner[.contentType] = "application/json"
        let headers = owner
        let roles = "/v1/couples/\(fixture.couple)/roles"
        let members = "/v1/couples/\(fixture.couple)/members"
        let until = ISO8601DateFormatter().string(from: fixture.clock.now.addingTimeInterval(86_400))
        try await fixture.application().test(.router) { client in
            func send(_ uri: String, _ method: HTTPRequest.Method, _ json: String? = nil) async throws
                -> (HTTPResponse.Status, String)
            {
                try await client.execute(
                    uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) }
                ) { ($0.status, String(buffer: $0.body)) }
            }
            let created = try await send(
                roles, .post, #"{"name":"mom","description":"Sees the guests","permissions":["guests.view"]}"#)
            #expect(created.0 == .created && created.1.contains(#""couple_defined":true"#), "\(created.1)")
            let listed = try await send(roles, .get)
            #expect(listed.0 == .ok && listed.1.contains(#""name":"mom""#) && listed.1.contains(#""name":"owner""#))

            let granted = try await send(
                members, .post, #"{"user_id":"\#(guest)","role":"mom","expires_at":"\#(until)"}"#)
            #expect(granted.0 == .ok && granted.1.contains(#""expires_at":"\#(until)""#), "\(granted.1)")
            for bad in [
                #"{"user_id":"\#(guest)","role":"mom","expires_at":"tomorrow"}"#,
                #"{"user_id":"\#(guest)","role":"mom","expires_at":"2001-01-01T00:00Z"}"#,
                #"{"user_id":"\#(guest)","role":"mom","expires_at":"2099-02-30T00:00Z"}"#,
                #"{"user_id":"\#(fixture.owner)","role":"owner","expires_at":"\#(until)"}"#,
            ] {
                let refused = try await send(members, .post, bad)
                #expect(refused.0 == .badRequest && refused.1.contains("invalid_input"), "\(bad): \(refused.1)")
            }
            let nothing = try await send("\(roles)/mom", .patch, "{}")
            #expect(nothing.0 == .badRequest)
            let escalate = try await send(
                roles, .post, #"{"name":"x","description":"x","permissions":["budget.fly"]}"#)
            #expect(escalate.0 == .badRequest, "\(escalate.1)")

            let held = try await send("\(roles)/mom", .delete)
            #expect(held.0 == .conflict && held.1.contains("role_in_use"), "\(held.1)")
            let twice = try await send("\(roles)/mom?reassign=viewer&reassign=planner", .delete)
            #expect(twice.0 == .badRequest && twice.1.contains("reassign is given more than once"), "\(twice.1)")
            let onto = try await send("\(roles)/mom?reassign=mom", .delete)
            #expect(onto.0 == .badRequest && onto.1.contains("the role being deleted"), "\(onto.1)")
            #expect(try await send("\(roles)/mom?reassign=viewer", .delete).0 == .noContent)
            #expect(try await send("\(roles)/mom", .delete).0 == .notFound)
        }
        #expect(
            try await fixture.repository.role(couple: fixture.couple, user: guest, as: .operator(label: "t"))
                == RoleName(rawValue: "viewer"))
    }

    @Test("the invitation page names a couple's role with its description, and when the access ends")
    func invitationPage() async throws {
        let fixture = try await Fixture()
        let admin = Actor.operator(label: "tests")
        _ = try await fixture.repository.createRole(
            couple: fixture.couple, name: RoleName(rawValue: "mom")!, description: "May view the guests & budget",
            permissions: [Permission(rawValue: "guests.view")!], as: admin)
        let ends = fixture.clock.now.addingTimeInterval(30 * 86_400)
        let issued = try await fixture.invitations.invite(
            to: fixture.couple, role: RoleName(rawValue: "mom")!, membershipExpiresAt: ends, as: admin)
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/invitations/\(issued.token.rawValue)", method: .get) { response in
                let page = String(buffer: response.body)
                #expect(response.status == .ok)
                #expect(page.contains(#"<bdi id="role-description">May view the guests &amp; budget</bdi>"#))
                #expect(page.contains(#"id="access-ends""#) && page.contains(inWords(ends)))
            }
            try await client.execute(uri: "/v1/invitations/\(issued.token.rawValue)", method: .get) { response in
                let preview = String(buffer: response.body)
                #expect(preview.contains(#""role_description":"May view the guests & budget""#), "\(preview)")
                #expect(preview.contains(#""membership_expires_at""#))
            }
        }
    }
}
