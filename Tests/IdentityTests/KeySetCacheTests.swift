import Foundation
import Identity
import OutboundHTTP
import Synchronization
import TestSupport
import Testing

/// An identity provider's JWKS served over real HTTPS, changed while the verifier runs.
@Suite("JWKS over HTTPS: rotation without a restart, the last good keys kept through an outage")
struct KeySetCacheTests {
    static let issuer = "https://issuer.test"

    static func claims(_ subject: String) -> [String: Any] {
        ["iss": issuer, "sub": subject, "exp": Int(Date().timeIntervalSince1970) + 300]
    }

    @Test("a new kid is fetched at once; a withdrawn one stops verifying; an outage keeps the last good set")
    func rotation() async throws {
        let tool = try TokenTool()
        let old = try await tool.key("old", "ES256")
        let new = try await tool.key("new", "RS256")
        try await HTTPSPeer.with { peer in
            try peer.serve("jwks.json", try TokenTool.jwks([old]), headers: ["Cache-Control": "max-age=300"])
            let reports = Mutex<[String]>([])
            let keys = KeySetCache(
                .url(peer.baseURL.appendingPathComponent("jwks.json")), http: OutboundHTTP(.init(caFile: peer.caFile)),
                refetchInterval: .zero, report: { message in reports.withLock { $0.append(message) } })
            try await keys.load()
            let verifier = TokenVerifier(keySet: keys, policy: TokenPolicy(issuers: [Self.issuer]))
            let oldToken = try await tool.sign(Self.claims("supabase-user"), with: "old", "ES256")
            let newToken = try await tool.sign(Self.claims("auth0|64f1c"), with: "new", "RS256")
            #expect(try await verifier.verify(oldToken).get().subject == "supabase-user")
            #expect(await verifier.verify(newToken) == .failure(.unknownKey), "not published yet")

            // Rotation: the provider publishes the new key and withdraws the old one.
            try peer.serve("jwks.json", try TokenTool.jwks([new]), headers: ["Cache-Control": "max-age=300"])
            #expect(try await verifier.verify(newToken).get().subject == "auth0|64f1c")
            #expect(await verifier.verify(oldToken) == .failure(.unknownKey))

            // An outage: the document is gone; the set it last served still verifies.
            try FileManager.default.removeItem(at: peer.root.appendingPathComponent("jwks.json"))
            #expect(await verifier.verify(oldToken) == .failure(.unknownKey), "a refetch that fails")
            #expect(try await verifier.verify(newToken).get().subject == "auth0|64f1c")
            #expect(reports.withLock { $0.contains { $0.contains("keeping the last good ones") } })
        }
    }

    @Test("a set past its max-age is fetched again before a token is checked")
    func lifetime() async throws {
        let tool = try TokenTool()
        let first = try await tool.key("first", "EdDSA")
        let second = try await tool.key("second", "EdDSA")
        try await HTTPSPeer.with { peer in
            try peer.serve("jwks.json", try TokenTool.jwks([first]), headers: ["Cache-Control": "max-age=0"])
            // No refetch for unknown kids: only the set's lifetime brings the second key in.
            let keys = KeySetCache(
                .url(peer.baseURL.appendingPathComponent("jwks.json")), http: OutboundHTTP(.init(caFile: peer.caFile)),
                lifetimeBounds: .zero...(.seconds(60)), refetchInterval: .seconds(3600))
            try await keys.load()
            let verifier = TokenVerifier(keySet: keys)
            let token = try await tool.sign(Self.claims("u"), with: "second", "EdDSA")
            try peer.serve("jwks.json", try TokenTool.jwks([second]), headers: ["Cache-Control": "max-age=0"])
            #expect(try await verifier.verify(token).get().subject == "u")
        }
    }
}
