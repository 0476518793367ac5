import Collaboration
import Foundation
import Hummingbird

/// Membership and invitation management under `/v1/couples/{couple}`, for backend services acting for one of
/// their users: the service key authenticates the backend, `X-Acting-User` names the user, and that user's
/// permissions and grantable roles decide (the same rules as `rbac --actor`).
struct ManagementAPIController {
    let memberships: MembershipService
    let invitations: CollaborationInvitationService

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
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
    }

    @Sendable func grant(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable {
            let userID: String
            let role: String
            enum CodingKeys: String, CodingKey {
                case userID = "user_id"
                case role
            }
        }
        let body = try await request.decode(as: Body.self, context: context)
        let role = try RoleName(validating: body.role)
        let membership = try await memberships.grant(
            role, to: try APIError.uuid(body.userID, "user_id"), in: try couple(context), as: try request.actingUser())
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
        let status = try request.uri.queryParameters["status"].map { text -> InvitationStatus in
            guard let status = InvitationStatus(rawValue: String(text)) else {
                throw APIError.badRequest("status must be pending, accepted, revoked or expired")
            }
            return status
        }
        let (limit, after) = try PermissionAPIController.page(request)
        let listed = try await invitations.invitations(
            of: try couple(context), status: status, limit: limit, after: after, as: try request.actingUser())
        return try PermissionAPIController.json(
            PermissionAPIController.Page("invitations", listed, limit: limit) { $0.id })
    }

    @Sendable func invite(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Body: Decodable {
            let role: String
            let email: String?
            let expiresInSeconds: Int?
            enum CodingKeys: String, CodingKey {
                case role, email
                case expiresInSeconds = "expires_in_seconds"
            }
        }
        let body = try await request.decode(as: Body.self, context: context)
        let email = try body.email.map { try EmailAddress(validating: $0) }
        let issued = try await invitations.invite(
            to: try couple(context), role: try RoleName(validating: body.role), email: email,
            expiresIn: body.expiresInSeconds.map { .seconds($0) } ?? CollaborationInvitationService.defaultExpiry,
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

    private func invitation(_ context: AppRequestContext) throws -> UUID {
        try APIError.uuid(context.parameters.get("invitation"), "invitation id")
    }
}
