import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import Logging
import OutboundHTTP
import Secrets
import Testing

@testable import Server

/// The routes around the invitation page that an app or a browser reaches without an API key: the JSON preview,
/// and the sign-in flow's refusals (the browser test goes through a whole sign-in at a real provider).
@Suite("Invitation preview and sign-in")
struct InvitationSignInTests {
    @Test("the JSON preview: the page's facts, the bound address masked, private headers; bad tokens count")
    func previewJSON() async throws {
        let fixture = try await Fixture()
        let token = try await fixture.invite("viewer", email: "olivia.smith@example.com")
        let limiter = FailedAttemptLimiter(limit: 1, window: 60)
        try await fixture.application(limiter: limiter).test(.router) { client in
            try await client.execute(uri: "/v1/invitations/\(token)", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.cacheControl] == "no-store")
                #expect(response.headers[.init("Referrer-Policy")!] == "no-referrer")
                let body = try #require(
                    try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
                #expect(body["email_hint"] as? String == "o•••@example.com")
                #expect(body["role"] as? String == "viewer" && body["couple_name"] as? String == "Olivia & Paul <3")
                #expect(body["email"] == nil, "never the address itself")
            }
            try await client.execute(uri: "/invitations/\(token)", method: .get) { response in
                #expect(text(response).contains("o•••@example.com"))
                #expect(text(response).contains("Open this link from the app"), "no provider: the app's form")
            }
            try await client.execute(uri: "/v1/invitations/inv_guess", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(text(response).contains("invitation_not_valid"))
            }
            try await client.execute(uri: "/v1/invitations/inv_guess", method: .get) {
                #expect($0.status == .tooManyRequests, "counted as the page counts")
            }
            try await client.execute(uri: "/invitations/\(token)/sign-in", method: .get) {
                #expect($0.status == .notFound, "no sign-in without a provider")
            }
        }
    }

    static func signIn() -> OpenIDSignIn {
        OpenIDSignIn(
            provider: OpenIDProvider(
                issuer: "https://idp.test", authorizationEndpoint: URL(string: "https://idp.test/authorize")!,
                tokenEndpoint: URL(string: "https://idp.test/token")!, jwksURI: URL(string: "https://idp.test/jwks")!),
            clientID: "rbac", clientSecret: nil, idTokens: TokenVerifier(), http: OutboundHTTP(),
            cookieKey: Array(repeating: 7, count: 32), appURL: nil, publicBaseURL: URL(string: "https://rbac.test")!)
    }

    @Test("a sign-in starts with PKCE, state and nonce in a signed, HttpOnly, SameSite, Secure cookie")
    func start() throws {
        let (redirect, cookie) = try Self.signIn().start(tokenHash: [1, 2, 3])
        let query = Dictionary(
            uniqueKeysWithValues: (URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.queryItems ?? []).map {
                ($0.name, $0.value ?? "")
            })
        #expect(redirect.absoluteString.hasPrefix("https://idp.test/authorize?"))
        #expect(query["code_challenge_method"] == "S256" && query["code_challenge"]?.count == 43)
        #expect(query["state"]?.count == 43 && query["nonce"]?.count == 43 && query["state"] != query["nonce"])
        #expect(query["redirect_uri"] == "https://rbac.test/oidc/callback" && query["client_id"] == "rbac")
        #expect(cookie.hasPrefix("rbac_sign_in=") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"))
        #expect(cookie.contains("Secure") && cookie.contains("Path=/oidc/callback") && cookie.contains("Max-Age=600"))
        #expect(
            !cookie.contains(query["code_challenge"]!),
            "the verifier's challenge goes out; the cookie keeps the verifier")
    }

    @Test("a callback without the flow's cookie, with a forged or stale one, or with another state is refused")
    func refusals() async throws {
        let signIn = Self.signIn()
        let now = Date()
        let (redirect, header) = try signIn.start(tokenHash: [1, 2, 3], now: now)
        let state = URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.queryItems?.first {
            $0.name == "state"
        }?
        .value
        let cookie = String(header.dropFirst("rbac_sign_in=".count).prefix { $0 != ";" })
        let (payload, signature) = (cookie.prefix { $0 != "." }, cookie.drop { $0 != "." })
        let forged = Base64URL.encode(
            Array(#"{"invitation":"AQID","state":"s","nonce":"n","verifier":"v","expires":9e9}"#.utf8))

        func refusal(_ cookie: String?, state: String?, at time: Date) async -> String? {
            do {
                _ = try await signIn.finish(code: "code", state: state, cookie: cookie, now: time)
                return nil
            } catch { return error.message }
        }
        #expect(await refusal(nil, state: state, at: now)?.contains("expired or was already used") == true)
        #expect(await refusal(forged + signature, state: "s", at: now)?.contains("expired or was already used") == true)
        #expect(
            await refusal(payload + ".AAAA", state: state, at: now)?.contains("expired or was already used") == true)
        #expect(
            await refusal(cookie, state: state, at: now.addingTimeInterval(601))?.contains("expired") == true)
        #expect(await refusal(cookie, state: (state ?? "") + "x", at: now)?.contains("does not match") == true)
        #expect(await refusal(cookie, state: nil, at: now)?.contains("does not match") == true)
    }

    @Test("a callback's error is logged on one line, its control characters escaped")
    func callbackErrorLogged() async throws {
        let fixture = try await Fixture()
        let lines = LineLogHandlerTests.Lines()
        let logger = Logger(label: "rbac") { LineLogHandler(label: $0, stream: lines) }
        try await fixture.application(signIn: Self.signIn(), logger: logger).test(.router) { client in
            try await client.execute(uri: "/oidc/callback?error=denied%0A1970-01-01%20forged%1B%5B2J", method: .get) {
                #expect($0.status == .badRequest)
            }
        }
        let written = lines.written.withLock { $0 }.filter { $0.contains("sign-in not completed") }
        let line = try #require(written.first)
        #expect(written.count == 1)
        #expect(line.contains(#"error=denied\u{A}1970-01-01 forged\u{1B}[2J "#), "\(line)")
        #expect(!line.dropLast().contains("\n"), "one line: \(line)")
    }

    @Test("a callback naming its state, code or error twice is refused as a page, and ends the flow")
    func repeatedCallbackParameters() async throws {
        let fixture = try await Fixture()
        try await fixture.application(signIn: Self.signIn()).test(.router) { client in
            for query in ["code=c&state=a&state=b", "code=c&code=d&state=a", "error=a&error=b"] {
                try await client.execute(uri: "/oidc/callback?\(query)", method: .get) { response in
                    #expect(response.status == .badRequest, "\(query)")
                    #expect(response.headers[.contentType]?.hasPrefix("text/html") == true, "\(query)")
                    #expect(text(response).contains("given more than once"), "\(query)")
                    #expect(response.headers[.setCookie]?.contains("Max-Age=0") == true, "\(query)")
                }
            }
        }
    }
}
