import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import Server

@Suite("CORS for the app's own pages (--cors-origin)")
struct BrowserOriginsTests {
    static let app = "https://app.example.com"

    @Test("origins are taken as browsers send them; anything else is refused, saying how to write it")
    func parsing() throws {
        let parsed = try BrowserOrigins(parsing: [Self.app, "http://localhost:3000"])
        #expect(parsed.origins == [Self.app, "http://localhost:3000"])
        let refused: [String: String] = [
            "https://shop.example.com/": "as browsers send it: https://shop.example.com,",
            "https://Shop.example.com": "as browsers send it: https://shop.example.com,",
            "https://shop.example.com:443": "as browsers send it: https://shop.example.com,",
            "http://shop.example.com:80": "as browsers send it: http://shop.example.com,",
            "*": "a scheme, a host and maybe a port",
            "app.example.com": "a scheme, a host and maybe a port",
            "ftp://app.example.com": "a scheme, a host and maybe a port",
            "https://app.example.com/invite": "a scheme, a host and maybe a port",
            "https://user@app.example.com": "a scheme, a host and maybe a port",
            "https://app.example.com:0": "--cors-origin must name a port from 1 to 65535, not 0",
            "https://app..example.com": "--cors-origin must name a host without an empty label",
            "https://app%2Eexample.com": "--cors-origin must name its host without % escapes",
        ]
        for (text, says) in refused {
            #expect(throws: BrowserOriginError.self) { try BrowserOrigins(parsing: [text]) }
            do {
                _ = try BrowserOrigins(parsing: [text])
            } catch {
                #expect(error.description.contains(says), "\(text): \(error.description)")
            }
        }
    }

    @Test("the browser routes are routes the service has")
    func routesExist() async throws {
        let fixture = try await Fixture()
        let routed = Set(documentedRoutes(fixture.dependencies()).routes.map(\.path.description))
        #expect(InvitationController.browserRoutes.isSubset(of: routed), "\(routed)")
    }

    @Test("an allowed origin's preflights and requests are answered for it, refusals too; no one else's")
    func headers() async throws {
        // Other origins, and the service-key routes, get no CORS header: a browser then keeps the answer from
        // the page.
        let fixture = try await Fixture()
        let token = try await fixture.invite()
        let origins = try BrowserOrigins(parsing: [Self.app])
        try await fixture.application(browserOrigins: origins).test(.router) { client in
            func preflight(_ path: String, from origin: String, _ method: String = "POST") async throws -> TestResponse
            {
                try await client.execute(
                    uri: path, method: .options,
                    headers: [
                        .origin: origin, .accessControlRequestMethod: method,
                        .accessControlRequestHeaders: "authorization",
                    ])
            }
            for path in ["/v1/sign-in", "/invitations/\(token)/accept", "/v1/invitations/\(token)"] {
                let allowed = try await preflight(path, from: Self.app)
                #expect(allowed.status == .noContent, "\(path)")
                #expect(allowed.headers[.accessControlAllowOrigin] == Self.app, "\(path)")
                #expect(allowed.headers[.accessControlAllowMethods] == "GET, POST")
                #expect(allowed.headers[.accessControlAllowHeaders]?.contains("Authorization") == true)
                #expect(allowed.headers[.accessControlAllowCredentials] == nil, "no cookies")
                #expect(allowed.headers[.vary] == "Origin")
                let other = try await preflight(path, from: "https://evil.example")
                #expect(other.headers[.accessControlAllowOrigin] == nil, "\(path)")
            }
            let keyRoute = try await preflight("/v1/check", from: Self.app)
            #expect(keyRoute.headers[.accessControlAllowOrigin] == nil, "a service key's route is for servers")

            let preview = try await client.execute(
                uri: "/v1/invitations/\(token)", method: .get, headers: [.origin: Self.app])
            #expect(preview.status == .ok)
            #expect(preview.headers[.accessControlAllowOrigin] == Self.app)
            #expect(preview.headers[values: .vary].contains("Origin"))
            #expect(preview.headers[.accessControlExposeHeaders] == "Retry-After", "a 429's wait is for the page too")
            let unknown = try await client.execute(
                uri: "/v1/invitations/inv_unknown", method: .get, headers: [.origin: Self.app])
            #expect(unknown.status == .notFound)
            #expect(unknown.headers[.accessControlAllowOrigin] == Self.app, "the page may read why")
            let unsigned = try await client.execute(uri: "/v1/sign-in", method: .post, headers: [.origin: Self.app])
            #expect(unsigned.status == .unauthorized)
            #expect(unsigned.headers[.accessControlAllowOrigin] == Self.app, "a refusal thrown is answered for it too")
            let wrongMethod = try await client.execute(uri: "/v1/sign-in", method: .get, headers: [.origin: Self.app])
            #expect(wrongMethod.status == .methodNotAllowed)
            #expect(wrongMethod.headers[.accessControlAllowOrigin] == Self.app, "a 405 too")
            let elsewhere = try await client.execute(
                uri: "/v1/invitations/\(token)", method: .get, headers: [.origin: "https://evil.example"])
            #expect(elsewhere.status == .ok)
            #expect(elsewhere.headers[.accessControlAllowOrigin] == nil)
            let check = try await client.execute(
                uri: "/v1/check", method: .post, headers: fixture.keyHeader + [.origin: Self.app],
                body: ByteBuffer(string: "{}"))
            #expect(check.headers[.accessControlAllowOrigin] == nil)
        }
        try await fixture.application().test(.router) { client in
            let preview = try await client.execute(
                uri: "/v1/invitations/\(token)", method: .get, headers: [.origin: Self.app])
            #expect(preview.headers[.accessControlAllowOrigin] == nil, "no origin is allowed unless named")
        }
    }
}
