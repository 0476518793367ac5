import ArgumentParser
import Collaboration
import Foundation
import Identity
import Logging
import OutboundHTTP
import Secrets
import Server

/// Sign-in at the app's identity provider from the invitation page (OpenID Connect).
struct SignInOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The OpenID provider invitees sign in at from the invitation page (its discovery document's issuer).",
            valueName: "url"))
    var oidcIssuer: String?
    @Option(help: ArgumentHelp("rbac's client id at that provider.", valueName: "id")) var oidcClientID: String?
    @Option(
        help: ArgumentHelp(
            "File holding the client secret (none: a public client, PKCE alone).", valueName: "path"))
    var oidcClientSecretFile: String?
    @Option(
        help: ArgumentHelp(
            """
            File holding the key (32 bytes or more) that signs the sign-in cookie; the same on every instance \
            (default $RBAC_COOKIE_KEY, else a key of this process: a sign-in then finishes only where it began).
            """, valueName: "path"))
    var cookieKeyFile: String?
    @Option(help: ArgumentHelp("The app's address, linked from the page once accepted.", valueName: "url"))
    var appURL: String?

    func validate() throws {
        guard (oidcIssuer == nil) == (oidcClientID == nil) else {
            throw ValidationError("--oidc-issuer and --oidc-client-id go together")
        }
        if oidcIssuer == nil, oidcClientSecretFile != nil || cookieKeyFile != nil {
            throw ValidationError("--oidc-client-secret-file and --cookie-key-file need --oidc-issuer")
        }
        if let oidcIssuer { try Parse.url(oidcIssuer, "--oidc-issuer") }
        if let appURL { try Parse.url(appURL, "--app-url", orHTTP: true) }
    }

    /// The sign-in, its provider discovered and its keys loaded; nil when not configured.
    func signIn(
        publicBaseURL: URL, http: OutboundHTTP, leeway: Duration, environment: [String: String], logger: Logger
    ) async throws -> OpenIDSignIn? {
        guard let issuer = oidcIssuer, let clientID = oidcClientID else { return nil }
        let provider: OpenIDProvider
        let keys: KeySetCache
        do {
            provider = try await OpenIDProvider.discover(issuer, http: http)
            keys = KeySetCache(.url(provider.jwksURI), http: http, report: { logger.warning("\($0)") })
            try await keys.load()
        } catch {
            throw CommandFailure(.usage, "cannot set up sign-in at \(issuer): \(error)")
        }
        let cookieKey: [UInt8]
        if let path = cookieKeyFile {
            cookieKey = Array(try SecretFile.read(path, "cookie key").utf8)
        } else if let key = environment["RBAC_COOKIE_KEY"], !key.isEmpty {
            cookieKey = Array(key.utf8)
        } else {
            cookieKey = SecureRandom.bytes(count: 32)
            logger.notice(
                "sign-in cookies are signed with a key of this process: set --cookie-key-file on every instance")
        }
        guard cookieKey.count >= 32 else {
            throw CommandFailure(.usage, "the cookie key must be at least 32 bytes long")
        }
        return OpenIDSignIn(
            provider: provider, clientID: clientID,
            clientSecret: try oidcClientSecretFile.map { try SecretFile.read($0, "client secret") },
            idTokens: TokenVerifier(
                keySet: keys, policy: TokenPolicy(issuers: [provider.issuer], audiences: [clientID], leeway: leeway)),
            http: http, cookieKey: cookieKey, appURL: appURL.flatMap(URL.init(string:)), publicBaseURL: publicBaseURL)
    }
}
