import Collaboration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Identity
import Postgres
import Storage
import TestSupport
import Testing

@testable import Server

@Suite("OpenAPI document: answers")
struct OpenAPIAnswersTests {
    @Test(
        "every answer of every route a service or an invitee calls is one the document lists for its status, its JSON as the document's schema describes it",
        arguments: DocumentedService.Storage.allCases
    )
    func answersAsDocumented(_ storage: DocumentedService.Storage) async throws {
        try await DocumentedService.with(storage) { try await answersAsDocumented($0) }
    }

    private func answersAsDocumented(_ fixture: DocumentedService) async throws {
        let document = try JSONDecoder().decode(JSONValue.self, from: try openAPIDocument())
        let application = Application(router: buildRouter(fixture.dependencies))
        let (answered, problems) = try await application.test(.router) { client in
            var routes = DocumentedCalls(client: client, checker: SchemaChecker(document: document), fixture: fixture)
            func id(_ json: JSONValue, _ key: String = "id") throws -> String { try #require(json[key]?.string) }

            for route in ["/health", "/ready", "/metrics", "/openapi.json"] {
                try await routes.call(.get, route, headers: [:])
            }
            let couple = fixture.couple.uuidString
            let (owner, invitee) = (fixture.owner.uuidString, fixture.invitee.uuidString)
            let check = #"{"couple_id":"\#(couple)","user_id":"\#(owner)","permission":"budget.edit""#
            let unknown = #"{"couple_id":"\#(UUID())","user_id":"\#(owner)","permission":"budget.edit"}"#
            try await routes.call(.post, "/v1/check", body: check + "}")
            try await routes.call(.post, "/v1/check", body: unknown)
            try await routes.call(.post, "/v1/check/batch", body: #"{"checks":[\#(check)},\#(unknown)]}"#)
            try await routes.call(.post, "/v1/check", body: check + #","min_revision":99}"#)

            // The people and the couple.
            try await routes.call(.get, "/v1/users", query: "?limit=1")
            try await routes.call(.get, "/v1/users", query: "?search=paul")
            try await routes.call(.get, "/v1/users/{user}", ["user": owner])
            try await routes.call(.get, "/v1/users/{user}", ["user": UUID().uuidString])
            try await routes.call(.patch, "/v1/users/{user}", ["user": owner], body: #"{"display_name":"Liv"}"#)
            try await routes.call(.get, "/v1/users/{user}/couples", ["user": owner], query: "?limit=1")
            let other = try id(try await routes.call(.post, "/v1/couples", body: #"{"name":"Second"}"#))
            try await routes.call(.get, "/v1/couples/{couple}", ["couple": couple])
            try await routes.call(
                .patch, "/v1/couples/{couple}", ["couple": couple], body: #"{"name":"Olivia & Paul"}"#)
            try await routes.call(.patch, "/v1/couples/{couple}", ["couple": couple], body: #"{"name":""}"#)
            try await routes.call(.delete, "/v1/couples/{couple}", ["couple": other])

            // Members and roles.
            let member = ["couple": couple, "user": invitee]
            try await routes.call(
                .post, "/v1/couples/{couple}/members", member, body: #"{"user_id":"\#(invitee)","role":"planner"}"#)
            try await routes.call(
                .post, "/v1/couples/{couple}/members", member, body: #"{"user_id":"\#(owner)","role":"x"}"#)
            let firstPage = try await routes.call(.get, "/v1/couples/{couple}/members", member, query: "?limit=1")
            let nextPage = try await routes.call(
                .get, "/v1/couples/{couple}/members", member,
                query: "?limit=1&after=\(try id(firstPage, "next_after"))")
            func members(_ page: JSONValue) -> [String] {
                guard case .array(let rows)? = page["members"] else { return [] }
                return rows.compactMap { $0["user"]?["id"]?.string }
            }
            // Each member once: the next page begins after the first's place, not at it (in memory the two joined
            // at the same instant, and are then in the order of their ids).
            #expect(
                (members(firstPage) + members(nextPage)).sorted() == [owner, invitee].map { $0.lowercased() }.sorted())
            try await routes.call(.get, "/v1/couples/{couple}/users/{user}/permissions", member)
            try await routes.call(
                .get, "/v1/couples/{couple}/users/{user}/permissions", ["couple": couple, "user": other])
            try await routes.call(.post, "/v1/couples/{couple}/members/{user}/suspend", member)
            try await routes.call(.post, "/v1/couples/{couple}/members/{user}/reactivate", member)
            let role = ["couple": couple, "role": "aunt"]
            try await routes.call(
                .post, "/v1/couples/{couple}/roles", role,
                body: #"{"name":"aunt","description":"Family","permissions":["budget.view"]}"#)
            try await routes.call(.get, "/v1/couples/{couple}/roles", role)
            try await routes.call(.patch, "/v1/couples/{couple}/roles/{role}", role, body: #"{"description":"Aunts"}"#)
            try await routes.call(.delete, "/v1/couples/{couple}/roles/{role}", role)

            // Invitations, made, listed, previewed, resent, revoked and accepted.
            let issued = try await routes.call(
                .post, "/v1/couples/{couple}/invitations", ["couple": couple],
                body: #"{"role":"viewer","email":"guest@example.com"}"#)
            let invitation = ["couple": couple, "invitation": try #require(issued["invitation"]?["id"]?.string)]
            try await routes.call(.get, "/v1/couples/{couple}/invitations", invitation, query: "?limit=1")
            try await routes.call(.get, "/v1/invitations/{token}", ["token": try id(issued, "token")], headers: [:])
            try await routes.call(.get, "/invitations/{token}", ["token": try id(issued, "token")], headers: [:])
            try await routes.call(.get, "/invitations/{token}", ["token": "inv_unknown"], headers: [:])
            let resent = try await routes.call(
                .post, "/v1/couples/{couple}/invitations/{invitation}/resend", invitation)
            try await routes.call(.get, "/v1/invitations/{token}", ["token": try id(resent, "token")], headers: [:])
            let renewed = ["couple": couple, "invitation": try #require(resent["invitation"]?["id"]?.string)]
            try await routes.call(.delete, "/v1/couples/{couple}/invitations/{invitation}", renewed)
            let guest = try await fixture.addUser("ines")
            let open = try await routes.call(
                .post, "/v1/couples/{couple}/invitations", ["couple": couple], body: #"{"role":"viewer"}"#)
            let asGuest: HTTPFields = [
                .accept: "application/json", .authorization: "Bearer \(fixture.jwt(for: guest))",
            ]
            // Signing in at the provider to accept: the way there, and the ways back that it did not send.
            for token in [try id(open, "token"), "inv_unknown"] {
                try await routes.call(.get, "/invitations/{token}/sign-in", ["token": token], headers: [:])
            }
            for query in ["", "?error=access_denied", "?code=c&state=s"] {
                try await routes.call(.get, "/oidc/callback", query: query, headers: [:])
            }
            for _ in 0..<2 {
                try await routes.call(
                    .post, "/invitations/{token}/accept", ["token": try id(open, "token")], headers: asGuest)
            }
            // A person the service has not seen signs in, then again; and without a token.
            let nina = DevelopmentTokens.sign(
                ["sub": "nina", "email": "nina@example.com", "exp": Date().timeIntervalSince1970 + 600],
                secret: Fixture.secret)
            let newcomer: HTTPFields = [.authorization: "Bearer \(nina)"]
            for (headers, status) in [(newcomer, 201), (newcomer, 200), ([:], 401)] {
                try await routes.call(.post, "/v1/sign-in", headers: headers)
                #expect(routes.lastStatus == status)
            }
            // The same refusal as a page, for a browser.
            try await routes.call(
                .post, "/invitations/{token}/accept", ["token": try id(open, "token")],
                headers: [.authorization: "Bearer \(fixture.jwt(for: guest))"])

            // The limits: a couple's invitations an hour, and invalid tokens from one address.
            let pending = try await routes.call(
                .post, "/v1/couples/{couple}/invitations", ["couple": couple], body: #"{"role":"viewer"}"#)
            try await fixture.limitInvitations(1)
            try await routes.call(
                .post, "/v1/couples/{couple}/invitations", ["couple": couple], body: #"{"role":"viewer"}"#)
            #expect(routes.lastStatus == 429)
            try await routes.call(
                .post, "/v1/couples/{couple}/invitations/{invitation}/resend",
                ["couple": couple, "invitation": try #require(pending["invitation"]?["id"]?.string)])
            #expect(routes.lastStatus == 429)
            let guessed = ["token": "inv_guess"]
            repeat {
                try await routes.call(.get, "/v1/invitations/{token}", guessed, headers: [:])
            } while routes.lastStatus == 404
            for path in ["/invitations/{token}", "/invitations/{token}/sign-in"] {
                try await routes.call(.get, path, guessed, headers: [:])
                #expect(routes.lastStatus == 429, "\(path)")
            }
            try await routes.call(.post, "/invitations/{token}/accept", guessed, headers: asGuest)
            #expect(routes.lastStatus == 429)

            // The owner hands over and leaves; the new owner removes the guest; the log of it all.
            try await routes.call(
                .post, "/v1/couples/{couple}/transfer-ownership", ["couple": couple], body: #"{"to":"\#(invitee)"}"#)
            try await routes.call(.post, "/v1/couples/{couple}/leave", ["couple": couple])
            let asNewOwner = fixture.keyHeader(actingAs: fixture.invitee)
            try await routes.call(
                .delete, "/v1/couples/{couple}/members/{user}", ["couple": couple, "user": guest.uuidString],
                headers: asNewOwner)
            try await routes.call(.post, "/v1/couples/{couple}/leave", ["couple": couple], headers: asNewOwner)
            try await routes.call(
                .get, "/v1/couples/{couple}/audit", ["couple": couple], query: "?tail=3", headers: asNewOwner)
            try await routes.call(.delete, "/v1/users/{user}", ["user": owner])

            // The budget, as its new owner keeps it.
            func budget(
                _ method: HTTPRequest.Method, _ path: String, _ ids: [String: String] = [:], query: String = "",
                body: String? = nil
            ) async throws -> JSONValue {
                try await routes.call(
                    method, "/v1/couples/{couple}/budget" + path, ids.merging(["couple": couple]) { $1 }, query: query,
                    body: body, headers: asNewOwner)
            }
            let main = try id(try await budget(.post, "/scenarios", body: #"{"name":"Main","primary":true}"#))
            let scenario = ["scenario": main]
            let alternative = try id(
                try await budget(.post, "/scenarios/{scenario}/clone", scenario, body: #"{"name":"B"}"#))
            _ = try await budget(.post, "/scenarios/{scenario}/primary", scenario)
            _ = try await budget(.patch, "/scenarios/{scenario}", scenario, body: #"{"name":"Main plan"}"#)
            _ = try await budget(.get, "/scenarios", query: "?limit=1")
            _ = try await budget(.get, "/scenarios")
            let folder = try id(
                try await budget(.post, "/scenarios/{scenario}/folders", scenario, body: #"{"name":"Party"}"#))
            _ = try await budget(.patch, "/folders/{folder}", ["folder": folder], body: #"{"name":"Reception"}"#)
            _ = try await budget(.get, "/scenarios/{scenario}/folders", scenario, query: "?limit=1")
            let venue = try id(
                try await budget(
                    .post, "/scenarios/{scenario}/items", scenario,
                    body: #"{"name":"Venue","budgeted":5000,"folder_id":"\#(folder)","event":"Party"}"#))
            let cake = try id(
                try await budget(.post, "/scenarios/{scenario}/items", scenario, body: #"{"name":"Cake","budgeted":0}"#)
            )
            _ = try await budget(.patch, "/items/{item}", ["item": cake], body: #"{"category":"Food"}"#)
            _ = try await budget(.get, "/scenarios/{scenario}/items", scenario)
            _ = try await budget(.get, "/scenarios/{scenario}/items", scenario, query: "?limit=1")
            _ = try await budget(.get, "/scenarios/{scenario}/categories", scenario)
            let expense = try id(
                try await budget(
                    .post, "/expenses", body: #"{"name":"Deposit","amount":1200.5,"due_date":"2020-01-31"}"#))
            let spend = ["expense": expense]
            _ = try await budget(.patch, "/expenses/{expense}", spend, body: #"{"vendor":"Hall & Co"}"#)
            _ = try await budget(
                .post, "/expenses/{expense}/allocations", spend,
                body: #"{"scenario_id":"\#(main)","items":["\#(venue)","\#(cake)"]}"#)
            _ = try await budget(.put, "/items/{item}/budgeted", ["item": cake], body: #"{"amount":1000}"#)
            _ = try await budget(.put, "/expenses/{expense}/amount", spend, body: #"{"amount":2000}"#)
            let payment = try id(
                try await budget(.post, "/expenses/{expense}/payments", spend, body: #"{"amount":2500}"#))
            _ = try await budget(.get, "/expenses/{expense}/payments", spend)
            _ = try await budget(.get, "/expenses", query: "?limit=1")
            _ = try await budget(.get, "/payments")
            let gift = try id(
                try await budget(.post, "/gifts", body: #"{"from":"Aunt","amount":250,"budget_item_id":"\#(venue)"}"#))
            _ = try await budget(.patch, "/gifts/{gift}", ["gift": gift], body: #"{"received":true}"#)
            _ = try await budget(.get, "/gifts", query: "?limit=5")
            _ = try await budget(.get, "/scenarios/{scenario}/overview", scenario)
            _ = try await budget(.get, "/scenarios/{scenario}/overview", ["scenario": UUID().uuidString])
            for (path, ids) in [
                ("/gifts/{gift}", ["gift": gift]), ("/payments/{payment}", ["payment": payment]),
                ("/expenses/{expense}", spend), ("/items/{item}", ["item": cake]),
                ("/folders/{folder}", ["folder": folder]),
                ("/scenarios/{scenario}", ["scenario": alternative]),
            ] {
                _ = try await budget(.delete, path, ids)
            }
            return (routes.answered, routes.problems)
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        let paths = try #require(document["paths"]?.members)
        let routes = paths.flatMap { path, operations in
            (operations.members ?? [:]).keys.map { "\($0.uppercased()) \(path)" }
        }
        // But the provider's redirect back after a sign-in, which takes a real provider (the browser test).
        let unlisted: Set<String> = ["GET /oidc/callback"]
        #expect(Set(routes).subtracting(unlisted).subtracting(answered).sorted() == [])
    }

    @Test(
        "every service route refuses a request without its key, and every JSON write a body of another type, as documented"
    )
    func refusalsAsDocumented() async throws {
        let document = try JSONDecoder().decode(JSONValue.self, from: try openAPIDocument())
        // Each operation that takes a service key: its method, its path, and what the document says of it.
        typealias Keyed = (method: HTTPRequest.Method, path: String, operation: JSONValue)
        let keyed = try #require(document["paths"]?.members).flatMap { path, operations -> [Keyed] in
            (operations.members ?? [:]).compactMap { method, operation -> Keyed? in
                guard case .array(let schemes) = operation["security"],
                    schemes.contains(where: { $0["serviceKey"] != nil })
                else { return nil }
                return (method: HTTPRequest.Method(method.uppercased())!, path: path, operation: operation)
            }
        }.sorted { ($0.path, $0.method.rawValue) < ($1.path, $1.method.rawValue) }
        #expect(keyed.count > 50)
        let fixture = try await DocumentedService.inMemory()
        let problems = try await Application(router: buildRouter(fixture.dependencies)).test(.router) { client in
            var routes = DocumentedCalls(client: client, checker: SchemaChecker(document: document), fixture: fixture)
            for (method, path, operation) in keyed {
                // Any ids: the key, and then the body's type, are looked at before them.
                var ids: [String: String] = [:]
                for name in path.split(separator: "/") where name.hasPrefix("{") {
                    ids[String(name.dropFirst().dropLast())] = name == "{role}" ? "aunt" : UUID().uuidString
                }
                let operationName = "\(method.rawValue) \(path)"
                var keyless = fixture.keyHeader(for: operationName)
                keyless[.authorization] = nil
                _ = try await routes.call(method, path, ids, headers: keyless)
                #expect(routes.lastStatus == 401, "\(operationName) without a key")
                if operation["requestBody"] != nil {
                    var typed = fixture.keyHeader(for: operationName)
                    typed[.contentType] = "text/plain"
                    _ = try await routes.call(method, path, ids, body: "{}", headers: typed)
                    #expect(routes.lastStatus == 415, "\(operationName) with text/plain")
                }
            }
            return routes.problems
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }
}

/// Calls the service's routes as the document names them and checks each answer against it: its status is one the
/// document lists for the route, its media type one it lists for the status, its JSON valid against the schema.
struct DocumentedCalls {
    let client: any TestClientProtocol
    let checker: SchemaChecker
    let fixture: DocumentedService
    /// The operations (`GET /v1/couples/{couple}`) answered with success or a redirect.
    var answered: Set<String> = []
    var problems: [String] = []
    /// The status of the last answer.
    var lastStatus = 0

    /// Calls `template` (`/v1/couples/{couple}`) with `ids` in its braces, with the fixture's key (and its owner
    /// acting, where the route takes that) unless `headers` are given; returns the JSON answered (null for none).
    @discardableResult
    mutating func call(
        _ method: HTTPRequest.Method, _ template: String, _ ids: [String: String] = [:], query: String = "",
        body: String? = nil, headers: HTTPFields? = nil
    ) async throws -> JSONValue {
        let operation = "\(method.rawValue) \(template)"
        var uri = template
        for (name, id) in ids { uri = uri.replacingOccurrences(of: "{\(name)}", with: id) }
        let response = try await client.execute(
            uri: uri + query, method: method, headers: headers ?? fixture.keyHeader(for: operation),
            body: body.map { ByteBuffer(string: $0) })
        let status = response.status.code
        lastStatus = status
        let responses = checker.document["paths"]?[template]?[method.rawValue.lowercased()]?["responses"]
        guard var answer = responses?[String(status)] else {
            problems.append("\(operation): \(status) is not documented: \(text(response))")
            return .null
        }
        if let reference = answer["$ref"]?.string, let target = checker.resolve(reference) { answer = target }
        if (200..<400).contains(status) { answered.insert(operation) }
        guard response.body.readableBytes > 0 else {
            if answer["content"] != nil { problems.append("\(operation): \(status) documents a body") }
            return .null
        }
        let type = (response.headers[.contentType] ?? "").split(separator: ";").first ?? ""
        guard let media = answer["content"]?[String(type)] else {
            problems.append("\(operation): \(status) documents no \(type) answer: \(text(response))")
            return .null
        }
        guard type == "application/json" else { return .null }
        // Each JSON answer is about someone as of now: no cache may keep it, no browser read it as other than JSON.
        for (field, value) in [(HTTPField.Name.cacheControl, "no-store"), (.xContentTypeOptions, "nosniff")]
        where response.headers[field] != value {
            problems.append("\(operation): \(status) has \(field): \(response.headers[field] ?? "(none)")")
        }
        let json = try JSONDecoder().decode(JSONValue.self, from: Data(buffer: response.body))
        if let schema = media["schema"] {
            problems += checker.problems(json, schema, at: "\(operation) \(status)")
        }
        return json
    }
}

/// The service whose answers are checked, over in-memory repositories or PostgreSQL (where the answers test runs
/// too, so that what the PostgreSQL repositories return is held to the document as well): a couple, its owner, a
/// user to become a member, a service key, and sign-in at a provider.
struct DocumentedService: Sendable {
    enum Storage: String, CaseIterable, CustomTestStringConvertible {
        case memory, postgres
        var testDescription: String { rawValue }
    }

    let dependencies: ServerDependencies
    let couple: UUID
    let owner: UUID
    let invitee: UUID
    let apiKey: String
    let addUser: @Sendable (String) async throws -> UUID
    let limitInvitations: @Sendable (Int) async throws -> Void
    /// The database, over PostgreSQL.
    var pool: PostgresConnectionPool? = nil

    static func with(_ storage: Storage, _ body: (DocumentedService) async throws -> Void) async throws {
        guard storage == .postgres else { return try await body(try await inMemory()) }
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            @Sendable func user(_ name: String, _ displayName: String? = nil) async throws -> UUID {
                try await repository.addUser(
                    email: EmailAddress(rawValue: "\(name)@example.com")!, displayName: displayName
                )
                .id
            }
            let (owner, invitee) = (try await user("olivia", "Olivia"), try await user("paul", "Paul"))
            let couple = try await repository.createCouple(
                name: "Olivia & Paul <3", owner: owner, as: .operator(label: "tests"))
            let keys = ServiceKeyService(repository: PostgresServiceKeyRepository(pool: pool))
            let dependencies = ServerDependencies(
                repository: repository, keys: keys,
                tokens: TokenVerifier(secret: .hmac(secret: Array(Fixture.secret.utf8))),
                signIn: InvitationSignInTests.signIn(),
                publicBaseURL: URL(string: "https://rbac.test")!, budgets: PostgresBudgetRepository(pool: pool),
                idempotentRequests: PostgresIdempotentRequests(pool: pool), isReady: { true })
            try await body(
                DocumentedService(
                    dependencies: dependencies, couple: couple.id, owner: owner, invitee: invitee,
                    apiKey: try await keys.create(name: "billing").1.rawValue, addUser: { try await user($0) },
                    limitInvitations: { _ = try await repository.invitationLimit(set: $0) }, pool: pool))
        }
    }

    static func inMemory() async throws -> DocumentedService {
        let fixture = try await Fixture()
        return DocumentedService(
            dependencies: fixture.dependencies(signIn: InvitationSignInTests.signIn()), couple: fixture.couple,
            owner: fixture.owner, invitee: fixture.invitee, apiKey: fixture.apiKey,
            addUser: { try await fixture.user($0) },
            limitInvitations: { _ = try await fixture.repository.invitationLimit(set: $0) })
    }

    func keyHeader(actingAs user: UUID) -> HTTPFields { Fixture.keyHeader(apiKey, actingAs: user) }
    func keyHeader(for operation: String) -> HTTPFields { Fixture.keyHeader(apiKey, for: operation, owner: owner) }
    func jwt(for user: UUID) -> String { Fixture.jwt(for: user) }
}
