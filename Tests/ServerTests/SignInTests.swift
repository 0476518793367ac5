import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import Logging
import OutboundHTTP
import Postgres
import Secrets
import Storage
import TestSupport
import Testing

@testable import Server

/// Accepting invitations with tokens of real providers' shapes, signed outside rbac (PyJWT, keys by the openssl
/// CLI), on PostgreSQL: people the service has never seen are made users on their first sign-in.
@Suite("Sign-in with a provider's token, live, on PostgreSQL", .timeLimit(.minutes(2)))
struct SignInTests {
    static let supabase = "https://abcd.supabase.co/auth/v1"
    static let auth0 = "https://tenant.eu.auth0.com/"

    struct Setup {
        let owned: LiveTests.OwnedCouple
        let tool: TokenTool
        let dependencies: ServerDependencies
        let lines: LineLogHandlerTests.Lines
        let limiter: FailedAttemptLimiter

        func app() -> some ApplicationProtocol {
            var logger = Logger(label: "rbac") { LineLogHandler(label: $0, stream: lines) }
            logger.logLevel = .notice
            return Application(
                router: buildRouter(dependencies), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                logger: logger)
        }

        func invite(_ role: String, email: String? = nil) async throws -> String {
            try await CollaborationInvitationService(
                repository: owned.repository, baseURL: URL(string: "https://rbac.test")!
            ).invite(
                to: owned.couple, role: RoleName(rawValue: role)!, email: email.flatMap(EmailAddress.init(rawValue:)),
                as: .user(owned.owner)
            ).token.rawValue
        }

        func token(_ key: String, _ algorithm: String, _ claims: [String: Any]) async throws -> String {
            var claims = claims
            claims["exp"] = Int(Date().timeIntervalSince1970) + 300
            return try await tool.sign(claims, with: key, algorithm)
        }
    }

    static func withSetup(_ body: (Setup) async throws -> Void) async throws {
        let tool = try TokenTool()
        let keys = [try await tool.key("supabase", "ES256"), try await tool.key("auth0", "RS256")]
        let jwks = tool.directory.appendingPathComponent("jwks.json")
        try TokenTool.jwks(keys).write(to: jwks)
        let keySet = KeySetCache(.file(jwks.path), http: OutboundHTTP())
        try await keySet.load()
        let limiter = FailedAttemptLimiter(limit: 2, window: 60)
        try await LiveTests.withOwnedCouple { owned in
            let dependencies = ServerDependencies(
                repository: owned.repository,
                keys: ServiceKeyService(repository: PostgresServiceKeyRepository(pool: owned.pool)),
                tokens: TokenVerifier(
                    keySet: keySet,
                    policy: TokenPolicy(issuers: [supabase, auth0], audiences: ["authenticated", "https://rbac.api"])),
                publicBaseURL: URL(string: "https://rbac.test")!, limiter: limiter,
                budgets: PostgresBudgetRepository(pool: owned.pool), isReady: { true })
            try await body(
                Setup(
                    owned: owned, tool: tool, dependencies: dependencies, lines: LineLogHandlerTests.Lines(),
                    limiter: limiter))
        }
    }

    static func accept(_ client: some TestClientProtocol, _ invitation: String, bearer: String) async throws
        -> (HTTPResponse.Status, [String: Any])
    {
        try await client.execute(
            uri: "/invitations/\(invitation)/accept", method: .post,
            headers: [.accept: "application/json", .authorization: "Bearer \(bearer)"]
        ) { response in
            let body = try? JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
            return (response.status, body ?? [:])
        }
    }

    @Test("Supabase- and Auth0-shaped tokens of new people accept; each identity makes one user, never twice")
    func firstSignIn() async throws {
        try await Self.withSetup { setup in
            let supabaseSubject = UUID().uuidString.lowercased()
            let supabaseToken = try await setup.token(
                "supabase", "ES256",
                [
                    "iss": Self.supabase, "sub": supabaseSubject, "aud": "authenticated", "role": "authenticated",
                    "email": "sam@example.com",
                ])
            let auth0Token = try await setup.token(
                "auth0", "RS256",
                [
                    "iss": Self.auth0, "sub": "auth0|64f1c0ffee", "aud": ["https://rbac.api", "https://x/userinfo"],
                    "email": "Ann@Example.com", "email_verified": true, "name": "Ann",
                ])
            let first = try await setup.invite("partner")
            let second = try await setup.invite("viewer", email: "ann@example.com")
            let third = try await setup.invite("planner")
            try await setup.app().test(.live) { client in
                let (status, body) = try await Self.accept(client, first, bearer: supabaseToken)
                #expect(status == .ok, "\(body)")
                let samID = try #require((body["user_id"] as? String).flatMap(UUID.init(uuidString:)))
                #expect(samID.uuidString.lowercased() != supabaseSubject, "found by identity, not by sub as an id")

                let (annStatus, annBody) = try await Self.accept(client, second, bearer: auth0Token)
                #expect(
                    annStatus == .ok, "a verified address proves the bound invitation, whatever its case: \(annBody)")
                // The same identity again is the same user, who is a member already.
                let (againStatus, againBody) = try await Self.accept(client, third, bearer: auth0Token)
                let message = (againBody["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(againStatus == .conflict)
                #expect(message.contains(annBody["user_id"] as? String ?? "-") && message.contains("already a member"))
            }
            let sam = try await setup.owned.repository.user(.email(EmailAddress(rawValue: "sam@example.com")!))
            #expect(sam.identities == [UserIdentity(issuer: Self.supabase, subject: supabaseSubject)])
            let ann = try await setup.owned.repository.user(.email(EmailAddress(rawValue: "ann@example.com")!))
            #expect(ann.displayName == "Ann" && ann.identities.map(\.subject) == ["auth0|64f1c0ffee"])
            #expect(
                try await setup.owned.repository.role(
                    couple: setup.owned.couple, user: ann.id, as: .operator(label: "t"))
                    == RoleName(rawValue: "viewer"))
            let log = try await setup.owned.repository.operatorAudit(since: nil, before: nil, last: nil)
            #expect(log.filter { $0.action == "identity.insert" && $0.actor == "operator:sign-in" }.count == 2)
            #expect(!(await setup.limiter.isBlocked("127.0.0.1")), "valid tokens never count as failures")
        }
    }

    @Test("an unverified address does not prove a bound invitation; a refused token is 401 with its reason logged")
    func refusals() async throws {
        try await Self.withSetup { setup in
            let bound = try await setup.invite("viewer", email: "ann@example.com")
            let claims: [String: Any] = [
                "iss": Self.auth0, "sub": "auth0|unverified", "aud": "https://rbac.api", "email": "ann@example.com",
            ]
            let unverified = try await setup.token("auth0", "RS256", claims)
            var wrongAudience = claims
            wrongAudience["aud"] = "https://another.api"
            let foreign = try await setup.token("auth0", "RS256", wrongAudience)
            try await setup.app().test(.live) { client in
                let (status, body) = try await Self.accept(client, bound, bearer: unverified)
                #expect(status == .forbidden)
                #expect((body["error"] as? [String: Any])?["code"] as? String == "invitation_email_mismatch")
                let (refused, refusal) = try await Self.accept(client, bound, bearer: foreign)
                #expect(refused == .unauthorized)
                #expect(
                    (refusal["error"] as? [String: Any])?["message"] as? String == "sign in to accept the invitation")
            }
            let logged = setup.lines.written.withLock { $0.joined() }
            #expect(logged.contains("bearer token refused") && logged.contains("reason=wrong_audience"), "\(logged)")
            #expect(!logged.contains(foreign), "the token itself is never logged")
            let preview = try await setup.owned.repository.invitationPreview(
                tokenHash: SecretToken(
                    parsing: bound, as: .invitation)!.hash)
            #expect(preview?.status == .pending, "nothing was accepted")
        }
    }

    @Test("POST /v1/sign-in makes a new person's user (201), finds them after (200), refuses bad tokens; the id acts")
    func signInRoute() async throws {
        try await Self.withSetup { setup in
            let (subject, email) = ("auth0|\(UUID().uuidString)", "nina.\(UUID().uuidString.prefix(8))@example.com")
            let claims: [String: Any] = [
                "iss": Self.auth0, "sub": subject, "aud": "https://rbac.api", "email": email, "email_verified": true,
                "name": "Nina",
            ]
            let token = try await setup.token("auth0", "RS256", claims)
            var wrongAudience = claims
            wrongAudience["aud"] = "https://another.api"
            let foreign = try await setup.token("auth0", "RS256", wrongAudience)
            let key = try await LiveTests.serviceKey(setup.owned.pool)
            try await setup.app().test(.live) { client in
                func signIn(_ headers: HTTPFields, body: String? = nil) async throws -> (
                    HTTPResponse.Status, [String: Any]
                ) {
                    try await client.execute(
                        uri: "/v1/sign-in", method: .post, headers: headers, body: body.map { ByteBuffer(string: $0) }
                    ) { response in
                        let body = try? JSONSerialization.jsonObject(with: Data(buffer: response.body))
                        return (response.status, body as? [String: Any] ?? [:])
                    }
                }
                let (status, body) = try await signIn([.authorization: "Bearer \(token)"])
                #expect(status == .created, "\(body)")
                let id = try #require((body["id"] as? String).flatMap(UUID.init(uuidString:)))
                #expect(body["email"] as? String == email)
                #expect(body["display_name"] as? String == "Nina")
                let (again, againBody) = try await signIn([.authorization: "Bearer \(token)"])
                #expect(again == .ok, "the same identity is the same user")
                #expect(againBody["id"] as? String == body["id"] as? String)
                let (unsupported, _) = try await signIn(
                    [.authorization: "Bearer \(token)", .contentType: "text/plain"], body: "me")
                #expect(unsupported == .unsupportedMediaType, "a body is JSON or nothing, as on every /v1 write")
                // As `curl -d ''` sends it: no body, whatever its label says.
                let (labelled, _) = try await signIn(
                    [.authorization: "Bearer \(token)", .contentType: "application/x-www-form-urlencoded"], body: "")
                #expect(labelled == .ok, "an empty body is nothing to refuse")

                for headers: HTTPFields in [
                    [:], [.authorization: "Bearer \(foreign)"], [.authorization: "Bearer \(key.rawValue)"],
                ] {
                    let (refused, refusal) = try await signIn(headers)
                    #expect(refused == .unauthorized, "\(headers)")
                    #expect((refusal["error"] as? [String: Any])?["code"] as? String == "unauthorized")
                }

                // The backend names the new user as the one acting, with its service key: they make their couple.
                let headers: HTTPFields = [
                    .authorization: "Bearer \(key.rawValue)", .contentType: "application/json",
                    .init("X-Acting-User")!: id.uuidString,
                ]
                try await client.execute(
                    uri: "/v1/couples", method: .post, headers: headers,
                    body: ByteBuffer(string: #"{"name":"Nina & Ola"}"#)
                ) { response in
                    #expect(response.status == .created, "\(String(buffer: response.body))")
                }
            }
            let nina = try await setup.owned.repository.user(.email(EmailAddress(rawValue: email)!))
            #expect(nina.identities.map(\.subject) == [subject], "one user, one identity")
            let couples = try await setup.owned.repository.userCouples(
                nina.id, limit: 10, after: nil, as: .operator(label: "t"))
            #expect(couples.map(\.role) == [.owner], "the couple she made is hers")
            let logged = setup.lines.written.withLock { $0.joined() }
            #expect(!logged.contains(token) && !logged.contains(foreign), "no token is logged")
        }
    }

    @Test("a new person whose provider's address is none is told why (400), and no user is made")
    func unusableAddress() async throws {
        try await Self.withSetup { setup in
            let token = try await setup.token(
                "auth0", "RS256",
                [
                    "iss": Self.auth0, "sub": "auth0|\(UUID().uuidString)", "aud": "https://rbac.api",
                    "email": "nina..\(UUID().uuidString.prefix(8))@example.com", "email_verified": true,
                ])
            func users() async throws -> Int64 {
                try await setup.owned.pool.query("SELECT count(*) AS n FROM users")[0].decode("n", as: Int64.self)
            }
            let before = try await users()
            try await setup.app().test(.live) { client in
                try await client.execute(
                    uri: "/v1/sign-in", method: .post, headers: [.authorization: "Bearer \(token)"]
                ) { response in
                    #expect(response.status == .badRequest)
                    #expect(
                        String(buffer: response.body).contains(
                            "the identity provider gave no usable email address, which a new user needs: a dot cannot "
                                + "begin or end its name or its domain, nor follow another dot"),
                        "\(String(buffer: response.body))")
                }
            }
            #expect(try await users() == before)
        }
    }

    @Test("a provider's name with a NUL or another control character is left out; a NUL in the subject is a 400")
    func controlCharacters() async throws {
        try await Self.withSetup { setup in
            func claims(_ name: String, subject: String = "auth0|\(UUID().uuidString)") -> [String: Any] {
                [
                    "iss": Self.auth0, "sub": subject, "aud": "https://rbac.api", "email_verified": true,
                    "email": "nul.\(UUID().uuidString.prefix(8))@example.com", "name": name,
                ]
            }
            let named = [
                try await setup.token("auth0", "RS256", claims("Nina\0")),
                try await setup.token("auth0", "RS256", claims("Nina\u{1B}[2J")),
            ]
            let badSubject = try await setup.token("auth0", "RS256", claims("Nina", subject: "auth0|a\0b"))
            func users() async throws -> Int64 {
                try await setup.owned.pool.query("SELECT count(*) AS n FROM users")[0].decode("n", as: Int64.self)
            }
            let before = try await users()
            try await setup.app().test(.live) { client in
                for token in named {
                    try await client.execute(
                        uri: "/v1/sign-in", method: .post, headers: [.authorization: "Bearer \(token)"]
                    ) { response in
                        #expect(response.status == .created, "\(String(buffer: response.body))")
                        #expect(!String(buffer: response.body).contains("display_name"), "no name")
                    }
                }
                try await client.execute(
                    uri: "/v1/sign-in", method: .post, headers: [.authorization: "Bearer \(badSubject)"]
                ) { response in
                    #expect(response.status == .badRequest)
                    #expect(String(buffer: response.body).contains("a text value contains a NUL character"))
                }
            }
            #expect(try await users() == before + 2, "the two named users, and no one for the refused subject")
        }
    }
}
