import Foundation
import Secrets

/// An invitation just issued: the raw token and its link are shown once and never stored.
public struct IssuedInvitation: Sendable {
    public let invitation: Invitation
    public let token: SecretToken
    public let link: URL
}

/// The invitation workflow: issue, look up, accept, revoke, resend, list.
public actor CollaborationInvitationService {
    private let repository: any CollaborationRepository
    /// Links are `<baseURL>/invitations/<token>`.
    private let baseURL: URL

    public static let defaultExpiry: Duration = .seconds(7 * 24 * 3600)

    private let metrics: OperationMetrics

    public init(repository: any CollaborationRepository, baseURL: URL, metrics: OperationMetrics = OperationMetrics()) {
        self.repository = repository
        self.baseURL = baseURL
        self.metrics = metrics
    }

    /// Issues an invitation to `couple` with `role`, optionally bound to `email`. The token comes from
    /// OpenSSL's generator; the database gets its SHA-256, and the outbox the token sealed under the delivery
    /// key (never the token itself).
    public func invite(
        to couple: UUID, role: RoleName, email: EmailAddress? = nil, expiresIn: Duration = defaultExpiry,
        membershipExpiresAt: Date? = nil, as actor: Actor
    ) async throws -> IssuedInvitation {
        try await metrics.measure("invitation.invite") {
            let token = SecretToken.generate(.invitation)
            let invitation = try await repository.createInvitation(
                couple: couple, token: token, role: role, email: email, expiresIn: expiresIn,
                membershipExpiresAt: membershipExpiresAt, as: actor)
            return IssuedInvitation(invitation: invitation, token: token, link: link(for: token))
        }
    }

    /// What the token's page shows. A string that is not a well-formed token is simply not found.
    public func preview(token text: String) async throws -> InvitationPreview {
        try await metrics.measure("invitation.preview") {
            guard let token = SecretToken(parsing: text, as: .invitation),
                let preview = try await repository.invitationPreview(tokenHash: token.hash)
            else { throw CollaborationError(.notFound, "invitation not found") }
            return preview
        }
    }

    /// Accepts the invitation for `user` (nil: the acting user). Exactly once.
    public func accept(token text: String, user: UUID?, as actor: Actor) async throws -> Membership {
        try await metrics.measure("invitation.accept") {
            guard let token = SecretToken(parsing: text, as: .invitation) else {
                throw CollaborationError(.notFound, "invitation not found")
            }
            return try await repository.acceptInvitation(tokenHash: token.hash, user: user, as: actor)
        }
    }

    /// Accepts for a user signed in through an identity (a bearer token).
    public func accept(token text: String, signedIn: SignedIn) async throws -> Membership {
        guard let token = SecretToken(parsing: text, as: .invitation) else {
            throw CollaborationError(.notFound, "invitation not found")
        }
        return try await accept(tokenHash: token.hash, signedIn: signedIn)
    }

    /// Accepts the invitation of a token's hash (the invitation page's sign-in keeps no more).
    public func accept(tokenHash: [UInt8], signedIn: SignedIn) async throws -> Membership {
        try await metrics.measure("invitation.accept") {
            try await repository.acceptInvitation(tokenHash: tokenHash, signedIn: signedIn)
        }
    }

    /// What the page shows for the invitation of a token's hash.
    public func preview(tokenHash: [UInt8]) async throws -> InvitationPreview? {
        try await repository.invitationPreview(tokenHash: tokenHash)
    }

    public func revoke(_ invitation: UUID, in couple: UUID, as actor: Actor) async throws {
        try await metrics.measure("invitation.revoke") {
            try await repository.revokeInvitation(couple: couple, invitation: invitation, as: actor)
        }
    }

    /// Revokes the invitation and issues a new token for the same role and email, with a fresh expiry; in one
    /// step, so that a refused reissue (a role the actor may not give) leaves the old invitation pending.
    public func resend(_ invitation: UUID, in couple: UUID, expiresIn: Duration = defaultExpiry, as actor: Actor)
        async throws -> IssuedInvitation
    {
        try await metrics.measure("invitation.resend") {
            let token = SecretToken.generate(.invitation)
            let issued = try await repository.resendInvitation(
                couple: couple, invitation: invitation, token: token, expiresIn: expiresIn, as: actor)
            return IssuedInvitation(invitation: issued, token: token, link: link(for: token))
        }
    }

    /// Every invitation (of `status` only, when given), oldest first.
    public func invitations(of couple: UUID, status: InvitationStatus? = nil, as actor: Actor) async throws
        -> [Invitation]
    {
        try await metrics.measure("invitation.invitations") {
            try await everyPage(id: \.cursor) { limit, after in
                try await repository.invitations(couple: couple, status: status, limit: limit, after: after, as: actor)
            }
        }
    }

    /// A page of invitations, oldest first, those after `after` (`Invitation.cursor`); `limit` is 1 to 1000.
    public func invitations(
        of couple: UUID, status: InvitationStatus? = nil, limit: Int, after: PageCursor<Date>?, as actor: Actor
    ) async throws -> [Invitation] {
        try await metrics.measure("invitation.invitations") {
            try await repository.invitations(couple: couple, status: status, limit: limit, after: after, as: actor)
        }
    }

    public func link(for token: SecretToken) -> URL {
        baseURL.appendingPathComponent("invitations").appendingPathComponent(token.rawValue)
    }
}
