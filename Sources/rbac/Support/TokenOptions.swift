import ArgumentParser
import Collaboration
import Foundation
import Identity
import Logging
import OutboundHTTP
import Secrets

/// How `rbac serve` verifies end users' tokens: the shared HS256 secret, the identity provider's JWKS (a file,
/// a URL, or found through the issuer's discovery document), and the claims it requires.
struct TokenOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "File holding the HS256 secret (default: $RBAC_JWT_SECRET): development, self-hosted Supabase.",
            valueName: "path"))
    var jwtSecretFile: String?
    @Option(help: ArgumentHelp("A JWKS file of the identity provider's public keys.", valueName: "path"))
    var jwksFile: String?
    @Option(
        name: .customLong("jwks-url"),
        help: ArgumentHelp(
            """
            The https URL of the identity provider's JWKS. Without it or --jwks-file, and without a shared secret, \
            it is found through the first --jwt-issuer's /.well-known/openid-configuration.
            """, valueName: "url"))
    var jwksURL: String?
    @Option(help: ArgumentHelp("An accepted iss (repeatable); any other issuer is refused.", valueName: "issuer"))
    var jwtIssuer: [String] = []
    @Option(help: ArgumentHelp("An accepted aud (repeatable); a token must name one of them.", valueName: "audience"))
    var jwtAudience: [String] = []
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("How far exp, nbf and iat may be off: 0s to 300s.", valueName: "duration"))
    var jwtLeeway: RBAC.ShortDuration = RBAC.ShortDuration(argument: "60s")!
    @Option(
        help: ArgumentHelp(
            "An issuer that verifies every address its tokens carry, whatever email_verified says (repeatable).",
            valueName: "issuer"))
    var trustEmailFrom: [String] = []
    @Option(
        help: ArgumentHelp(
            "A PEM file of the certificate authorities to trust for outbound https (a private CA).",
            valueName: "path"))
    var caFile: String?

    func validate() throws {
        try jwtLeeway.require("--jwt-leeway", from: "0s", to: "300s")
        if jwksFile != nil, jwksURL != nil { throw ValidationError("give --jwks-file or --jwks-url, not both") }
        for url in jwtIssuer + trustEmailFrom + [jwksURL].compactMap({ $0 }) {
            guard !url.isEmpty, !url.contains(where: \.isNewline) else {
                throw ValidationError("an issuer or URL must be one non-empty line, not \(quoted(url))")
            }
        }
        if let jwksURL { try Parse.url(jwksURL, "--jwks-url") }
    }

    /// The client for the identity provider's endpoints.
    var http: OutboundHTTP { OutboundHTTP(.init(caFile: caFile)) }

    /// The verifier, with its keys loaded; refuses to start without a key or when the first fetch fails.
    /// Without a key source of its own, the keys of `signInIssuer` (the provider the page signs people in at).
    func verifier(_ environment: [String: String], signInIssuer: String?, logger: Logger) async throws
        -> TokenVerifier
    {
        let secret = try sharedSecret(environment)
        let report: @Sendable (String) -> Void = { logger.warning("\($0)") }
        var keySet: KeySetCache?
        if let jwksFile {
            keySet = KeySetCache(.file(jwksFile), http: http, report: report)
        } else if let jwksURL, let url = URL(string: jwksURL) {
            keySet = KeySetCache(.url(url), http: http, report: report)
        } else if secret == nil, let issuer = jwtIssuer.first ?? signInIssuer {
            do {
                let provider = try await OpenIDProvider.discover(issuer, http: http)
                keySet = KeySetCache(.url(provider.jwksURI), http: http, report: report)
            } catch {
                throw CommandFailure(.usage, "cannot find the issuer's keys: \(error)")
            }
        }
        guard secret != nil || keySet != nil else {
            throw CommandFailure(
                .usage,
                """
                no way to verify end users' tokens: give --jwt-issuer (keys found through its discovery document), \
                --jwks-url, --jwks-file, or the HS256 secret (--jwt-secret-file or RBAC_JWT_SECRET)
                """)
        }
        if let keySet {
            do { try await keySet.load() } catch {
                throw CommandFailure(.usage, "cannot load the identity provider's keys: \(error)")
            }
        }
        if jwtIssuer.isEmpty && jwtAudience.isEmpty {
            logger.warning(
                "tokens are accepted from any issuer for any audience: set --jwt-issuer and --jwt-audience")
        }
        return TokenVerifier(
            secret: secret.map { VerificationKey.hmac(secret: Array($0.utf8)) }, keySet: keySet,
            policy: TokenPolicy(issuers: jwtIssuer, audiences: jwtAudience, leeway: jwtLeeway.duration))
    }

    private func sharedSecret(_ environment: [String: String]) throws -> String? {
        let secret: String
        if let path = jwtSecretFile {
            secret = try SecretFile.read(path, "JWT secret")
        } else if let value = environment["RBAC_JWT_SECRET"], !value.isEmpty {
            secret = value
        } else {
            return nil
        }
        guard secret.utf8.count >= 32 else {
            throw CommandFailure(.usage, "the JWT secret must be at least 32 bytes long")
        }
        return secret
    }
}
