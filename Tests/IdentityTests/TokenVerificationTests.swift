import ChildProcess
import Foundation
import Identity
import OutboundHTTP
import Secrets
import TestSupport
import Testing

/// Tokens made by other implementations (PyJWT, the openssl CLI; keys by the openssl CLI), each with the answer
/// rbac must give: verified, or refused for a named reason.
@Suite("Token verification: every algorithm, against tokens signed elsewhere")
struct TokenVerificationTests {
    struct Case: Decodable {
        let name: String
        let token: String
        let expect: String
    }

    /// Runs Tests/tools/token_matrix.py in a new directory: the cases, the JWKS and the secret it wrote.
    static func matrix(now: Date) async throws -> (cases: [Case], directory: URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-tokens-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let result = try await ChildProcess.run(
            "/usr/bin/env",
            [
                "python3", repositoryRoot.appendingPathComponent("Tests/tools/token_matrix.py").path, directory.path,
                String(Int(now.timeIntervalSince1970)),
            ])
        try #require(result.status == 0, "token_matrix.py failed: \(result.errorOutput)")
        return (try JSONDecoder().decode([Case].self, from: Data(result.output.utf8)), directory)
    }

    @Test("each token is verified or refused for exactly its reason")
    func matrix() async throws {
        let now = Date()
        let (cases, directory) = try await Self.matrix(now: now)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = KeySetCache(.file(directory.appendingPathComponent("jwks.json").path), http: OutboundHTTP())
        try await keys.load()
        let secret = try Data(contentsOf: directory.appendingPathComponent("secret"))
        let verifier = TokenVerifier(
            secret: .hmac(secret: Array(secret)), keySet: keys,
            policy: TokenPolicy(issuers: ["https://issuer.test"], audiences: ["rbac"]), now: { now })

        #expect(cases.count > 70)
        for algorithm in SignatureAlgorithm.allCases {
            #expect(cases.contains { $0.name == "\(algorithm.rawValue) valid" }, "no valid \(algorithm) case")
        }
        for reason in TokenRefusal.allCases {
            #expect(cases.contains { $0.expect == reason.rawValue }, "no case refused as \(reason.rawValue)")
        }
        for test in cases {
            switch await verifier.verify(test.token) {
            case .success(let identity):
                #expect(test.expect == "ok", "\(test.name): verified, expected \(test.expect)")
                #expect(identity.issuer == "https://issuer.test" && identity.subject == "auth0|64f1c", "\(test.name)")
            case .failure(let refusal):
                #expect(test.expect == refusal.rawValue, "\(test.name): refused as \(refusal.rawValue)")
            }
        }
    }

    @Test("a JWKS skips the keys it cannot use and names them; a document that is not a JWKS is refused")
    func keySetDocument() throws {
        let set = try KeySet(
            jwks: Array(
                #"{"keys":[{"kty":"oct","k":"c2VjcmV0"},{"kty":"EC","crv":"P-256","x":"AA","y":"AA","kid":"bad"},"#
                    .utf8)
                + Array(
                    #"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"ed","use":"sig"}]}"#
                        .utf8))
        #expect(set.keys.map(\.id) == ["ed"])
        #expect(set.skipped.count == 2, "\(set.skipped)")
        #expect(throws: KeyError.self) { try KeySet(jwks: Array(#"{"kids":[]}"#.utf8)) }
        #expect(throws: KeyError.self) {
            try VerificationKey.jwk(["kty": "OKP", "crv": "Ed25519", "x": "AA", "alg": "EdDSA"])
        }
        #expect(throws: KeyError.self) {
            try VerificationKey.jwk([
                "kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "alg": "RS256",
            ])
        }
    }
}
