import Collaboration
import Foundation
import Hummingbird

/// Couples, and membership, invitation and role management under `/v1/couples/{couple}`, for backend services
/// acting for one of their users: the service key authenticates the backend, `X-Acting-User` names the user, and
/// that user's permissions and grantable roles decide (the same rules as `rbac --actor`).
struct ManagementAPIController {
    let memberships: MembershipService
    let invitations: CollaborationInvitationService
    let permissions: CollaborationPermissionService

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("couples", use: createCouple)
        group.get("couples/:couple", use: showCouple)
        group.patch("couples/:couple", use: renameCouple)
        group.delete("couples/:couple", use: deleteCouple)
        group.get("couples/:couple/audit", use: audit)
        group.post("couples/:couple/members", use: grant)
        group.delete("couples/:couple/members/:user", use: remove)
        group.post("couples/:couple/members/:user/suspend", use: suspend)
        group.post("couples/:couple/members/:user/reactivate", use: reactivate)
        group.post("couples/:couple/leave", use: leave)
        group.post("couples/:couple/transfer-ownership", use: transfer)
        group.get("couples/:couple/invitations", use: listInvitations)
        group.post("couples/:couple/invitations", use: invite)
        group.delete("couples/:couple/invitations/:invitation", use: revoke)
        group.post("couples/:couple/invitations/:invitation/resend", use: resend)
        group.get("couples/:couple/roles", use: listRoles)
        group.post("couples/:couple/roles", use: createRole)
        group.patch("couples/:couple/roles/:role", use: editRole)
        group.delete("couples/:couple/roles/:role", use: deleteRole)
        group.patch("users/:user", use: editUser)
        group.delete("users/:user", use: deleteUser)
    }

    /// A user changes their own display name: `{"display_name": "Pia"}`, null removing it. Only the operator
    /// changes an address (`rbac users edit`), so an `email` is refused (403), not passed over in silence.
    @Sendable func editUser(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable {
            let email: String?
            /// nil when absent, `.some(nil)` for null.
            let displayName: String??

            enum CodingKeys: String, CodingKey {
                case email
                case displayName = "display_name"
            }

            init(from decoder: any Decoder) throws {
                let body = try decoder.container(keyedBy: CodingKeys.self)
                email = try body.decodeIfPresent(String.self, forKey: .email)
                displayName = try body.decodeNullable(String.self, forKey: .displayName)
            }
        }
        let body = try await request.decode(as: Body.self, context: context)
        guard body.email != nil || body.displayName != nil else {
            throw APIError.badRequest("give display_name: a string, or null to remove it")
        }
        let edit = UserEdit(
            email: try body.email.map { try EmailAddress(validating: $0) },
            displayName: try body.displayName.map { try $0.map(User.validateDisplayName) })
        return try PermissionAPIController.json(
            try await memberships.editUser(try user(context), edit, as: try request.actingUser()))
    }

    /// A user deletes their account: `X-Acting-User` must be that user.
    @Sendable func deleteUser(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await memberships.deleteUser(try user(context), as: try request.actingUser())
        return Response(status: .noContent)
    }

    /// The acting user becomes the new couple's first owner.
    @Sendable func createCouple(_ request: Request, context: AppRequestContext) async throws -> Response {
        let name = try await request.decode(as: CoupleName.self, context: context).name
        let owner = try request.actingUserID()
        var response = try PermissionAPIController.json(
            try await memberships.createCouple(named: try Couple.validateName(name), owner: owner, as: .user(owner)))
        response.status = .created
        return response
    }

    @Sendable func showCouple(_ request: Request, context: AppRequestContext) async throws -> Response {
        try PermissionAPIController.json(
            try await memberships.couple(try couple(context), as: try request.actingUser()))
    }

    @Sendable func renameCouple(_ request: Request, context: AppRequestContext) async throws -> Response {
        let name = try await request.decode(as: CoupleName.self, context: context).name
        return try PermissionAPIController.json(
            try await memberships.renameCouple(
                try couple(context), to: try Couple.validateName(name), as: try request.actingUser()))
    }

    @Sendable func deleteCouple(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await memberships.deleteCouple(try couple(context), as: try request.actingUser())
        return Response(status: .noContent)
    }

    private struct CoupleName: Decodable { let name: String }

    /// `?since=` an instant, `?before=` an entry's id and `?tail=` 1 to 1000 (default 100): the newest entries at
    /// or after `since` and older than `before`, oldest first. `next_before`, when older entries remain, is the
    /// `before` of the page before this one.
    @Sendable func audit(_ request: Request, context: AppRequestContext) async throws -> Response {
        let since = try Self.instant(try request.queryParameter("since"), "since")
        let before = try request.queryNumber("before", in: 0...Int64.max, "the id of an audit entry")
        let tail = try request.queryNumber("tail", in: 1...1000, "a number from 1 to 1000") ?? 100
        let (couple, actor) = (try couple(context), try request.actingUser())
        let page = try await AuditEntry.page(last: tail) { last in
            try await memberships.audit(of: couple, since: since, before: before, last: last, as: actor)
        }
        struct Listed: Encodable {
            let entries: [AuditEntry]
            let nextBefore: Int64?
        }
        return try PermissionAPIController.json(Listed(entries: page.entries, nextBefore: page.nextBefore))
    }

    @Sendable func grant(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable {
            let userID: String
            let role: String
            let expiresAt: String?
            enum CodingKeys: String, CodingKey {
                case userID = "user_id"
                case role
                case expiresAt = "expires_at"
            }
        }
        let body = try await request.decode(as: Body.self, context: context)
        let role = try RoleName(validating: body.role)
        let membership = try await memberships.grant(
            role, to: try APIError.uuid(body.userID, "user_id"), in: try couple(context),
            until: try Self.instant(body.expiresAt, "expires_at"), as: try request.actingUser())
        return try PermissionAPIController.json(membership)
    }

    @Sendable func remove(_ request: Request, context: AppRequestContext) async throws -> Response {
        try PermissionAPIController.json(
            try await memberships.remove(try user(context), from: try couple(context), as: try request.actingUser()))
    }

    @Sendable func suspend(_ request: Request, context: AppRequestContext) async throws -> Response {
        try PermissionAPIController.json(
            try await memberships.suspend(try user(context), in: try couple(context), as: try request.actingUser()))
    }

    @Sendable func reactivate(_ request: Request, context: AppRequestContext) async throws -> Response {
        try PermissionAPIController.json(
            try await memberships.reactivate(try user(context), in: try couple(context), as: try request.actingUser()))
    }

    @Sendable func leave(_ request: Request, context: AppRequestContext) async throws -> Response {
        try PermissionAPIController.json(
            try await memberships.leave(try couple(context), user: nil, as: try request.actingUser()))
    }

    @Sendable func transfer(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable { let to: String }
        let body = try await request.decode(as: Body.self, context: context)
        return try PermissionAPIController.json(
            try await memberships.transferOwnership(
                of: try couple(context), to: try APIError.uuid(body.to, "to"), as: try request.actingUser()))
    }

    @Sendable func listInvitations(_ request: Request, context: AppRequestContext) async throws -> Response {
        let status = try request.queryParameter("status").map { text -> InvitationStatus in
            guard let status = InvitationStatus(rawValue: text) else {
                throw APIError.badRequest("status must be pending, accepted, revoked or expired, not \(quoted(text))")
            }
            return status
        }
        let page = try PermissionAPIController.page(request, keyedBy: Date.self)
        let listed = try await invitations.invitations(
            of: try couple(context), status: status, limit: page.limit, after: page.after,
            as: try request.actingUser())
        return try PermissionAPIController.json(
            PermissionAPIController.Page("invitations", listed, limit: page.limit))
    }

    @Sendable func invite(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable {
            let role: String
            let email: String?
            let expiresInSeconds: Int?
            let membershipExpiresAt: String?
            enum CodingKeys: String, CodingKey {
                case role, email
                case expiresInSeconds = "expires_in_seconds"
                case membershipExpiresAt = "membership_expires_at"
            }
        }
        let body = try await request.decode(as: Body.self, context: context)
        let email = try body.email.map { try EmailAddress(validating: $0) }
        let issued = try await invitations.invite(
            to: try couple(context), role: try RoleName(validating: body.role), email: email,
            expiresIn: body.expiresInSeconds.map { .seconds($0) } ?? CollaborationInvitationService.defaultExpiry,
            membershipExpiresAt: try Self.instant(body.membershipExpiresAt, "membership_expires_at"),
            as: try request.actingUser())
        return try Self.issued(issued)
    }

    @Sendable func revoke(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await invitations.revoke(try invitation(context), in: try couple(context), as: try request.actingUser())
        return Response(status: .noContent)
    }

    @Sendable func resend(_ request: Request, context: AppRequestContext) async throws -> Response {
        try Self.issued(
            try await invitations.resend(try invitation(context), in: try couple(context), as: try request.actingUser())
        )
    }

    @Sendable func listRoles(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Listed: Encodable { let roles: [CoupleRole] }
        return try PermissionAPIController.json(
            Listed(roles: try await permissions.roles(of: try couple(context), as: try request.actingUser())))
    }

    @Sendable func createRole(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable {
            let name: String
            let description: String
            let permissions: [String]
        }
        let body = try await request.decode(as: Body.self, context: context)
        var response = try PermissionAPIController.json(
            try await permissions.createRole(
                try RoleName(validating: body.name), in: try couple(context), description: body.description,
                permissions: try body.permissions.map { try Permission(validating: $0) }, as: try request.actingUser()))
        response.status = .created
        return response
    }

    @Sendable func editRole(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable {
            let description: String?
            let permissions: [String]?
        }
        let body = try await request.decode(as: Body.self, context: context)
        guard body.description != nil || body.permissions != nil else {
            throw APIError.badRequest("give description, permissions, or both")
        }
        return try PermissionAPIController.json(
            try await permissions.editRole(
                try role(context), in: try couple(context), description: body.description,
                permissions: try body.permissions?.map { try Permission(validating: $0) },
                as: try request.actingUser()))
    }

    /// `?reassign=ROLE` moves the role's members and pending invitations to ROLE first.
    @Sendable func deleteRole(_ request: Request, context: AppRequestContext) async throws -> Response {
        let reassign = try request.queryParameter("reassign").map { try RoleName(validating: $0) }
        try await permissions.deleteRole(
            try role(context), in: try couple(context), reassign: reassign, as: try request.actingUser())
        return Response(status: .noContent)
    }

    /// An instant a body gave as ISO 8601 text (`instant(parsing:)`); nil when absent.
    private static func instant(_ text: String?, _ field: String) throws -> Date? {
        try text.map { text in
            guard let date = Tenancy.instant(parsing: text) else {
                // A zone's + sent as it is was read as a space (`Request.queryItems`).
                let plus = text.contains(" ") ? "; a + in a query is a space: write %2B" : ""
                throw APIError.badRequest(instantRefusal(text, field) + plus)
            }
            return date
        }
    }

    /// The routes whose success carries a token (`issued`), as `IdempotencyMiddleware` names them.
    static let secretAnswers: Set<String> = [
        "POST /v1/couples/{couple}/invitations", "POST /v1/couples/{couple}/invitations/{invitation}/resend",
    ]

    /// An issued invitation: the only response that carries a token, never cached.
    private static func issued(_ issued: IssuedInvitation) throws -> Response {
        struct Issued: Encodable {
            let invitation: Invitation
            let token: String
            let link: String
        }
        var response = try PermissionAPIController.json(
            Issued(invitation: issued.invitation, token: issued.token.rawValue, link: issued.link.absoluteString))
        response.status = .created
        response.headers[.cacheControl] = "no-store"
        return response
    }

    private func couple(_ context: AppRequestContext) throws -> UUID {
        try APIError.uuid(context.parameters.get("couple"), "couple id")
    }

    private func user(_ context: AppRequestContext) throws -> UUID {
        try APIError.uuid(context.parameters.get("user"), "user id")
    }

    private func role(_ context: AppRequestContext) throws -> RoleName {
        try RoleName(validating: context.parameters.get("role") ?? "")
    }

    private func invitation(_ context: AppRequestContext) throws -> UUID {
        try APIError.uuid(context.parameters.get("invitation"), "invitation id")
    }
}
