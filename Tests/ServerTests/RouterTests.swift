import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import InMemoryRepositories
import Logging
import Secrets
import Synchronization
import TestSupport
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
    let tokens = TokenVerifier(secret: .hmac(secret: Array(Fixture.secret.utf8)))
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

    func application(
        limiter: FailedAttemptLimiter = FailedAttemptLimiter(), signIn: OpenIDSignIn? = nil,
        browserOrigins: BrowserOrigins = .none, logger: Logger? = nil
    ) -> some ApplicationProtocol {
        Application(
            router: buildRouter(dependencies(limiter: limiter, signIn: signIn, browserOrigins: browserOrigins)),
            logger: logger)
    }

    func dependencies(
        limiter: FailedAttemptLimiter = FailedAttemptLimiter(), signIn: OpenIDSignIn? = nil,
        browserOrigins: BrowserOrigins = .none
    ) -> ServerDependencies {
        ServerDependencies(
            repository: repository, keys: keys, tokens: tokens, signIn: signIn,
            publicBaseURL: URL(string: "https://rbac.test")!, limiter: limiter, browserOrigins: browserOrigins,
            budgets: InMemoryBudgetRepository(), isReady: { true })
    }

    func invite(_ role: String = "partner", email: String? = nil) async throws -> String {
        try await invitations.invite(
            to: couple, role: RoleName(rawValue: role)!, email: email.flatMap(EmailAddress.init(rawValue:)),
            as: .user(owner)
        ).token.rawValue
    }

    func jwt(for user: UUID, expiresIn: TimeInterval = 600) -> String { Self.jwt(for: user, expiresIn: expiresIn) }

    static func jwt(for user: UUID, expiresIn: TimeInterval = 600) -> String {
        DevelopmentTokens.sign(
            ["sub": user.uuidString.lowercased(), "exp": Date().timeIntervalSince1970 + expiresIn], secret: secret)
    }

    var keyHeader: HTTPFields { [.authorization: "Bearer \(apiKey)"] }

    /// The key, for a request a backend makes for `user` (`X-Acting-User`).
    func keyHeader(actingAs user: UUID) -> HTTPFields { Self.keyHeader(apiKey, actingAs: user) }

    static func keyHeader(_ key: String, actingAs user: UUID) -> HTTPFields {
        [.authorization: "Bearer \(key)", .actingUser: user.uuidString]
    }

    /// The key, with the owner as the acting user where `operation` (`POST /v1/couples`) takes one.
    func keyHeader(for operation: String) -> HTTPFields { Self.keyHeader(apiKey, for: operation, owner: owner) }

    static func keyHeader(_ key: String, for operation: String, owner: UUID) -> HTTPFields {
        DocumentedRequests.operations[operation]?.actsForUser == true
            ? keyHeader(key, actingAs: owner) : [.authorization: "Bearer \(key)"]
    }

    /// A new user, `name@example.com`.
    @discardableResult
    func user(_ name: String, displayName: String? = nil) async throws -> UUID {
        try await repository.addUser(email: EmailAddress(rawValue: "\(name)@example.com")!, displayName: displayName).id
    }

    /// A new user `name@example.com` made a member of the couple with `role`, as `actor`.
    @discardableResult
    func member(_ name: String, _ role: String, as actor: Actor = .operator(label: "tests")) async throws
        -> Membership
    {
        try await repository.grant(
            couple: couple, user: try await user(name), role: RoleName(rawValue: role)!, as: actor)
    }
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
                    let policy = response.headers[.contentSecurityPolicy] ?? ""
                    #expect(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"))
                    let page = text(response)
                    #expect(
                        page.contains(#"<bdi id="couple">Olivia &amp; Paul &lt;3</bdi>"#),
                        "the couple's name, HTML-escaped and isolated")
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
            let forged = DevelopmentTokens.sign(
                ["sub": fixture.invitee.uuidString, "exp": Date().timeIntervalSince1970 + 600],
                secret: "another-secret-0123456789abcdef01")
            json[.authorization] = "Bearer \(forged)"
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: json) {
                #expect($0.status == .unauthorized, "a JWT signed with another secret is refused")
            }
            json[.authorization] = "Bearer \(fixture.jwt(for: fixture.invitee, expiresIn: -61))"
            try await client.execute(uri: "/invitations/\(token)/accept", method: .post, headers: json) {
                #expect($0.status == .unauthorized, "a JWT expired past the leeway is refused")
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
            let stranger = try await fixture.user("sam")
            try await client.execute(
                uri: "/invitations/\(second)/accept", method: .post, headers: form,
                body: ByteBuffer(string: "access_token=\(fixture.jwt(for: stranger))")
            ) { response in
                #expect(response.status == .ok)
                #expect(text(response).contains("Welcome to <bdi>Olivia &amp; Paul &lt;3</bdi>"))
            }
            // The media type in another case, with a parameter: still the form; a longer name is not.
            let third = try await fixture.invite("viewer")
            let tia = try await fixture.user("tia")
            for (type, status) in [
                ("application/x-www-form-urlencodedx", HTTPResponse.Status.unauthorized),
                ("Application/X-WWW-Form-URLEncoded; charset=UTF-8", .ok),
            ] {
                try await client.execute(
                    uri: "/invitations/\(third)/accept", method: .post, headers: [.contentType: type],
                    body: ByteBuffer(string: "access_token=\(fixture.jwt(for: tia))")
                ) { #expect($0.status == status, "\(type)") }
            }
            // A form labelled gzip is refused as a JSON body is, on the page and in JSON; the link still works.
            let fourth = try await fixture.invite("viewer")
            let uma = try await fixture.user("uma")
            for accept in ["text/html", "application/json"] {
                try await client.execute(
                    uri: "/invitations/\(fourth)/accept", method: .post,
                    headers: [
                        .contentType: "application/x-www-form-urlencoded", .contentEncoding: "gzip", .accept: accept,
                    ],
                    body: ByteBuffer(string: "access_token=\(fixture.jwt(for: uma))")
                ) { response in
                    #expect(response.status == .unsupportedMediaType, "\(accept)")
                    #expect(response.headers[.acceptEncoding] == "identity")
                    #expect(text(response).contains("without Content-Encoding"), "\(accept)")
                }
            }
            try await client.execute(
                uri: "/invitations/\(fourth)/accept", method: .post, headers: form,
                body: ByteBuffer(string: "access_token=\(fixture.jwt(for: uma))")
            ) { #expect($0.status == .ok) }
        }
        #expect(
            try await fixture.repository.role(couple: fixture.couple, user: fixture.invitee, as: .operator(label: "t"))
                == RoleName(rawValue: "partner"))
    }

    @Test("a couple's name that raw SQL gave an override is isolated in the page, and escaped in its title")
    func pageIsolatesNames() throws {
        let preview = InvitationPreview(
            coupleID: UUID(), coupleName: "Ann\u{202E}naD", role: try #require(RoleName(rawValue: "viewer")),
            inviter: "Olivia", emailHint: nil, expiresAt: Date(), status: .pending)
        let page = InvitationPage.pending(preview, token: "inv_x", signIn: false)
        #expect(page.contains(#"<title>Join Ann\u{202E}naD</title>"#))
        #expect(page.contains("<bdi id=\"couple\">Ann\u{202E}naD</bdi>"))
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
            try await client.execute(uri: "/v1/invitations/inv_guess", method: .get) { response in
                #expect(response.status == .tooManyRequests && response.headers[.retryAfter] == "60")
                #expect(response.headers[.cacheControl] == "no-store")
                #expect(response.headers[.init("Referrer-Policy")!] == "no-referrer")
                #expect(response.headers[.contentType] == "application/json; charset=utf-8")
                #expect(
                    String(buffer: response.body)
                        == #"{"error":{"code":"too_many_attempts","message":"too many invalid invitation links; wait a minute"}}"#
                )
            }
        }
        #expect(!(await limiter.isBlocked("another client")), "other clients are not slowed")
    }

    @Test("a valid token is answered from an address that used up its failures; invalid ones get 429")
    func validTokenNeverLimited() async throws {
        let fixture = try await Fixture()
        let token = try await fixture.invite()
        let limiter = FailedAttemptLimiter(limit: 3, window: 60)
        try await fixture.application(limiter: limiter).test(.router) { client in
            for _ in 0..<4 { try await client.execute(uri: "/invitations/inv_guess", method: .get) { _ in } }
            try await client.execute(uri: "/invitations/\(token)", method: .get) { #expect($0.status == .ok) }
            try await client.execute(
                uri: "/invitations/\(token)/accept", method: .post,
                headers: [.authorization: "Bearer \(fixture.jwt(for: fixture.invitee))", .accept: "application/json"]
            ) { #expect($0.status == .ok) }
            try await client.execute(uri: "/invitations/inv_guess/accept", method: .post) {
                #expect($0.status == .unauthorized, "no JWT: not a token failure")
            }
            try await client.execute(
                uri: "/invitations/\(token)/accept", method: .post,
                headers: [.authorization: "Bearer \(fixture.jwt(for: fixture.invitee))", .accept: "application/json"]
            ) { #expect($0.status == .tooManyRequests, "a used token is a failure like any other") }
        }
    }

    /// The answers to `times` requests for an invalid invitation link.
    static func statuses(_ client: some TestClientProtocol, _ headers: HTTPFields, times: Int) async throws
        -> [HTTPResponse.Status]
    {
        var statuses: [HTTPResponse.Status] = []
        for _ in 0..<times {
            statuses.append(
                try await client.execute(uri: "/invitations/inv_guess", method: .get, headers: headers) { $0.status })
        }
        return statuses
    }

    /// A client's own claim, and what a proxy appended.
    static func forwarded(_ address: String) -> HTTPFields {
        [.init("X-Forwarded-For")!: "203.0.113.9, \(address)"]
    }

    @Test("/metrics answers the clients --metrics-from names, as a trusted proxy tells them; others get 403")
    func metricsClients() async throws {
        let fixture = try await Fixture()
        func statuses(clients: [String], proxies: [String] = [], forwardedFor: String? = nil) async throws
            -> (HTTPResponse.Status, String)
        {
            let app = Application(
                router: buildRouter(
                    ServerDependencies(
                        repository: fixture.repository, keys: fixture.keys, tokens: fixture.tokens,
                        publicBaseURL: URL(string: "https://rbac.test")!,
                        trustedProxies: try TrustedProxies(parsing: proxies), budgets: InMemoryBudgetRepository(),
                        metricsClients: try AddressRanges(parsing: clients), isReady: { true })),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            let headers: HTTPFields = forwardedFor.map { [.init("X-Forwarded-For")!: $0] } ?? [:]
            return try await app.test(.live) { client in
                try await client.execute(uri: "/metrics", method: .get, headers: headers) { ($0.status, text($0)) }
            }
        }
        #expect(try await statuses(clients: ["127.0.0.0/8", "::1"]).0 == .ok, "this machine")
        let refused = try await statuses(clients: ["10.0.0.0/8"])
        #expect(refused.0 == .forbidden)
        #expect(
            refused.1.contains(#""code":"permission_denied""#) && refused.1.contains("--metrics-from")
                && !refused.1.contains("127.0.0.1"), "\(refused.1)")
        // Behind a trusted proxy, the client it forwards for is asked about, never the proxy.
        #expect(try await statuses(clients: ["10.0.0.0/8"], proxies: ["127.0.0.1"], forwardedFor: "10.1.2.3").0 == .ok)
        let forwarded = try await statuses(
            clients: ["127.0.0.0/8"], proxies: ["127.0.0.1"], forwardedFor: "203.0.113.9")
        #expect(forwarded.0 == .forbidden)
        // Without a trusted proxy, a client's own header names no one.
        #expect(try await statuses(clients: ["10.0.0.0/8"], forwardedFor: "10.1.2.3").0 == .forbidden)
    }

    @Test("behind a trusted proxy, each forwarded client has its own limit; others' forwarding headers are ignored")
    func trustedProxy() async throws {
        let fixture = try await Fixture()
        let limiter = FailedAttemptLimiter(limit: 2, window: 60)
        func app(trusting proxies: [String], header: TrustedProxies.Header = .xForwardedFor) throws
            -> some ApplicationProtocol
        {
            Application(
                router: buildRouter(
                    ServerDependencies(
                        repository: fixture.repository, keys: fixture.keys, tokens: fixture.tokens,
                        publicBaseURL: URL(string: "https://rbac.test")!, limiter: limiter,
                        trustedProxies: try TrustedProxies(parsing: proxies, header: header),
                        budgets: InMemoryBudgetRepository(), isReady: { true })),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        }
        // A client's own Forwarded header, which a proxy that writes X-Forwarded-For passes on.
        let claimed: HTTPFields = [
            .init("X-Forwarded-For")!: "203.0.113.9, 198.51.100.5", .init("Forwarded")!: "for=198.51.100.6",
        ]
        let proxied = try await app(trusting: ["127.0.0.0/8"]).test(.live) { client in
            [
                try await Self.statuses(client, Self.forwarded("198.51.100.1"), times: 3),
                try await Self.statuses(client, Self.forwarded("198.51.100.2"), times: 1),
                try await Self.statuses(client, claimed, times: 3),
            ]
        }
        #expect(
            proxied == [
                [.notFound, .notFound, .tooManyRequests], [.notFound], [.notFound, .notFound, .tooManyRequests],
            ])
        #expect(await limiter.isBlocked("198.51.100.1"))
        #expect(await limiter.isBlocked("198.51.100.5"))
        #expect(!(await limiter.isBlocked("203.0.113.9")), "the client's own claim, left of the proxy's, is not taken")
        #expect(!(await limiter.isBlocked("198.51.100.6")), "nor the header the proxy does not write")
        // Proxies that write Forwarded: its for= names the client, and X-Forwarded-For is the client's own.
        let rfc7239: HTTPFields = [
            .init("X-Forwarded-For")!: "198.51.100.7", .init("Forwarded")!: #"for="[2001:db8::1]:4711";proto=https"#,
        ]
        let forwarded = try await app(trusting: ["127.0.0.0/8"], header: .forwarded).test(.live) { client in
            try await Self.statuses(client, rfc7239, times: 3)
        }
        #expect(forwarded == [.notFound, .notFound, .tooManyRequests])
        #expect(await limiter.isBlocked("2001:db8::1"))
        #expect(!(await limiter.isBlocked("198.51.100.7")))
        // Not from a trusted proxy: the headers name no one, and the peer is limited.
        let direct = try await app(trusting: ["10.0.0.0/8"]).test(.live) { client in
            [
                try await Self.statuses(client, Self.forwarded("198.51.100.3"), times: 3),
                try await Self.statuses(client, Self.forwarded("198.51.100.4"), times: 1),
            ]
        }
        #expect(direct == [[.notFound, .notFound, .tooManyRequests], [.tooManyRequests]])
        #expect(await limiter.isBlocked("127.0.0.1"))
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
            // A check the fast path found the database unable to answer: 503 before the key is looked up again.
            for key in ["Bearer \(fixture.apiKey)", "Bearer rbk_wrong"] {
                let marked: HTTPFields = [.authorization: key, CheckAnswer.unavailable: "1"]
                try await client.execute(uri: "/v1/check", method: .post, headers: marked, body: body) {
                    #expect($0.status == .serviceUnavailable, "\(key)")
                }
            }
            // The scheme's name in any case, then one space or more (RFC 6750, 2.1); anything else before the key
            // is no bearer credential.
            for (scheme, status) in [
                ("bearer ", HTTPResponse.Status.ok), ("BEARER ", .ok), ("Bearer  ", .ok), ("Bearer   ", .ok),
                ("Bearer", .unauthorized), ("Basic ", .unauthorized), ("Bearers ", .unauthorized),
                ("Bearer\t", .unauthorized),
            ] {
                try await client.execute(
                    uri: "/v1/check", method: .post, headers: [.authorization: scheme + fixture.apiKey], body: body
                ) {
                    #expect($0.status == status, "\(scheme.debugDescription)")
                }
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
            // A permission of another shape (or over 100 characters) is refused as the document's pattern says.
            for permission in ["Budget.Edit", "a." + String(repeating: "b", count: 99)] {
                let request =
                    #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"\#(permission)"}"#
                try await client.execute(
                    uri: "/v1/check", method: .post, headers: fixture.keyHeader, body: ByteBuffer(string: request)
                ) {
                    #expect($0.status == .badRequest)
                    #expect(
                        text($0).hasSuffix(
                            #"is not a permission (area.action, e.g. budget.edit; at most 100 characters)"}}"#),
                        "\(text($0))")
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
            // A method a route does not take: 405 with the methods it does, key or no key; OPTIONS lists them. So
            // for methods no route takes.
            let routes: [(String, HTTPRequest.Method, String)] = [
                ("/v1/check", .get, "POST, OPTIONS"), ("/v1/check", .delete, "POST, OPTIONS"),
                ("/health", .post, "GET, HEAD, OPTIONS"),
                ("/v1/couples/\(fixture.couple)/members", .put, "GET, HEAD, POST, OPTIONS"),
                ("/health", .init("PURGE")!, "GET, HEAD, OPTIONS"), ("/v1/check", .trace, "POST, OPTIONS"),
                ("/v1/couples/\(fixture.couple)/members/\(fixture.owner)", .init("QUERY")!, "DELETE, OPTIONS"),
                ("/invitations/inv_x/accept/", .init("LINK")!, "POST, OPTIONS"),
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
            try await client.execute(uri: "/v1/nothing-here", method: .init("PURGE")!) {
                #expect($0.status == .notFound && text($0).contains("no such route"))
            }
            // HEAD wherever GET: the same status and headers, no body.
            try await client.execute(uri: "/health", method: .head) {
                #expect($0.status == .ok && $0.body.readableBytes == 0)
            }
        }
    }

    @Test("OPTIONS * answers for the server: every method some route takes; no other method takes *")
    func serverWideOptions() async throws {
        let fixture = try await Fixture()
        let answers = try await CheckAnswerDifferentialTests.serving(fixture.dependencies()) { port in
            var answers: [CheckAnswerDifferentialTests.RawResponse] = []
            for method in ["OPTIONS", "GET", "POST"] {
                answers += try await CheckAnswerDifferentialTests.exchange(
                    port: port, Array("\(method) * HTTP/1.1\r\nHost: rbac.test\r\n\r\n".utf8), responses: 1)
            }
            return answers
        }
        #expect(
            answers.map(\.statusLine) == [
                "HTTP/1.1 204 No Content", "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request",
            ])
        #expect(answers[0].headers.contains("Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"), "\(answers[0])")
        #expect(String(decoding: answers[1].body, as: UTF8.self).contains("the request target * is for OPTIONS alone"))
    }

    @Test("a JSON route refuses a body of another type or content coding with 415, and takes JSON however spelled")
    func contentTypes() async throws {
        let fixture = try await Fixture()
        let body = ByteBuffer(
            string: #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"budget.edit"}"#)
        try await fixture.application().test(.router) { client in
            for type in ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", "multipart/form-data"]
            {
                var headers = fixture.keyHeader
                headers[.contentType] = type
                for uri in ["/v1/check", "/v1/couples/\(fixture.couple)/members"] {
                    try await client.execute(uri: uri, method: .post, headers: headers, body: body) { response in
                        #expect(response.status == .unsupportedMediaType, "\(type) \(uri)")
                        #expect(text(response).contains(#""code":"unsupported_media_type""#))
                    }
                }
            }
            for type in ["application/json", "Application/JSON; charset=utf-8", "application/vnd.rbac+json", nil] {
                var headers = fixture.keyHeader
                headers[.contentType] = type
                try await client.execute(uri: "/v1/check", method: .post, headers: headers, body: body) {
                    #expect($0.status == .ok, "\(type ?? "no Content-Type")")
                }
            }
            // A plain body labelled gzip: a gateway that decodes it would see another request than this service.
            for coding in ["gzip", "deflate", "identity, gzip", " Identity "] {
                var headers = fixture.keyHeader
                headers[.contentEncoding] = coding
                for uri in ["/v1/check", "/v1/couples/\(fixture.couple)/members"] {
                    try await client.execute(uri: uri, method: .post, headers: headers, body: body) { response in
                        if coding == " Identity " {
                            #expect(response.status != .unsupportedMediaType, "the body as it is: \(uri)")
                        } else {
                            #expect(response.status == .unsupportedMediaType, "\(coding) \(uri)")
                            #expect(text(response).contains("without Content-Encoding"))
                            #expect(response.headers[.acceptEncoding] == "identity")
                        }
                    }
                }
            }
        }
    }

    @Test("users are listed by address a page at a time, or those a search finds; bad input is a 400")
    func usersListed() async throws {
        let fixture = try await Fixture()
        try await fixture.user("pia", displayName: "Pia Alvarez")
        try await fixture.application().test(.router) { client in
            func users(_ query: String, _ headers: HTTPFields) async throws -> (HTTPResponse.Status, [String: Any]) {
                try await client.execute(uri: "/v1/users\(query)", method: .get, headers: headers) { response in
                    let body = try? JSONSerialization.jsonObject(with: Data(buffer: response.body))
                    return (response.status, body as? [String: Any] ?? [:])
                }
            }
            func emails(_ body: [String: Any]) -> [String] {
                (body["users"] as? [[String: Any]] ?? []).compactMap { $0["email"] as? String }
            }
            let (status, all) = try await users("", fixture.keyHeader)
            #expect(status == .ok)
            #expect(emails(all) == ["olivia@example.com", "paul@example.com", "pia@example.com"])
            let (_, found) = try await users("?search=ALVAREZ", fixture.keyHeader)
            #expect(emails(found) == ["pia@example.com"], "by name, whatever its case")
            // A query is read as forms write it: `+` is a space, `%2B` a plus.
            for (query, expected) in [
                ("pia+alvarez", ["pia@example.com"]), ("pia%20alv", ["pia@example.com"]),
                ("pia%2Balvarez", []),
            ] {
                #expect(emails(try await users("?search=\(query)", fixture.keyHeader).1) == expected, "\(query)")
            }
            for malformed in ["?search=100%", "?search=%zz", "?search=%C0%AF", "?%FF=1"] {
                let (status, body) = try await users(malformed, fixture.keyHeader)
                #expect(status == .badRequest, "\(malformed)")
                let message = (body["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains("not percent-encoded UTF-8"), "\(malformed): \(message)")
                #expect(!message.contains("%"), "names the parameter, never its value: \(message)")
            }
            let (_, first) = try await users("?limit=2", fixture.keyHeader)
            #expect(emails(first) == ["olivia@example.com", "paul@example.com"])
            let next = try #require(first["next_after"] as? String)
            // The user the page ended at is deleted before the next is read: next_after keeps their place.
            try await fixture.repository.deleteUser(fixture.invitee, as: .operator(label: "t"))
            let (_, rest) = try await users("?limit=2&after=\(next)", fixture.keyHeader)
            #expect(emails(rest) == ["pia@example.com"])
            #expect(rest["next_after"] is NSNull || rest["next_after"] == nil, "a page that is not full ends it")
            let nul = "\(fixture.owner).\(Base64URL.encode(Array(#"["a\u0000"]"#.utf8)))"
            // 200 characters as PostgreSQL and openapi.json's maxLength count them (code points), however few
            // letters they draw: an e with its accent apart is two.
            let accented = String(repeating: "e%CC%81", count: 100)
            #expect(try await users("?search=\(accented)", fixture.keyHeader).0 == .ok)
            for query in [
                "?search=", "?search=\(String(repeating: "a", count: 201))", "?search=\(accented)a", "?limit=0",
                "?after=x", "?after=\(nul)",
            ] {
                #expect(try await users(query, fixture.keyHeader).0 == .badRequest, "\(query)")
            }
            #expect(try await users("", [:]).0 == .unauthorized)
        }
    }

    @Test("a route that answers for the service key alone refuses X-Acting-User; one that acts for a user takes it")
    func actingUserOnlyWhereTaken() async throws {
        let fixture = try await Fixture()
        let check = #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"budget.edit"}"#
        let serviceKeyAlone: [(HTTPRequest.Method, String, String?)] = [
            (.post, "/v1/check", check), (.post, "/v1/check/batch", #"{"checks":[\#(check)]}"#),
            (.get, "/v1/users", nil), (.get, "/v1/users/\(fixture.owner)", nil),
            (.get, "/v1/users/\(fixture.owner)/couples", nil), (.get, "/v1/couples/\(fixture.couple)/members", nil),
            (.get, "/v1/couples/\(fixture.couple)/users/\(fixture.owner)/permissions", nil),
        ]
        try await fixture.application().test(.router) { client in
            for (method, uri, body) in serviceKeyAlone {
                let body = body.map { ByteBuffer(string: $0) }
                try await client.execute(uri: uri, method: method, headers: fixture.keyHeader, body: body) {
                    #expect($0.status == .ok, "\(uri) without the header")
                }
                try await client.execute(
                    uri: uri, method: method, headers: fixture.keyHeader(actingAs: fixture.invitee), body: body
                ) {
                    #expect($0.status == .badRequest, "\(uri)")
                    #expect(text($0).contains(#""message":"this request takes no X-Acting-User"#), "\(text($0))")
                }
            }
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)", method: .get, headers: fixture.keyHeader(actingAs: fixture.owner)
            ) { #expect($0.status == .ok) }
            try await client.execute(
                uri: "/v1/check", method: .post, headers: [.actingUser: fixture.owner.uuidString],
                body: ByteBuffer(string: check)
            ) { #expect($0.status == .unauthorized, "the key is asked for first") }
        }
    }

    @Test("an id in the path and X-Acting-User are refused before the body is read")
    func pathAndHeaderBeforeBody() async throws {
        let fixture = try await Fixture()
        let couple = "/v1/couples/\(fixture.couple)"
        var twice = fixture.keyHeader(actingAs: fixture.owner)
        twice[values: .actingUser] = [fixture.owner.uuidString, fixture.owner.uuidString]
        var actingAsNobody = fixture.keyHeader
        actingAsNobody[.actingUser] = "nobody"
        let refusals: [(HTTPRequest.Method, String, HTTPFields, String)] = [
            (
                .post, "/v1/couples/nope/budget/scenarios", fixture.keyHeader(actingAs: fixture.owner),
                "couple id must be a UUID"
            ),
            (
                .patch, "\(couple)/budget/scenarios/nope", fixture.keyHeader(actingAs: fixture.owner),
                "scenario id must be a UUID"
            ),
            (.post, "\(couple)/members", fixture.keyHeader, "X-Acting-User must name the user this request acts for"),
            (.patch, "/v1/users/\(fixture.owner)", twice, "send one X-Acting-User, not 2"),
            (.post, "\(couple)/invitations", actingAsNobody, "X-Acting-User must be a UUID"),
        ]
        try await fixture.application().test(.router) { client in
            for (method, uri, headers, message) in refusals {
                try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: "{")) {
                    #expect($0.status == .badRequest, "\(uri)")
                    #expect(text($0).contains(#""message":"\#(message)"#), "\(uri): \(text($0))")
                }
            }
            // With its path and headers right, the same body is what is refused.
            try await client.execute(
                uri: "\(couple)/members", method: .post, headers: fixture.keyHeader(actingAs: fixture.owner),
                body: ByteBuffer(string: "{")
            ) { #expect(text($0).contains("the body is not JSON"), "\(text($0))") }
        }
    }

    @Test("a body that does not fit is a 400 naming the key at fault and what it takes, on every route alike")
    func bodyMisfitsNamed() async throws {
        let fixture = try await Fixture()
        let check = #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"budget.edit"}"#
        let number = "the body holds a number its field cannot take: a fraction where a whole number belongs, or one"
        let invitations = "/v1/couples/\(fixture.couple)/invitations"
        let misfits: [(String, HTTPFields, String, String)] = [
            (
                "/v1/check/batch", fixture.keyHeader,
                #"{"checks":[\#(check),{"couple_id":"x","user_id":"y","permission":5}]}"#,
                "checks[1].permission must be a string"
            ),
            (
                "/v1/check/batch", fixture.keyHeader, #"{"checks":[{"couple_id":"x","permission":"p"}]}"#,
                #"the body lacks \"checks[0].user_id\""#
            ),
            (
                "/v1/check", fixture.keyHeader, #"{"couple_id":"x","user_id":null,"permission":"p"}"#,
                "user_id must be a string"
            ),
            ("/v1/check/batch", fixture.keyHeader, #"{"checks":{}}"#, "checks must be an array"),
            ("/v1/check/batch", fixture.keyHeader, #"{"checks":[1]}"#, "checks[0] must be an object"),
            ("/v1/check/batch", fixture.keyHeader, "[]", "the body must be an object"),
            (
                invitations, fixture.keyHeader(actingAs: fixture.owner),
                #"{"role":"viewer","expires_in_seconds":"60"}"#,
                "expires_in_seconds must be a whole number"
            ),
            (
                invitations, fixture.keyHeader(actingAs: fixture.owner),
                #"{"role":"viewer","expires_in_seconds":3600.5}"#,
                number
            ),
            (
                invitations, fixture.keyHeader(actingAs: fixture.owner),
                #"{"role":"viewer","expires_in_seconds":1e30}"#,
                number
            ),
            (
                // Foundation would read it as 0.
                invitations, fixture.keyHeader(actingAs: fixture.owner),
                #"{"role":"viewer","expires_in_seconds":1e-400}"#,
                "the body holds a number with a digit out of the places 1e-128 to 1e127 at byte 39, which would not be "
                    + "read as written"
            ),
        ]
        try await fixture.application().test(.router) { client in
            for (uri, headers, body, message) in misfits {
                try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body)) {
                    #expect($0.status == .badRequest, "\(body)")
                    #expect(
                        text($0).hasPrefix(#"{"error":{"code":"invalid_input","message":"\#(message)"#),
                        "\(body): \(text($0))")
                }
            }
        }
        #expect(try await fixture.invitations.invitations(of: fixture.couple, as: .user(fixture.owner)).isEmpty)
    }

    @Test("a min_revision the couple has not reached is a 400 that says so")
    func minRevisionAhead() async throws {
        let fixture = try await Fixture()
        let check = { @Sendable (revision: Int) in
            ByteBuffer(
                string:
                    #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"budget.edit","min_revision":\#(revision)}"#
            )
        }
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/v1/check", method: .post, headers: fixture.keyHeader, body: check(1)) {
                #expect($0.status == .ok)
            }
            try await client.execute(uri: "/v1/check", method: .post, headers: fixture.keyHeader, body: check(2)) {
                #expect($0.status == .badRequest)
                #expect(
                    text($0)
                        == #"{"error":{"code":"invalid_input","message":"min_revision 2 is ahead of the couple's revision 1; pass a revision a write returned"}}"#
                )
            }
            let batch = ByteBuffer(string: #"{"checks":[\#(String(buffer: check(1))),\#(String(buffer: check(9)))]}"#)
            try await client.execute(uri: "/v1/check/batch", method: .post, headers: fixture.keyHeader, body: batch) {
                #expect($0.status == .badRequest)
            }
        }
    }

    @Test("the service's 503s are logged once, with the reason the client was given, not once each")
    func unavailabilityLoggedOnce() async throws {
        let fixture = try await Fixture()
        let lines = LineLogHandlerTests.Lines()
        let dependencies = ServerDependencies(
            repository: fixture.repository, keys: fixture.keys, tokens: fixture.tokens,
            publicBaseURL: URL(string: "https://rbac.test")!, budgets: InMemoryBudgetRepository(),
            isReady: { false })
        let app = Application(
            router: buildRouter(dependencies),
            logger: Logger(label: "rbac") { LineLogHandler(label: $0, stream: lines) })
        let statuses = try await app.test(.router) { client in
            var statuses: [HTTPResponse.Status] = []
            for uri in ["/ready", "/ready", "/health", "/ready"] {
                statuses.append(try await client.execute(uri: uri, method: .get) { $0.status })
            }
            return statuses
        }
        #expect(statuses == [.serviceUnavailable, .serviceUnavailable, .ok, .serviceUnavailable])
        let written = lines.written.withLock { $0 }
        #expect(written.count == 1, "\(written)")
        #expect(
            written.first?.contains(" error rbac: ") == true
                && written.first?.contains("requests fail with 503") == true)
        #expect(written.first?.contains("reason=the database is unavailable; try again shortly") == true)
    }

    @Test("while 503s and successes mix, one line says they began; a success once none has come for a while, another")
    func unavailabilityEndsQuietly() async throws {
        let clock = SteppedClock()
        let available = Atomic<Bool>(false)
        let lines = LineLogHandlerTests.Lines()
        let router = Router(context: AppRequestContext.self)
        router.add(middleware: APIErrorMiddleware(failures: FailureLog(now: { clock.now })))
        router.get("budget") { _, _ -> String in
            guard available.load(ordering: .relaxed) else {
                throw CollaborationError(
                    .unavailable, "cannot reach part of the database", detail: "connection to 10.0.0.5:5432 failed")
            }
            return "ok"
        }
        router.get("health") { _, _ in "ok" }
        let quiet = FailureLog.quietPeriod
        // (answered, path, time passed before it, what it logs)
        let steps: [(Bool, String, Duration, String?)] = [
            (false, "/budget", .zero, "error"), (true, "/budget", .zero, nil), (false, "/budget", .zero, nil),
            (true, "/budget", quiet - .seconds(1), nil), (true, "/health", .seconds(1), nil),
            (true, "/budget", .zero, "notice"), (true, "/budget", .zero, nil), (false, "/budget", .zero, "error"),
            (false, "/budget", quiet, nil), (true, "/budget", quiet - .milliseconds(1), nil),
            (true, "/budget", .milliseconds(1), "notice"),
        ]
        let app = Application(
            router: router, logger: Logger(label: "rbac") { LineLogHandler(label: $0, stream: lines) })
        try await app.test(.router) { client in
            for (index, (up, path, wait, logs)) in steps.enumerated() {
                clock.advance(wait)
                available.store(up, ordering: .relaxed)
                let before = lines.written.withLock { $0.count }
                let (status, body) = try await client.execute(uri: path, method: .get) {
                    ($0.status, String(buffer: $0.body))
                }
                #expect(status == (up ? .ok : .serviceUnavailable), "step \(index)")
                #expect(!body.contains("10.0.0.5"), "the detail is the operator's: \(body)")
                let logged = lines.written.withLock { Array($0[before...]) }
                #expect(
                    logged.map { $0.drop { $0 != " " }.prefix { $0 != ":" } } == logs.map { [" \($0) rbac"] } ?? [],
                    "step \(index): \(logged)")
            }
        }
        let first = lines.written.withLock { $0 }.first ?? ""
        #expect(first.contains("reason=cannot reach part of the database"), "\(first)")
        #expect(first.contains("detail=connection to 10.0.0.5:5432 failed"), "\(first)")
    }

    @Test("invitation tokens and service keys are redacted from logged paths")
    func redaction() {
        #expect(
            RequestLogMiddleware.redacted("/invitations/inv_secret/accept")
                == "/invitations/[redacted]/accept")
        #expect(
            RequestLogMiddleware.redacted("/invitations/inv_secret") == "/invitations/[redacted]")
        #expect(RequestLogMiddleware.redacted("/v1/invitations/secret") == "/v1/invitations/[redacted]")
        #expect(RequestLogMiddleware.redacted("/elsewhere/inv_secret/x") == "/elsewhere/[redacted]/x")
        #expect(RequestLogMiddleware.redacted("/v1/couples/rbk_secret") == "/v1/couples/[redacted]")
        #expect(RequestLogMiddleware.redacted("/v1/check") == "/v1/check")
        let invitation = "/v1/couples/\(UUID())/invitations/\(UUID())/resend"
        #expect(RequestLogMiddleware.redacted(invitation) == invitation, "an invitation's id is no secret")
    }

    @Test("no route that takes an invitation token writes it to the log, nor does a path no route takes")
    func tokensNeverLogged() async throws {
        let fixture = try await Fixture()
        let token = try await fixture.invite("viewer")
        let lines = LineLogHandlerTests.Lines()
        var logger = Logger(label: "rbac") { LineLogHandler(label: $0, stream: lines) }
        logger.logLevel = .trace
        let app = fixture.application(logger: logger)
        // Every route of the OpenAPI document with a token in its path, by each method it documents.
        let document = try #require(
            try JSONSerialization.jsonObject(with: try openAPIDocument()) as? [String: Any])
        let routes: [(path: String, method: HTTPRequest.Method)] = try #require(
            document["paths"] as? [String: [String: Any]]
        ).filter { $0.key.contains("{token}") }.flatMap { path, operations in
            operations.keys.compactMap { HTTPRequest.Method($0.uppercased()) }.map { (path, $0) }
        }
        #expect(routes.count >= 4, "\(routes)")
        try await app.test(.router) { client in
            for (path, method) in routes {
                try await client.execute(uri: path.replacingOccurrences(of: "{token}", with: token), method: method) {
                    _ in
                }
            }
            try await client.execute(uri: "/nowhere/\(token)", method: .get) { #expect($0.status == .notFound) }
        }
        let written = lines.written.withLock { $0 }
        #expect(written.count >= routes.count + 1, "one line a request at debug level")
        #expect(!written.contains { $0.contains(token.dropFirst(4)) }, "\(written)")
    }
}
