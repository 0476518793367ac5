import Collaboration
import Foundation
import HTTPTypes
import Hummingbird
import Identity
import Secrets

/// The routes of end users, who present a bearer JWT or an invitation link: `GET /invitations/{token}` (the page:
/// a preview that never consumes the token), `GET /v1/invitations/{token}` (the same preview as JSON, for apps
/// that host their own page), `POST /invitations/{token}/accept` (exactly once, for the user a bearer JWT names;
/// made on their first sign-in), `POST /v1/sign-in` (that user alone), and with sign-in at the app's identity
/// provider `GET /invitations/{token}/sign-in` and its callback `GET /oidc/callback`.
struct InvitationController {
    let invitations: CollaborationInvitationService
    let repository: any CollaborationRepository
    let tokens: TokenVerifier
    let emailVerifyingIssuers: Set<String>
    let signIn: OpenIDSignIn?
    let limiter: FailedAttemptLimiter
    let proxies: TrustedProxies
    /// Accepting waits on the couple's lock as a change to the couple does, so it takes a place among all changes.
    let admission: CoupleAdmission

    /// The routes an app's pages may call from another origin (`BrowserOrigins`), as the router names them.
    static let browserRoutes: Set<String> = ["/v1/invitations/{token}", "/invitations/{token}/accept", "/v1/sign-in"]

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("invitations/:token", use: show)
        router.get("v1/invitations/:token", use: previewJSON)
        router.post("invitations/:token/accept", use: accept)
        router.get("invitations/:token/sign-in", use: startSignIn)
        router.get("oidc/callback", use: finishSignIn)
        // As every /v1 write: a body, though none is read, is JSON or nothing (415).
        router.group("v1").add(middleware: JSONBodyMiddleware()).post("sign-in", use: signInUser)
    }

    /// The user a bearer JWT names, made with its identity on their first verified sign-in (201; 200 after): how
    /// an app's backend learns the id it names in `X-Acting-User` for a person nobody invited, such as one about
    /// to create their couple.
    @Sendable func signInUser(_ request: Request, context: AppRequestContext) async throws -> Response {
        let unauthorized = APIError(.unauthorized, code: .unauthorized, "a valid bearer JWT of the user is required")
        guard let bearer = request.headers.bearerCredential, let verified = await verified(bearer, context) else {
            throw unauthorized
        }
        let signedIn = try await signedIn(verified)
        return try Self.json(signedIn.created ? .created : .ok, try await repository.user(.id(signedIn.user)))
    }

    /// A valid token is answered whoever presents it: a client that used up its failures (`limiter`) gets 429
    /// only for tokens that do not work, so one client's guesses never lock out others behind the same address.
    @Sendable func show(_ request: Request, context: AppRequestContext) async throws -> Response {
        let token = context.parameters.get("token") ?? ""
        do {
            let preview = try await invitations.preview(token: token)
            guard preview.status == .pending else { throw CollaborationError(.notFound, "invitation not found") }
            return Self.html(.ok, InvitationPage.pending(preview, token: token, signIn: signIn != nil))
        } catch let error as CollaborationError where error.code == .notFound {
            return try await unusable(request, context, json: false)
        } catch {
            throw Self.notShown(error)
        }
    }

    /// The page's preview as JSON; an unusable token is answered as the page answers it, and counts the same.
    @Sendable func previewJSON(_ request: Request, context: AppRequestContext) async throws -> Response {
        let token = context.parameters.get("token") ?? ""
        do {
            let preview = try await invitations.preview(token: token)
            guard preview.status == .pending else { throw CollaborationError(.notFound, "invitation not found") }
            struct Preview: Encodable {
                let coupleID: UUID
                let coupleName: String
                let role: String
                let inviter: String
                let emailHint: String?
                let expiresAt: Date
                let roleDescription: String?
                let membershipExpiresAt: Date?
                enum CodingKeys: String, CodingKey {
                    case coupleID = "couple_id"
                    case coupleName = "couple_name"
                    case role, inviter
                    case emailHint = "email_hint"
                    case expiresAt = "expires_at"
                    case roleDescription = "role_description"
                    case membershipExpiresAt = "membership_expires_at"
                }
            }
            return try Self.json(
                .ok,
                Preview(
                    coupleID: preview.coupleID, coupleName: preview.coupleName, role: preview.role.rawValue,
                    inviter: preview.inviter, emailHint: preview.emailHint, expiresAt: preview.expiresAt,
                    roleDescription: preview.roleDescription, membershipExpiresAt: preview.membershipExpiresAt))
        } catch let error as CollaborationError where error.code == .notFound {
            return try await unusable(request, context, json: true)
        }
    }

    /// Starts signing in at the identity provider to accept: a redirect there, with the flow's cookie.
    @Sendable func startSignIn(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let signIn else { return Self.signInNotConfigured }
        let token = context.parameters.get("token") ?? ""
        do {
            let preview = try await invitations.preview(token: token)
            guard preview.status == .pending, let parsed = SecretToken(parsing: token, as: .invitation) else {
                throw CollaborationError(.notFound, "invitation not found")
            }
            let (redirect, cookie) = try signIn.start(tokenHash: parsed.hash)
            var headers = Self.privateHeaders
            headers[.location] = redirect.absoluteString
            headers[.setCookie] = cookie
            return Response(status: .seeOther, headers: headers)
        } catch let error as CollaborationError where error.code == .notFound {
            return try await unusable(request, context, json: false)
        } catch {
            throw Self.notShown(error)
        }
    }

    /// The identity provider's redirect back: verifies the sign-in, makes the user on a first sign-in, accepts
    /// once. A callback that is replayed, tampered with or late is refused and changes nothing.
    @Sendable func finishSignIn(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let signIn else { return Self.signInNotConfigured }
        var response: Response
        do {
            if let error = try request.queryParameter("error") {
                // The provider's words, or anyone's who sends this link: shown escaped, they stay one line.
                context.logger.notice("sign-in not completed", metadata: ["error": "\(visible(error.prefix(64)))"])
                response = Self.html(
                    .badRequest, InvitationPage.problem("You did not sign in, so nothing was accepted."))
            } else {
                let (verified, tokenHash) = try await signIn.finish(
                    code: try request.queryParameter("code"), state: try request.queryParameter("state"),
                    cookie: Self.cookie(OpenIDSignIn.cookieName, in: request.headers))
                let signedIn = try await signedIn(verified)
                let membership = try await admission.admitted(nil) {
                    try await invitations.accept(tokenHash: tokenHash, signedIn: signedIn)
                }
                let name = (try? await invitations.preview(tokenHash: tokenHash))??.coupleName ?? "the couple"
                response = Self.html(.ok, InvitationPage.accepted(membership, coupleName: name, appURL: signIn.appURL))
            }
        } catch let refusal as OpenIDSignIn.Refusal {
            context.logger.notice("sign-in refused", metadata: ["reason": "\(refusal.message)"])
            response = Self.html(.badRequest, InvitationPage.problem(refusal.message))
        } catch let error as APIError {
            response = Self.html(
                error.status, InvitationPage.problem("This sign-in address is not valid: \(error.message)."))
        } catch let error as CollaborationError where Self.unusableToken.contains(error.code) {
            response = Self.html(.notFound, InvitationPage.unusable)
        } catch {
            let failure = APIError.from(error)
            response = Self.html(failure.status, InvitationPage.problem(failure.message))
        }
        // Whatever happened, the flow is over: a reload of this address finds no flow to finish.
        response.headers[.setCookie] = signIn.clearingCookie
        return response
    }

    /// A page for a browser whose invitation could not be read (the database away): never JSON.
    private static func notShown(_ error: any Error) -> APIError {
        let failure = APIError.from(error)
        return failure.shown(as: InvitationPage.notShown(failure.message))
    }

    /// Browsers reach the sign-in routes: an HTML answer when this service has no provider to send them to.
    static var signInNotConfigured: Response {
        html(.notFound, InvitationPage.problem("Signing in is not set up here; open the link from the app instead."))
    }

    /// The identity a bearer JWT proves, or nil: one answer for every refused token; why it was refused is for
    /// the operator's log only.
    private func verified(_ bearer: String, _ context: AppRequestContext) async -> VerifiedIdentity? {
        switch await tokens.verify(bearer) {
        case .success(let identity): return identity
        case .failure(let refusal):
            context.logger.notice("bearer token refused", metadata: ["reason": "\(refusal.rawValue)"])
            return nil
        }
    }

    /// The user of a verified token's identity, made on their first sign-in: the identity as the token says it,
    /// with the address verified as the provider or its trust says.
    private func signedIn(_ verified: VerifiedIdentity) async throws -> SignedIn {
        try await repository.signIn(
            ExternalIdentity(
                issuer: verified.issuer, subject: verified.subject,
                email: verified.email,
                emailVerified: verified.emailVerified || emailVerifyingIssuers.contains(verified.issuer),
                name: verified.name))
    }

    /// The value of cookie `name` among the request's `Cookie` fields.
    static func cookie(_ name: String, in headers: HTTPFields) -> String? {
        for field in headers[values: .cookie] {
            for pair in field.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == name { return String(parts[1]) }
            }
        }
        return nil
    }

    /// The answer to a token that cannot be used, counted against the client: 404, or 429 once the client has
    /// used up its failures.
    private func unusable(_ request: Request, _ context: AppRequestContext, json: Bool) async throws -> Response {
        let refusal: APIError
        let page: String
        if await limiter.countFailure(context.clientAddress(request, trusting: proxies)) {
            refusal = APIError(
                .notFound, code: .invitationNotValid, "this invitation link is not valid", headers: Self.privateHeaders)
            page = InvitationPage.unusable
        } else {
            var headers = Self.privateHeaders
            headers[.retryAfter] = "60"
            refusal = APIError(
                .tooManyRequests, code: .tooManyAttempts, "too many invalid invitation links; wait a minute",
                headers: headers)
            page = InvitationPage.problem("Too many invalid invitation links from here; wait a minute.")
        }
        return try (json ? refusal : refusal.shown(as: page)).response(from: request, context: context)
    }

    /// Whether a request to accept asks for JSON (`Accept: application/json`); else it is answered with a page.
    static func asksForJSON(_ request: Request) -> Bool {
        request.headers[.accept]?.contains("application/json") ?? false
    }

    @Sendable func accept(_ request: Request, context: AppRequestContext) async throws -> Response {
        let json = Self.asksForJSON(request)
        let token = context.parameters.get("token") ?? ""
        var request = request
        let bearer: String?
        do {
            bearer = try await Self.bearerToken(&request, context: context)
        } catch {
            // A form too large to read included, which the decoder refuses in Hummingbird's words.
            throw Self.answer(APIError.from(error), json: json)
        }
        let unauthorized = APIError(.unauthorized, code: .unauthorized, "sign in to accept the invitation")
        guard let bearer, let verified = await verified(bearer, context) else {
            throw Self.answer(unauthorized, json: json)
        }
        do {
            // A valid token of someone not seen before makes their user: never an "invalid link".
            let signedIn = try await signedIn(verified)
            let membership = try await admission.admitted(nil) {
                try await invitations.accept(token: token, signedIn: signedIn)
            }
            if json {
                struct Accepted: Encodable {
                    let coupleID: UUID
                    let userID: UUID
                    let role: String
                    enum CodingKeys: String, CodingKey {
                        case coupleID = "couple_id"
                        case userID = "user_id"
                        case role
                    }
                }
                return try Self.json(
                    .ok,
                    Accepted(coupleID: membership.coupleID, userID: membership.userID, role: membership.role.rawValue))
            }
            let name = (try? await invitations.preview(token: token).coupleName) ?? "the couple"
            return Self.html(.ok, InvitationPage.accepted(membership, coupleName: name))
        } catch let error as CollaborationError where Self.unusableToken.contains(error.code) {
            return try await unusable(request, context, json: json)
        } catch {
            throw Self.answer(APIError.from(error), json: json)
        }
    }

    /// The refusals of a token that cannot be used: answered alike, so that its state cannot be probed.
    private static let unusableToken: Set<CollaborationError.Code> = [
        .notFound, .invitationUsed, .invitationRevoked, .invitationExpired,
    ]

    /// `error` as the client asked for it: JSON, or a page for a browser.
    static func answer(_ error: APIError, json: Bool) -> APIError {
        json ? error : error.shown(as: InvitationPage.problem(error.message))
    }

    /// The JWT from `Authorization: Bearer ...`, else from the form field `access_token`; a form in a content
    /// coding is refused (`APIError.contentCoded`), as every JSON body is.
    private static func bearerToken(_ request: inout Request, context: AppRequestContext) async throws -> String? {
        if let credential = request.headers.bearerCredential { return credential }
        guard request.headers.declaresForm else { return nil }
        guard request.headers.declaresNoContentCoding else { throw APIError.contentCoded }
        struct Form: Decodable {
            let accessToken: String?
            enum CodingKeys: String, CodingKey { case accessToken = "access_token" }
        }
        let form: Form
        do {
            form = try await URLEncodedFormDecoder().decode(Form.self, from: request, context: context)
        } catch let error as URLEncodedFormError {
            // Said without the value, which may be the token.
            let problem =
                switch error.code {
                case .duplicateKeys: "the form names \(quoted(error.value)) more than once"
                case .failedToPercentDecode: "the form is not URL-encoded (a % not followed by two hex digits)"
                default: "the form names fields this page does not take; it takes access_token"
                }
            throw APIError.badRequest(problem)
        } catch is DecodingError {
            // `access_token[]=...` or `access_token[x]=...`: a list or a map where one value belongs.
            throw APIError.badRequest("the form's access_token must be one value")
        }
        return form.accessToken.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// No script, no resource from elsewhere, forms only to this service, and never inside another site's frame,
    /// where a page could be laid over the accept button.
    static func html(_ status: HTTPResponse.Status, _ page: String) -> Response {
        var headers = privateHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.contentSecurityPolicy] =
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: page)))
    }

    static func json(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        var headers = privateHeaders
        headers[.contentType] = PermissionAPIController.jsonContentType
        return Response(
            status: status, headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: try PermissionAPIController.encoder.encode(value))))
    }

    /// Invitation responses carry a secret in their URL: besides never cached, never sent on as a referrer.
    static let privateHeaders =
        PermissionAPIController.privateFields + [HTTPField(name: .init("Referrer-Policy")!, value: "no-referrer")]
}
