import ChildProcess
import Foundation
import Postgres
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `rbac serve` as started from the command line, verifying tokens with the keys of a JWKS served over HTTPS.
@Suite("rbac serve with an identity provider's JWKS, end to end", .timeLimit(.minutes(2)))
struct ServeTokenTests {
    /// Accepts the invitation of `link` with `token` as the bearer; the status.
    static func accept(_ link: String, port: Int, token: String) async throws -> Int {
        let path = URL(string: link)!.path
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)/accept")!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    @Test("a key rotated at the provider takes effect while serve runs; serve warns without iss and aud")
    func rotation() async throws {
        let tool = try TokenTool()
        let old = try await tool.key("old", "ES256")
        let new = try await tool.key("new", "EdDSA")
        try await HTTPSPeer.with { peer in
            try peer.serve("jwks.json", try TokenTool.jwks([old]), headers: ["Cache-Control": "max-age=3600"])
            try await CLITests.withDatabase { run, configuration in
                let couple = try await CLITests.createCouple(run)
                var links: [String] = []
                for _ in 0..<3 {
                    let invited = try await run(["invite", "--couple", couple, "--role", "viewer", "--json"])
                    links.append(try #require(try CLITests.json(invited)["link"] as? String))
                }
                // Its log goes to the pipe here, so that the test can wait for the line that says it listens.
                let (serve, port) = try await CLITests.serve(
                    [
                        "--jwks-url", peer.baseURL.appendingPathComponent("jwks.json").absoluteString,
                        "--ca-file", peer.caFile,
                    ], database: configuration.connectionString,
                    errorLog: tool.directory.appendingPathComponent("serve.log").path,
                    until: { $0.contains("listening on") })
                defer { Task { await serve.stop() } }
                try #require(serve.ready, "serve did not start: \(serve.lines)")
                #expect(serve.lines.contains { $0.contains("set --jwt-issuer and --jwt-audience") })

                func claims(_ subject: String) -> [String: Any] {
                    [
                        "sub": subject, "email": "\(subject)@example.com", "email_verified": true,
                        "exp": Int(Date().timeIntervalSince1970) + 300, "iss": "https://issuer.test",
                    ]
                }
                let oldToken = try await tool.sign(claims("first"), with: "old", "ES256")
                #expect(try await Self.accept(links[0], port: port, token: oldToken) == 200)

                try peer.serve("jwks.json", try TokenTool.jwks([new]), headers: ["Cache-Control": "max-age=3600"])
                let newToken = try await tool.sign(claims("second"), with: "new", "EdDSA")
                #expect(try await Self.accept(links[1], port: port, token: newToken) == 200, "the new key, fetched")
                let stale = try await tool.sign(claims("third"), with: "old", "ES256")
                #expect(try await Self.accept(links[2], port: port, token: stale) == 401, "the withdrawn key")
                await serve.stop()
            }
        }
    }
}
