import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Secrets
import Testing

@testable import Server

/// A clock tests can move.
final class TestClock: @unchecked Sendable {
    // Safety: tests set it between requests, never concurrently with reads.
    var now = Date()
}

/// The service over in-memory repositories, with one couple, its owner, a member and a service key.
struct Fixture {
    static let secret = "test-secret-0123456789abcdef0123456789"
    let repository: InMemoryCollaborationRepository
    let keys: ServiceKeyService
    let invitations: CollaborationInvitationService
    let clock = TestClock()
    let verifier = JWTVerifier(secret: Fixture.secret)
    var couple = UUID()
    var owner = UUID()
    var invitee = UUID()
    var apiKey = ""

    init() async throws {
        let clock = clock
        let roles = try PolicyDocument.load(from: Self.root.appendingPathComponent("policies/policy.json")).flattened()
        repository = InMemoryCollaborationRepository(roles: roles, now: { clock.now })
        keys = ServiceKeyService(repository: InMemoryServiceKeyRepository())
        invitations = CollaborationInvitationService(repository: repository, baseURL: URL(string: "https://rbac.test")!)
        owner = try await repository.addUser(
            email: EmailAddress(rawValue: "olivia@example.com")!, displayName: "Olivia"
        ).id
        invitee = try await repository.addUser(email: EmailAddress(rawValue: "paul@example.com")!, displayName: "Paul")
            .id
        couple = try await repository.createCouple(
            name: "Olivia & Paul <3", owner: owner, as: .operator(label: "tests")
        ).id
        apiKey = try await keys.create(name: "billing").1.rawValue
    }

    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
            url.deleteLastPathComponent()
        }
        return url
    }()

    func application(limiter: FailedAttemptLimiter = FailedAttemptLimiter()) -> some ApplicationProtocol {
        let dependencies = ServerDependencies(
            repository: repository, keys: keys, verifier: verifier, publicBaseURL: URL(string: "https://rbac.test")!,
            limiter: limiter, isReady: { true })
        return Application(router: buildRouter(dependencies))
    }

    func invite(_ role: String = "partner", email: String? = nil) async throws -> String {
        try await invitations.invite(
            to: couple, role: RoleName(rawValue: role)!, email: email.flatMap(EmailAddress.init(rawValue:)),
            as: .user(owner)
        ).token.rawValue
    }

    func jwt(for user: UUID, expiresIn: TimeInterval = 600) -> String {
        verifier.sign(["sub": user.uuidString.lowercased(), "exp": Date().timeIntervalSince1970 + expiresIn])
    }

    var keyHeader: HTTPFields { [.authorization: "Bearer \(apiKey)"] }
}

func text(_ response: TestResponse) -> String { String(buffer: response.body) }

@Suite("HTTP routes (in-memory repositories)")
struct RouterTests {
    @Test("health answers, and an invitation page shows couple, inviter, role and expiry without consuming it")
    func invitationPage() async throws {
        let fixture = try await Fixture()
        let token = try await fixture.invite()
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/health", method: .get) { #expect($0.status == .ok) }
            for _ in 0..<2 {
                try await client.execute(uri: "/invitations/\(token)", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(response.headers[.cacheControl] == "no-store")
                    #expect(response.headers[.init("Referrer-Policy")!] == "no-referrer")
                    let page = text(response)
                    #expect(page.contains("Olivia &amp; Paul &lt;3"), "the couple's name, HTML-escaped")
                    #expect(page.contains(">partner<") && page.contains("Olivia"))
                }
            }
        }
        #expect(try await fixture.invitations.preview(token: token).status == .pending)
    }

    @Test("unknown, expired, used and revoked tokens give the same status and page")
    func unusableTokensLookAlike() async throws {
        let fixture = try await Fixture()
        let used = try await fixture.invite()
        _ = try await fixture.invitations.accept(token: used, user: nil, as: .user(fixture.invitee))
        let revoked = try await fixture.invite()
        let revokedID = try await fixture.invitations.invitations(
            of: fixture.couple, status: .pending, as: .user(fixture.owner))[0].id
        try await fixture.invitations.revoke(revokedID, in: fixture.couple, as: .user(fixture.owner))
        let expired = try await fixture.invite()
        fixture.clock.now = Date().addingTimeInterval(8 * 24 * 3600)
        let unknown = SecretToken.generate(.invitation).rawValue
        try await fixture.application().test(.router) { client in
            var answers: Set<String> = []
            for token in [unknown, expired, used, revoked, "not-even-a-token"] {
                try await client.execute(uri: "/invitations/\(token)", method: .get) { response in
                    #expect(response.status == .notFound)
                    answers.insert(text(response))
                }
            }
            #expect(answers.count == 1, "every unusable token gets the identical page")
        }
    }

    @Test("accepting needs a valid JWT, works once, and answers JSON or HTML by the Accept header")
    func accept() async throws {
        let fixture = try await Fixture()
        let token = try await fixture.invite()
        try await fixture.application().test(.router) { client in
            var json: HTTPFields = [.accept: "application/json"]
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: json) {
                #expect($0.status == .unauthorized)
            }
            json[.authorization] =
                "Bearer \(JWTVerifier(secret: "another-secret-0123456789abcdef01").sign(["sub": fixture.invitee.uuidString]))"
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: json) {
                #expect($0.status == .unauthorized, "a JWT signed with another secret is refused")
            }
            json[.authorization] = "Bearer \(fixture.jwt(for: fixture.invitee, expiresIn: -10))"
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: json) {
                #expect($0.status == .unauthorized, "an expired JWT is refused")
            }
            json[.authorization] = "Bearer \(fixture.jwt(for: fixture.invitee))"
            var twice = json
            twice[values: .authorization].append("Bearer \(fixture.jwt(for: fixture.invitee))")
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: twice) {
                #expect($0.status == .unauthorized, "two Authorization fields, even if each holds a good JWT")
            }
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: json) { response in
                #expect(response.status == .ok)
                #expect(text(response).contains("\"role\":\"partner\""))
            }
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: json) {
                #expect($0.status == .notFound, "a used token answers like any unusable one")
            }
            let second = try await fixture.invite("viewer")
            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            let stranger = try await fixture.repository.addUser(
                email: EmailAddress(rawValue: "sam@example.com")!, displayName: nil)
            try await client.execute(
                uri: "/invitations/\(second)/accept", method: .post, headers: form,
                body: ByteBuffer(string: "access_token=\(fixture.jwt(for: stranger.id))")
            ) { response in
                #expect(response.status == .ok)
                #expect(text(response).contains("Welcome to Olivia &amp; Paul &lt;3"))
            }
        }
        #expect(
            try await fixture.repository.role(couple: fixture.couple, user: fixture.invitee, as: .operator(label: "t"))
                == RoleName(rawValue: "partner"))
    }

    @Test("failed token attempts from one client are limited with 429")
    func rateLimit() async throws {
        let fixture = try await Fixture()
        let limiter = FailedAttemptLimiter(limit: 3, window: 60)
        try await fixture.application(limiter: limiter).test(.router) { client in
            for _ in 0..<3 {
                try await client.execute(uri: "/invitations/inv_guess", method: .get) {
                    #expect($0.status == .notFound)
                }
            }
            try await client.execute(uri: "/invitations/inv_guess", method: .get) { response in
                #expect(response.status == .tooManyRequests)
                #expect(response.headers[.retryAfter] == "60")
            }
        }
        #expect(!(await limiter.isBlocked("another client")), "other clients are not slowed")
    }

    @Test("the permission API needs a key, validates input and answers in order")
    func permissionAPI() async throws {
        let fixture = try await Fixture()
        let other = try await fixture.repository.createCouple(
            name: "Other", owner: fixture.invitee, as: .operator(label: "t")
        ).id
        try await fixture.application().test(.router) { client in
            let body = ByteBuffer(
                string: #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"budget.edit"}"#)
            try await client.execute(uri: "/v1/check", method: .post, body: body) { response in
                #expect(response.status == .unauthorized)
                #expect(text(response).contains("\"code\":\"unauthorized\""))
            }
            try await client.execute(
                uri: "/v1/check", method: .post, headers: [.authorization: "Bearer rbk_wrong"], body: body
            ) {
                #expect($0.status == .unauthorized)
            }
            var twice = fixture.keyHeader
            twice[values: .authorization].append("Bearer rbk_wrong")
            try await client.execute(uri: "/v1/check", method: .post, headers: twice, body: body) {
                #expect($0.status == .unauthorized, "two Authorization fields, even if one holds a good key")
            }
            try await client.execute(uri: "/v1/check", method: .post, headers: fixture.keyHeader, body: body) {
                response in
                #expect(response.status == .ok)
                #expect(text(response) == #"{"allowed":true,"revision":1}"#)
            }
            let cross = ByteBuffer(
                string: #"{"couple_id":"\#(other)","user_id":"\#(fixture.owner)","permission":"budget.edit"}"#)
            try await client.execute(uri: "/v1/check", method: .post, headers: fixture.keyHeader, body: cross) {
                #expect(text($0) == #"{"allowed":false,"revision":1}"#, "an owner of one couple has nothing in another")
            }
            for malformed in [
                "{not json", #"{"couple_id":"nope","user_id":"\#(fixture.owner)","permission":"budget.edit"}"#,
                // Text Foundation's UUID(uuidString:) would have read as another id.
                #"{"couple_id":" \#(fixture.couple.uuidString.dropFirst())","user_id":"\#(fixture.owner)","permission":"budget.edit"}"#,
                #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"'); drop table users; --"}"#,
            ] {
                try await client.execute(
                    uri: "/v1/check", method: .post, headers: fixture.keyHeader, body: ByteBuffer(string: malformed)
                ) {
                    #expect($0.status == .badRequest)
                    #expect(text($0).contains("\"code\":\"invalid_input\""))
                }
            }
            // Well formed, but no role grants it: refused, so that a typo in a backend is not taken for "no".
            let typo = #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"budget.edti"}"#
            for (uri, request) in [
                ("/v1/check", typo), ("/v1/check/batch", #"{"checks":[\#(String(buffer: body)),\#(typo)]}"#),
            ] {
                try await client.execute(
                    uri: uri, method: .post, headers: fixture.keyHeader, body: ByteBuffer(string: request)
                ) {
                    #expect($0.status == .badRequest)
                    #expect(
                        text($0).hasPrefix(
                            #"{"error":{"code":"invalid_input","message":"unknown permission \"budget.edti\"; valid permissions: audit.view, budget.edit"#
                        ), "\(text($0))")
                }
            }
            let huge = ByteBuffer(string: String(repeating: "x", count: 200_000))
            try await client.execute(uri: "/v1/check", method: .post, headers: fixture.keyHeader, body: huge) {
                #expect($0.status == .contentTooLarge)
            }
            let checks = [("budget.edit", fixture.couple), ("couple.delete", fixture.couple), ("budget.edit", other)]
                .map {
                    #"{"couple_id":"\#($0.1)","user_id":"\#(fixture.owner)","permission":"\#($0.0)"}"#
                }
            let batch = ByteBuffer(string: #"{"checks":[\#(checks.joined(separator: ","))]}"#)
            try await client.execute(uri: "/v1/check/batch", method: .post, headers: fixture.keyHeader, body: batch) {
                #expect(
                    text($0)
                        == #"{"results":[{"allowed":true,"revision":1},{"allowed":true,"revision":1},{"allowed":false,"revision":1}]}"#
                )
            }
            let tooMany = ByteBuffer(
                string: #"{"checks":[\#(Array(repeating: checks[0], count: 101).joined(separator: ","))]}"#)
            try await client.execute(uri: "/v1/check/batch", method: .post, headers: fixture.keyHeader, body: tooMany) {
                #expect($0.status == .badRequest)
            }
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)/members", method: .get, headers: fixture.keyHeader
            ) {
                #expect($0.status == .ok)
                #expect(text($0).contains("olivia@example.com"))
            }
            try await client.execute(uri: "/v1/couples/not-a-uuid/members", method: .get, headers: fixture.keyHeader) {
                #expect($0.status == .badRequest)
            }
            try await client.execute(uri: "/v1/couples/\(UUID())/members", method: .get, headers: fixture.keyHeader) {
                #expect($0.status == .notFound)
            }
            // A route the API does not have: 404, said as such.
            try await client.execute(uri: "/v1/nothing-here", method: .get, headers: fixture.keyHeader) {
                #expect($0.status == .notFound)
                #expect(text($0).contains(#""code":"not_found""#) && text($0).contains("no such route"))
            }
            // A method a route does not take: 405 with the methods it does, key or no key; OPTIONS lists them.
            let routes: [(String, HTTPRequest.Method, String)] = [
                ("/v1/check", .get, "POST, OPTIONS"), ("/v1/check", .delete, "POST, OPTIONS"),
                ("/health", .post, "GET, HEAD, OPTIONS"),
                ("/v1/couples/\(fixture.couple)/members", .put, "GET, HEAD, POST, OPTIONS"),
            ]
            for (uri, method, allow) in routes {
                try await client.execute(uri: uri, method: method) {
                    #expect($0.status == .methodNotAllowed, "\(method) \(uri)")
                    #expect($0.headers[.allow] == allow)
                    #expect(text($0).contains(#""code":"method_not_allowed""#), "\(text($0))")
                    #expect(text($0).contains("does not take \(method.rawValue); it takes \(allow)"))
                }
                try await client.execute(uri: uri, method: .options) {
                    #expect($0.status == .noContent && $0.headers[.allow] == allow)
                }
            }
            // HEAD wherever GET: the same status and headers, no body.
            try await client.execute(uri: "/health", method: .head) {
                #expect($0.status == .ok && $0.body.readableBytes == 0)
            }
        }
    }

    @Test("invitation tokens are redacted from logged paths")
    func redaction() {
        #expect(
            RequestLogMiddleware.redacted("/invitations/inv_secret/accept")
                == "/invitations/[redacted]/accept")
        #expect(
            RequestLogMiddleware.redacted("/invitations/inv_secret") == "/invitations/[redacted]")
        #expect(RequestLogMiddleware.redacted("/v1/check") == "/v1/check")
    }
}
