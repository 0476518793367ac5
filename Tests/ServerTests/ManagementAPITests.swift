import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Secrets
import Testing

@testable import Server

@Suite("Membership and invitation management API (in-memory repositories)")
struct ManagementAPITests {
    @Test("acting for a user: their permissions decide, refusals have the documented statuses")
    func actingUser() async throws {
        let fixture = try await Fixture()
        let planner = try await fixture.user("pia")
        try await fixture.application().test(.router) { client in
            var headers = fixture.keyHeader
            let grant = ByteBuffer(string: #"{"user_id":"\#(planner)","role":"planner"}"#)
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members", method: .post, headers: headers, body: grant
            ) {
                #expect($0.status == .badRequest, "the acting user is required")
            }
            var twice = headers
            twice[values: .init("X-Acting-User")!] = [fixture.owner.uuidString, fixture.owner.uuidString]
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members", method: .post, headers: twice, body: grant
            ) {
                #expect($0.status == .badRequest)
                #expect(String(buffer: $0.body).contains("send one X-Acting-User, not 2"), "\(String(buffer: $0.body))")
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
            let asPlanner = fixture.keyHeader(actingAs: planner)
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
                uri: "/v1/couples/\(fixture.couple)/invitations?status=used", method: .get, headers: headers
            ) {
                #expect($0.status == .badRequest)
                #expect(
                    String(buffer: $0.body).contains(
                        #"status must be pending, accepted, revoked or expired, not \"used\""#),
                    "\(String(buffer: $0.body))")
            }
            // Each deleted twice: the second time the invitation is revoked already, the member gone.
            for (path, answers) in [
                ("invitations/\(invitation)", [HTTPResponse.Status.noContent, .conflict]),
                ("members/\(planner)", [.ok, .notFound]),
            ] {
                for answer in answers {
                    try await client.execute(
                        uri: "/v1/couples/\(fixture.couple)/\(path)", method: .delete, headers: headers
                    ) {
                        #expect($0.status == answer, "\(path)")
                    }
                }
            }
        }
    }

    @Test("a user deletes their account: only their own, and not while a couple's last owner")
    func deleteUser() async throws {
        let fixture = try await Fixture()
        let planner = try await fixture.member("pia", "planner").userID
        try await fixture.application().test(.router) { client in
            func delete(_ user: String, as actor: UUID?) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(
                    uri: "/v1/users/\(user)", method: .delete,
                    headers: actor.map { fixture.keyHeader(actingAs: $0) } ?? fixture.keyHeader
                ) { ($0.status, String(buffer: $0.body)) }
            }
            let refusals: [(String, UUID?, HTTPResponse.Status, String)] = [
                ("\(planner)", fixture.owner, .forbidden, "permission_denied"),
                ("\(fixture.owner)", fixture.owner, .conflict, "last_owner"),
                ("\(planner)", nil, .badRequest, "X-Acting-User"),
                ("not-a-user", planner, .badRequest, "invalid_input"),
            ]
            for (user, actor, status, words) in refusals {
                let (answered, body) = try await delete(user, as: actor)
                #expect(answered == status && body.contains(words), "\(user) as \(String(describing: actor)): \(body)")
            }
            let members = "/v1/couples/\(fixture.couple)/members"
            let before = try await client.execute(uri: members, method: .get, headers: fixture.keyHeader) {
                String(buffer: $0.body)
            }
            #expect(before.contains("\(planner)".lowercased()), "the refusals changed nothing")
            #expect(try await delete("\(planner)", as: planner).0 == .noContent)
            let after = try await client.execute(uri: members, method: .get, headers: fixture.keyHeader) {
                String(buffer: $0.body)
            }
            #expect(!after.contains("\(planner)".lowercased()), "their membership went with them: \(after)")
            #expect(try await delete("\(planner)", as: planner).0 == .notFound, "once")
        }
    }

    @Test(
        "a user changes their own display name over HTTP, which services read; an address is the operator's to change")
    func editUser() async throws {
        let fixture = try await Fixture()
        let planner = try await fixture.member("pia", "planner").userID
        try await fixture.application().test(.router) { client in
            func patch(_ user: String, as actor: UUID?, _ body: String) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(
                    uri: "/v1/users/\(user)", method: .patch,
                    headers: actor.map { fixture.keyHeader(actingAs: $0) } ?? fixture.keyHeader,
                    body: ByteBuffer(string: body)
                ) { ($0.status, String(buffer: $0.body)) }
            }
            let refusals: [(String, UUID?, String, HTTPResponse.Status, String)] = [
                ("\(planner)", fixture.owner, #"{"display_name":"Pia"}"#, .forbidden, "permission_denied"),
                ("\(planner)", planner, #"{"email":"pia.berg@example.com"}"#, .forbidden, "only the operator"),
                ("\(planner)", planner, #"{"email":"pia"}"#, .badRequest, "invalid_input"),
                ("\(planner)", planner, #"{"display_name":"a\u001bb"}"#, .badRequest, "control characters"),
                ("\(planner)", planner, #"{"display_name":7}"#, .badRequest, "invalid_input"),
                ("\(planner)", planner, #"{"displayName":"Pia"}"#, .badRequest, #"names \"displayName\""#),
                ("\(planner)", nil, #"{"display_name":"Pia"}"#, .badRequest, "X-Acting-User"),
                ("not-a-user", planner, #"{"display_name":"Pia"}"#, .badRequest, "invalid_input"),
            ]
            for (user, actor, body, status, words) in refusals {
                let (answered, answer) = try await patch(user, as: actor, body)
                #expect(
                    answered == status && answer.contains(words), "\(body) as \(String(describing: actor)): \(answer)")
            }
            #expect(try await fixture.repository.user(.id(planner)).displayName == nil, "the refusals changed nothing")

            let (renamed, user) = try await patch("\(planner)", as: planner, #"{"display_name":" Pia Berg "}"#)
            #expect(renamed == .ok && user.contains(#""display_name":"Pia Berg""#), "\(user)")
            #expect(user.contains(#""email":"pia@example.com""#), "\(user)")
            let (_, unnamed) = try await patch("\(planner)", as: planner, #"{"display_name":null}"#)
            #expect(!unnamed.contains("display_name"), "null removes the name: \(unnamed)")
            #expect(try await fixture.repository.user(.id(planner)).displayName == nil)
            _ = try await patch("\(planner)", as: planner, #"{"display_name":"Pia"}"#)

            func get(_ user: String, _ headers: HTTPFields) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(uri: "/v1/users/\(user)", method: .get, headers: headers) {
                    ($0.status, String(buffer: $0.body))
                }
            }
            let (found, shown) = try await get("\(planner)", fixture.keyHeader)
            #expect(found == .ok && shown.contains(#""display_name":"Pia""#), "a service reads a user: \(shown)")
            #expect(try await get("\(UUID())", fixture.keyHeader).0 == .notFound)
            #expect(try await get("pia@example.com", fixture.keyHeader).0 == .badRequest, "by id only")
            #expect(try await get("\(planner)", [:]).0 == .unauthorized)
        }
    }

    @Test("a couple is made for the acting user, renamed with couple.edit, and deleted, all of it, with couple.delete")
    func coupleItself() async throws {
        let fixture = try await Fixture()
        let partner = try await fixture.member("pat", "partner").userID
        let planner = try await fixture.member("pia", "planner").userID
        try await fixture.application().test(.router) { client in
            func send(_ method: HTTPRequest.Method, _ path: String, as user: UUID?, _ body: String? = nil)
                async throws -> (HTTPResponse.Status, String)
            {
                try await client.execute(
                    uri: path, method: method,
                    headers: user.map { fixture.keyHeader(actingAs: $0) } ?? fixture.keyHeader,
                    body: body.map { ByteBuffer(string: $0) }
                ) { ($0.status, String(buffer: $0.body)) }
            }
            let (created, made) = try await send(.post, "/v1/couples", as: fixture.invitee, #"{"name":"  Paul & Jo "}"#)
            #expect(created == .created && made.contains(#""name":"Paul & Jo""#), "trimmed: \(made)")
            let newCouple = try #require(made.firstMatch(of: /"id":"([0-9A-Fa-f-]{36})"/)?.output.1)
            let (_, listed) = try await send(.get, "/v1/users/\(fixture.invitee)/couples", as: nil)
            #expect(listed.contains(String(newCouple)) && listed.contains(#""role":"owner""#), "\(listed)")
            for refused in [#"{"name":" "}"#, #"{"name":"a\u001bb"}"#, #"{"title":"x"}"#] {
                #expect(
                    try await send(.post, "/v1/couples", as: fixture.invitee, refused).0 == .badRequest, "\(refused)")
            }
            #expect(
                try await send(.post, "/v1/couples", as: nil, #"{"name":"x"}"#).0 == .badRequest, "the owner is named")

            let path = "/v1/couples/\(fixture.couple)"
            let (shown, detail) = try await send(.get, path, as: planner)
            #expect(
                shown == .ok && detail.contains(#""invite_domains":[]"#) && detail.contains("\(planner)".lowercased()))
            #expect(try await send(.get, path, as: fixture.invitee).0 == .forbidden, "not a member")
            #expect(try await send(.patch, path, as: planner, #"{"name":"Ours"}"#).0 == .forbidden)
            let (renamed, couple) = try await send(.patch, path, as: partner, #"{"name":"Olivia & Paul"}"#)
            #expect(renamed == .ok && couple.contains(#""name":"Olivia & Paul""#), "\(couple)")
            #expect(try await send(.patch, path, as: partner, #"{"name":""}"#).0 == .badRequest)

            let (read, log) = try await send(.get, path + "/audit?tail=1", as: partner)
            #expect(read == .ok && log.contains(#""action":"couple.update""#), "\(log)")
            #expect(log.components(separatedBy: #""action""#).count == 2, "only the newest: \(log)")
            let (_, whole) = try await send(.get, path + "/audit?since=2000-01-01T00:00Z", as: partner)
            #expect(whole.contains(#""action":"membership.insert""#), "\(whole)")
            #expect(try await send(.get, path + "/audit", as: planner).0 == .forbidden, "reading it needs audit.view")
            for refused in ["?tail=0", "?tail=1001", "?since=yesterday", "?before=x", "?before=-1", "?before=1e3"] {
                #expect(try await send(.get, path + "/audit" + refused, as: partner).0 == .badRequest, "\(refused)")
            }
            let (_, refusal) = try await send(.get, path + "/audit?since=yesterday", as: partner)
            #expect(refusal.contains("(2026-09-30T18:00Z) or a date (midnight UTC)"), "what is taken: \(refusal)")
            #expect(!refusal.contains("%2B"))
            let (_, zone) = try await send(.get, path + "/audit?since=2000-01-01T01:00+01:00", as: partner)
            #expect(zone.contains("a + in a query is a space: write %2B"), "\(zone)")
            let (_, encoded) = try await send(.get, path + "/audit?since=2000-01-01T01:00%2B01:00", as: partner)
            #expect(encoded == whole, "the same instant as 2000-01-01T00:00Z")
            let (_, day) = try await send(.get, path + "/audit?since=2000-01-01", as: partner)
            #expect(day == whole, "a date is its midnight UTC")
            #expect(try await send(.get, path + "/audit?before=999999999", as: partner).0 == .notFound)
            // Paged back one at a time from the newest: each page's next_before is where the page before it ends.
            func entries(_ body: String) throws -> (ids: [Int64], nextBefore: Int64?) {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
                let entries = try #require(object["entries"] as? [[String: Any]])
                return (
                    entries.compactMap { ($0["id"] as? NSNumber)?.int64Value },
                    (object["next_before"] as? NSNumber)?.int64Value
                )
            }
            var pages: [[Int64]] = []
            var query = "?tail=1"
            while pages.count < 100 {
                let (status, body) = try await send(.get, path + "/audit" + query, as: partner)
                let page = try entries(body)
                #expect(status == .ok && page.ids.count == 1, "\(body)")
                pages.insert(page.ids, at: 0)
                guard let next = page.nextBefore else { break }
                #expect(next == page.ids.first)
                query = "?tail=1&before=\(next)"
            }
            let wholeLog = try entries(whole).ids
            #expect(pages.count > 2 && Array(pages.joined()) == wholeLog, "\(pages) against \(wholeLog)")

            #expect(try await send(.delete, path, as: partner).0 == .forbidden, "deleting needs couple.delete")
            #expect(try await send(.delete, path, as: fixture.owner).0 == .noContent)
            #expect(try await send(.delete, path, as: fixture.owner).0 == .notFound)
            #expect(try await send(.get, path + "/members", as: nil).0 == .notFound)
            let (_, remaining) = try await send(.get, "/v1/users/\(planner)/couples", as: nil)
            #expect(!remaining.lowercased().contains(fixture.couple.uuidString.lowercased()), "\(remaining)")
        }
    }

    @Test("a user's couples, members and invitations are listed by time a page at a time, each after the last")
    func paging() async throws {
        let fixture = try await Fixture()
        // Each made a second after the one before, so that the listings' order is theirs, not the ids'.
        var (couples, members, invited) = ([fixture.couple], [fixture.owner], [UUID]())
        for index in 1...2 {
            fixture.clock.now += 1
            couples.append(
                try await fixture.repository.createCouple(
                    name: "Also \(index)", owner: fixture.owner, as: .operator(label: "t")
                ).id)
        }
        for index in 1...4 {
            fixture.clock.now += 1
            members.append(try await fixture.member("guest\(index)", "viewer", as: .user(fixture.owner)).userID)
            invited.append(
                try await fixture.invitations.invite(
                    to: fixture.couple, role: RoleName(rawValue: "viewer")!, email: nil, as: .user(fixture.owner)
                ).invitation.id)
        }
        func texts(_ ids: [UUID]) -> [String] { ids.map { $0.uuidString.lowercased() } }
        let expected = (couples: texts(couples), members: texts(members), invitations: texts(invited))
        let (leaving, deleted) = (members[1], couples[1])
        // Invitations are listed for the acting owner; members and a user's couples for the service key alone.
        @Sendable func headers(_ path: String) -> HTTPFields {
            path.hasSuffix("/invitations") ? fixture.keyHeader(actingAs: fixture.owner) : fixture.keyHeader
        }
        try await fixture.application().test(.router) { client in
            // Every listing, walked two at a time, `meanwhile` run after the first page: (ids in order, pages taken).
            func walk(_ path: String, _ key: String, meanwhile: () async throws -> Void = {}) async throws
                -> (ids: [String], pages: Int)
            {
                var ids: [String] = []
                var after: String?
                var pages = 0
                repeat {
                    let page = try await client.execute(
                        uri: "\(path)?limit=2" + (after.map { "&after=\($0)" } ?? ""), method: .get,
                        headers: headers(path)
                    ) { response in
                        #expect(response.status == .ok)
                        return try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                    }
                    let items = try #require(page?[key] as? [[String: Any]])
                    ids += items.compactMap {
                        ($0["user"] as? [String: Any])?["id"] as? String ?? $0["id"] as? String
                            ?? $0["couple_id"] as? String
                    }
                    after = page?["next_after"] as? String
                    pages += 1
                    if pages == 1 { try await meanwhile() }
                } while after != nil && pages < 10
                return (ids, pages)
            }
            // The rows a page ended at go before the next is read: next_after keeps their place.
            let walkedMembers = try await walk("/v1/couples/\(fixture.couple)/members", "members") {
                _ = try await fixture.repository.leave(couple: fixture.couple, user: leaving, as: .user(leaving))
            }
            #expect(walkedMembers.ids == expected.members, "the owner and four viewers, once each, as they joined")
            #expect(walkedMembers.pages == 3)
            let walkedCouples = try await walk("/v1/users/\(fixture.owner)/couples", "couples") {
                try await fixture.repository.deleteCouple(deleted, as: .operator(label: "t"))
            }
            #expect(
                walkedCouples.ids == expected.couples, "the fixture's couple and two more, as the owner joined them")
            #expect(walkedCouples.pages == 2)
            let walkedInvitations = try await walk("/v1/couples/\(fixture.couple)/invitations", "invitations")
            #expect(walkedInvitations.ids == expected.invitations, "oldest first")
            // Four in pages of two: the second page is full, so it names a third, which is empty.
            #expect(walkedInvitations.pages == 3)
            // A page after an id alone, of a row the listing does not have, is a 404, not an empty page.
            for path in ["/v1/couples/\(fixture.couple)/members", "/v1/users/\(fixture.owner)/couples"] {
                try await client.execute(uri: "\(path)?after=\(UUID())", method: .get, headers: headers(path)) {
                    #expect($0.status == .notFound, "\(path): \(text($0))")
                }
            }
            // A sign or a parameter given twice is refused, not read one way here and another by a proxy; a name
            // is read percent-decoded, as a proxy would read it.
            // So is an after that is neither an id nor a next_after the listing gave: a place of another kind, a
            // time beyond the year 9999, a place that is no base64url.
            let id = fixture.owner.uuidString
            let places = [
                "", "x", "WzFd=", Base64URL.encode(Array("[\"a\"]".utf8)),
                Base64URL.encode(Array("[1e300]".utf8)), Base64URL.encode(Array("[1,2]".utf8)),
            ]
            let queries =
                ["limit=0", "limit=1001", "limit=two", "after=nope", "limit=+5", "limit=2&limit=3"]
                + places.map { "after=\(id).\($0)" }
            for query in queries + ["%6Cimit=0", "limit=2&%6cimit=3"] {
                for path in ["members", "invitations"] {
                    try await client.execute(
                        uri: "/v1/couples/\(fixture.couple)/\(path)?\(query)", method: .get,
                        headers: headers("/\(path)")
                    ) {
                        #expect($0.status == .badRequest, "\(path)?\(query)")
                        #expect(!text($0).contains("X-Acting-User"), "refused for its query: \(text($0))")
                    }
                }
            }
        }
    }
}
