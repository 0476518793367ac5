import Foundation
import Secrets

/// Data access for the collaboration domain. Every operation names who performs it; implementations enforce
/// the same rules (permissions, grantable roles, last owner, single-use invitations) and throw
/// `CollaborationError`. `PostgresCollaborationRepository` calls the SQL functions; the in-memory one is for
/// fast tests of the services.
public protocol CollaborationRepository: Sendable {
    /// Adds a user, with an identity at a provider when given (before their first sign-in).
    func addUser(email: EmailAddress, displayName: String?, identity: UserIdentity?) async throws -> User
    func user(_ reference: UserReference) async throws -> User
    /// A page of users by email, whatever its case: at most `limit` (1 to 1000) after `after` (`User.cursor`);
    /// with `search`, only those whose address or display name contains it, whatever its case.
    func users(matching search: String?, limit: Int, after: PageCursor<String>?) async throws -> [User]
    /// Changes a user's address (the operator) or display name (the operator, or the user themself); a change to
    /// what is there writes nothing.
    func editUser(_ user: UUID, _ edit: UserEdit, as actor: Actor) async throws -> User
    /// Deletes a user (the operator, or the user themself): their memberships (each couple's log records it) and
    /// identities go, and the operator's log keeps their ids without their address or name. Refused (`last_owner`)
    /// while they are a couple's last active owner.
    func deleteUser(_ user: UUID, as actor: Actor) async throws
    /// The user of `identity`, made (with the identity) on its first sign-in; see `public.sign_in` for how an
    /// identity is linked to an existing user (only by a verified address).
    func signIn(_ identity: ExternalIdentity) async throws -> SignedIn

    /// Creates a couple with `owner` as its first owner (an end user may create one only for themself).
    func createCouple(name: String, owner: UUID, as actor: Actor) async throws -> Couple
    /// The couple with its invite domains and every member, in one snapshot (collaborators.view).
    func coupleDetail(_ couple: UUID, as actor: Actor) async throws -> CoupleDetail
    /// Renames a couple (couple.edit).
    func renameCouple(_ couple: UUID, to name: String, as actor: Actor) async throws -> Couple
    /// Deletes a couple and everything of it (couple.delete); its audit log stays and records the deletion.
    func deleteCouple(_ couple: UUID, as actor: Actor) async throws
    /// A page of couples, oldest first: at most `limit` (1 to 1000) after `after` (`Couple.cursor`).
    func couples(limit: Int, after: PageCursor<Date>?) async throws -> [Couple]

    /// The couples `user` belongs to, in the order they joined them: a page of at most `limit` (1 to 1000) after
    /// `after` (`UserCouple.cursor`).
    func userCouples(_ user: UUID, limit: Int, after: PageCursor<Date>?, as actor: Actor) async throws -> [UserCouple]

    /// Everything `user` may do in `couple`, read together with the couple's revision (for trusted backends;
    /// no acting user).
    func permissionSet(couple: UUID, user: UUID) async throws -> PermissionSet
    func permissions(couple: UUID, user: UUID, as actor: Actor) async throws -> [Permission]
    func role(couple: UUID, user: UUID, as actor: Actor) async throws -> RoleName?
    func canLeave(couple: UUID, user: UUID, as actor: Actor) async throws -> Bool
    func roles() async throws -> [RoleDefinition]
    /// Every role the couple's members can hold: the policy's (by rank), then the couple's own (by name).
    func roles(couple: UUID, as actor: Actor) async throws -> [CoupleRole]
    /// A role of the couple's own; the author needs roles.manage and every permission it grants.
    func createRole(couple: UUID, name: RoleName, description: String, permissions: [Permission], as actor: Actor)
        async throws -> CoupleRole
    /// Changes the description and (when given) the permissions of a role the couple defined.
    func editRole(
        couple: UUID, name: RoleName, description: String?, permissions: [Permission]?, as actor: Actor
    ) async throws -> CoupleRole
    /// Deletes a role the couple defined; one still held needs `reassign`, the role its holders move to.
    func deleteRole(couple: UUID, name: RoleName, reassign: RoleName?, as actor: Actor) async throws

    /// A page of the couple's members in the order they joined: at most `limit` (1 to 1000) after `after`
    /// (`Member.cursor`).
    func members(couple: UUID, limit: Int, after: PageCursor<Date>?, as actor: Actor) async throws -> [Member]
    /// Adds `user` with `role`, or changes the role they hold, until `expiresAt` (nil: for good).
    func grant(couple: UUID, user: UUID, role: RoleName, expiresAt: Date?, as actor: Actor) async throws -> Membership
    func suspend(couple: UUID, user: UUID, as actor: Actor) async throws -> Membership
    func reactivate(couple: UUID, user: UUID, as actor: Actor) async throws -> Membership
    func remove(couple: UUID, user: UUID, as actor: Actor) async throws -> Membership
    /// `user` leaves; nil means the acting user.
    func leave(couple: UUID, user: UUID?, as actor: Actor) async throws -> Membership
    func transferOwnership(couple: UUID, to newOwner: UUID, as actor: Actor) async throws -> Membership

    /// `membershipExpiresAt`: when the membership that accepting creates expires (nil: never). An address that is
    /// a member's is refused (`alreadyExists`): accepting could only fail.
    func createInvitation(
        couple: UUID, token: SecretToken, role: RoleName, email: EmailAddress?, expiresIn: Duration,
        membershipExpiresAt: Date?, as actor: Actor
    ) async throws -> Invitation
    func invitationPreview(tokenHash: [UInt8]) async throws -> InvitationPreview?
    /// Accepts for `user` (nil: the acting user).
    func acceptInvitation(tokenHash: [UInt8], user: UUID?, as actor: Actor) async throws -> Membership
    /// Accepts for a user signed in through an identity: an invitation bound to an address only when the identity's
    /// verified address is that one.
    func acceptInvitation(tokenHash: [UInt8], signedIn: SignedIn) async throws -> Membership
    func revokeInvitation(couple: UUID, invitation: UUID, as actor: Actor) async throws
    /// Revokes `invitation` and issues `tokenHash` for the same role and email, atomically: when either step is
    /// refused, nothing changes.
    func resendInvitation(
        couple: UUID, invitation: UUID, token: SecretToken, expiresIn: Duration, as actor: Actor
    ) async throws -> Invitation
    /// A page of the couple's invitations (of `status` only, when given), oldest first: at most `limit` (1 to
    /// 1000) after `after` (`Invitation.cursor`).
    func invitations(couple: UUID, status: InvitationStatus?, limit: Int, after: PageCursor<Date>?, as actor: Actor)
        async throws -> [Invitation]

    /// The couple's audit log, oldest first: the entries at or after `since` and, when given, older than entry
    /// `before` (`not_found` when the couple's log has no such entry), only the newest `last` of them when given
    /// (at least 1).
    func audit(couple: UUID, since: Date?, before: Int64?, last: Int?, as actor: Actor) async throws -> [AuditEntry]
}

/// Refuses a page size the SQL functions refuse too (`invalid_input`): a page holds 1 to 1000 items.
public func requirePageSize(_ limit: Int) throws {
    guard (1...1000).contains(limit) else {
        throw CollaborationError(.invalidInput, "page size must be between 1 and 1000, not \(limit)")
    }
}

/// Every item of a keyset-paged listing: full pages read in turn, each after the last id of the page before.
public func everyPage<Item, Cursor>(
    id: (Item) -> Cursor, isolation: isolated (any _Concurrency.Actor)? = #isolation,
    _ page: (_ limit: Int, _ after: Cursor?) async throws -> [Item]
) async throws -> [Item] {
    var items: [Item] = []
    try await forEachPage(id: id, page) { items += $0 }
    return items
}

/// Reads a keyset-paged listing a full page at a time, as `everyPage` does, handing each page to `each` before
/// reading the next.
public func forEachPage<Item, Cursor>(
    id: (Item) -> Cursor, isolation: isolated (any _Concurrency.Actor)? = #isolation,
    _ page: (_ limit: Int, _ after: Cursor?) async throws -> [Item], each: ([Item]) async throws -> Void
) async throws {
    let size = 1000
    var after: Cursor?
    while true {
        let next = try await page(size, after)
        try await each(next)
        guard next.count == size, let last = next.last else { return }
        after = id(last)
    }
}

extension CollaborationRepository {
    public func addUser(email: EmailAddress, displayName: String?) async throws -> User {
        try await addUser(email: email, displayName: displayName, identity: nil)
    }

    /// A membership that holds until changed.
    public func grant(couple: UUID, user: UUID, role: RoleName, as actor: Actor) async throws -> Membership {
        try await grant(couple: couple, user: user, role: role, expiresAt: nil, as: actor)
    }
}
