import Foundation

/// The tenant: two people planning a wedding, and everyone they invite.
public struct Couple: Sendable, Hashable, Codable, ListedRow {
    public let id: UUID
    public var name: String
    public let createdAt: Date
    /// Advanced by every membership change.
    public var revision: Int64

    /// A user creates couples themselves only while owning fewer than this, until the operator sets another
    /// number (`couple_settings.owned_per_user`, `rbac couples limit`).
    public static let ownedPerUserByDefault = 20

    public init(id: UUID, name: String, createdAt: Date, revision: Int64) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.revision = revision
    }

    /// The page of couples after this one, as listed.
    public var cursor: PageCursor<Date> { PageCursor(id: id, key: createdAt) }

    /// Checks a couple name a person typed.
    public static func validateName(_ name: String) throws(CollaborationError) -> String {
        do { return try validatedName(name, "a couple's name") } catch { throw CollaborationError(error) }
    }
}

public struct User: Sendable, Hashable, Codable, ListedRow {
    public let id: UUID
    public let email: String
    public let displayName: String?
    /// The accounts at identity providers the user signs in with.
    public let identities: [UserIdentity]

    public init(id: UUID, email: String, displayName: String?, identities: [UserIdentity] = []) {
        self.id = id
        self.email = email
        self.displayName = displayName
        self.identities = identities
    }

    /// The page of users after this one, as listed.
    public var cursor: PageCursor<String> { PageCursor(id: id, key: email) }

    /// Checks a display name a person typed.
    public static func validateDisplayName(_ name: String) throws(CollaborationError) -> String {
        do { return try validatedName(name, "the display name") } catch { throw CollaborationError(error) }
    }

    /// Checks the text users are searched for by: 1 to 200 characters, as long as the longest name, counted as
    /// names are (`storedLength`) and as openapi.json's `maxLength` counts them.
    public static func validateSearch(_ search: String?) throws(CollaborationError) {
        guard let search else { return }
        guard (1...200).contains(search.storedLength) else {
            throw CollaborationError(
                .invalidInput, "a search must be 1 to 200 characters, not \(search.storedLength)")
        }
    }

    /// Whether the address or display name contains `search` (of one or two characters: begins with it),
    /// whatever its case.
    public func matches(_ search: String) -> Bool {
        let search = search.lowercased()
        return [email, displayName ?? ""].map { $0.lowercased() }.contains {
            Self.searchesAnywhere(search) ? $0.contains(search) : $0.hasPrefix(search)
        }
    }

    /// Whether `search` is found anywhere in an address or name, rather than at its start. One or two characters
    /// hold no trigram, so the trigram indexes (`sql/0020_user_search.sql`) could not find them anywhere, and a
    /// rare pair would read every user; at the start, an index in text order finds them (`sql/0024`).
    public static func searchesAnywhere(_ search: String) -> Bool { search.count >= 3 }
}

/// Changes to a user; nil leaves a field as it is. Only the operator changes an address (see `public.edit_user`).
public struct UserEdit: Sendable, Hashable {
    public var email: EmailAddress?
    /// `.some(nil)` removes the display name.
    public var displayName: String??
    /// An account at an identity provider to link to the user, and one of theirs to unlink: the operator's alone,
    /// as the address is, since an identity signs in as its user.
    public var linkIdentity: UserIdentity?
    public var unlinkIdentity: UserIdentity?

    public init(
        email: EmailAddress? = nil, displayName: String?? = nil, linkIdentity: UserIdentity? = nil,
        unlinkIdentity: UserIdentity? = nil
    ) {
        self.email = email
        self.displayName = displayName
        self.linkIdentity = linkIdentity
        self.unlinkIdentity = unlinkIdentity
    }

    /// Refuses what `actor` may not change, and an identity to link that no provider could name.
    public func validate(as actor: Actor) throws(CollaborationError) {
        if case .user = actor, linkIdentity != nil || unlinkIdentity != nil {
            throw CollaborationError(
                .permissionDenied, "permission denied: only the operator links and unlinks identities")
        }
        if let linked = linkIdentity { try ExternalIdentity.validate(issuer: linked.issuer, subject: linked.subject) }
    }

    /// Why an identity to unlink was not found.
    public static func notLinked(_ user: UUID) -> CollaborationError {
        CollaborationError(
            .notFound, "user \(user.uuidString.lowercased()) has no such identity (rbac users show lists theirs)")
    }
}

public enum MembershipStatus: String, Sendable, Codable {
    /// `expired`: past its expiry, whatever it was before; it grants nothing.
    case active, suspended, expired
}

/// A user's place in a couple, as a write left it.
public struct Membership: Sendable, Hashable, Codable {
    public let coupleID: UUID
    public let userID: UUID
    public var role: RoleName
    public var status: MembershipStatus
    /// The couple's revision after the write: a check passing it as `min_revision` sees this write.
    public var revision: Int64
    /// From this instant the membership grants nothing; nil: it holds until changed.
    public var expiresAt: Date?

    public init(
        coupleID: UUID, userID: UUID, role: RoleName, status: MembershipStatus, revision: Int64, expiresAt: Date? = nil
    ) {
        self.coupleID = coupleID
        self.userID = userID
        self.role = role
        self.status = status
        self.revision = revision
        self.expiresAt = expiresAt
    }
}

/// Everything a user may do in a couple, and the couple's revision it was read at (nil: no such couple).
public struct PermissionSet: Sendable, Hashable {
    public let permissions: Set<Permission>
    public let revision: Int64?
    /// The role the permissions come from (nil: not an active member, and so nothing), and the policy revision
    /// they were read at, when the repository counts policy changes: a change to what other roles grant leaves
    /// the set as it was.
    public let role: String?
    public let policyRevision: Int64?
    /// When the membership the permissions come from expires: the set must not be used from then on.
    public let expiresAt: Date?

    public init(
        permissions: Set<Permission>, revision: Int64?, role: String? = nil, policyRevision: Int64? = nil,
        expiresAt: Date? = nil
    ) {
        self.permissions = permissions
        self.revision = revision
        self.role = role
        self.policyRevision = policyRevision
        self.expiresAt = expiresAt
    }
}

/// A couple as `rbac couples show` and `GET /v1/couples/{couple}` show it, read together: its row, the email
/// domains its invitations may name (empty: any) and every member.
public struct CoupleDetail: Sendable, Hashable, Encodable {
    public let couple: Couple
    public let inviteDomains: [String]
    public let members: [Member]

    public init(couple: Couple, inviteDomains: [String], members: [Member]) {
        self.couple = couple
        self.inviteDomains = inviteDomains
        self.members = members
    }
}

/// A member as listed: the membership with who the user is.
public struct Member: Sendable, Hashable, Codable, ListedRow {
    public let user: User
    public let role: RoleName
    public let status: MembershipStatus
    public let joinedAt: Date
    public let expiresAt: Date?

    public init(user: User, role: RoleName, status: MembershipStatus, joinedAt: Date, expiresAt: Date? = nil) {
        self.user = user
        self.role = role
        self.status = status
        self.joinedAt = joinedAt
        self.expiresAt = expiresAt
    }

    /// The page of members after this one, as listed.
    public var cursor: PageCursor<Date> { PageCursor(id: user.id, key: joinedAt) }
}

public enum InvitationStatus: String, Sendable, Codable, CaseIterable {
    case pending, accepted, revoked, expired
}

public struct Invitation: Sendable, Hashable, Codable, ListedRow {
    public let id: UUID
    public let coupleID: UUID
    public var role: RoleName
    public let email: String?
    public let inviter: String
    public let createdAt: Date
    public let expiresAt: Date
    public let status: InvitationStatus
    public let acceptedBy: UUID?
    /// When the membership that accepting creates expires; nil: it holds until changed.
    public let membershipExpiresAt: Date?

    /// A couple makes at most this many invitations in an hour, until the operator sets another number
    /// (`invitation_settings.per_couple_per_hour`, `rbac invitations limit`).
    public static let perCouplePerHourByDefault = 50

    public init(
        id: UUID, coupleID: UUID, role: RoleName, email: String?, inviter: String, createdAt: Date, expiresAt: Date,
        status: InvitationStatus, acceptedBy: UUID?, membershipExpiresAt: Date? = nil
    ) {
        self.membershipExpiresAt = membershipExpiresAt
        self.id = id
        self.coupleID = coupleID
        self.role = role
        self.email = email
        self.inviter = inviter
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.status = status
        self.acceptedBy = acceptedBy
    }

    /// The page of invitations after this one, as listed.
    public var cursor: PageCursor<Date> { PageCursor(id: id, key: createdAt) }
}

/// What an invitation link's page shows before anyone accepts.
public struct InvitationPreview: Sendable, Hashable, Codable {
    /// Whom an invitation is from when no user made it (the operator did, or its inviter is gone), as invitees
    /// are told on the page and in the email; rbac.inviter_shown says the same in SQL.
    public static let administrator = "The couple's administrator"

    public let coupleID: UUID
    public let coupleName: String
    public let role: RoleName
    public let inviter: String
    /// For an invitation bound to an address, that address masked (`o•••@example.com`); nil for any address.
    public let emailHint: String?
    public let expiresAt: Date
    public let status: InvitationStatus
    /// What the role is for, in its author's words (the policy's, or the couple's for a role it defined).
    public let roleDescription: String?
    /// When the membership that accepting creates expires; nil: it holds until changed.
    public let membershipExpiresAt: Date?

    public init(
        coupleID: UUID, coupleName: String, role: RoleName, inviter: String, emailHint: String?, expiresAt: Date,
        status: InvitationStatus, roleDescription: String? = nil, membershipExpiresAt: Date? = nil
    ) {
        self.roleDescription = roleDescription
        self.membershipExpiresAt = membershipExpiresAt
        self.coupleID = coupleID
        self.coupleName = coupleName
        self.role = role
        self.inviter = inviter
        self.emailHint = emailHint
        self.expiresAt = expiresAt
        self.status = status
    }
}

/// A role as the policy defines it.
public struct RoleDefinition: Sendable, Hashable, Codable {
    public let name: RoleName
    public let rank: Int
    public let description: String
    public let permissions: [Permission]
    public let grants: [RoleName]

    public init(name: RoleName, rank: Int, description: String, permissions: [Permission], grants: [RoleName]) {
        self.name = name
        self.rank = rank
        self.description = description
        self.permissions = permissions
        self.grants = grants
    }
}

/// A role members of one couple can hold: one of the policy's, or one the couple defined for itself.
public struct CoupleRole: Sendable, Hashable, Codable {
    /// How many roles one couple may define (the couple_roles_guard trigger's limit).
    public static let mostPerCouple = 100

    public let name: RoleName
    public let description: String
    public let permissions: [Permission]
    public let coupleDefined: Bool

    public init(name: RoleName, description: String, permissions: [Permission], coupleDefined: Bool) {
        self.name = name
        self.description = description
        self.permissions = permissions
        self.coupleDefined = coupleDefined
    }

    /// Checks a role description a person typed: 1 to 500 characters on one line, trimmed of spaces, without a
    /// control character anywhere (a tab at its end included).
    public static func validateDescription(_ text: String) throws(CollaborationError) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard (1...500).contains(trimmed.storedLength), !containsControlCharacter(text) else {
            throw CollaborationError(.invalidInput, "a role's description must be 1 to 500 characters, on one line")
        }
        do { try refuseBlank(trimmed, "a role's description") } catch { throw CollaborationError(error) }
        return trimmed
    }
}

public struct AuditEntry: Sendable, Hashable, Codable {
    public let id: Int64
    public let at: Date
    public let actor: String
    public let action: String
    /// The row as it was, by column; nil for an insert.
    public let before: [String: JSONValue]?
    /// The row as it became; nil for a delete.
    public let after: [String: JSONValue]?

    public init(
        id: Int64, at: Date, actor: String, action: String, before: [String: JSONValue]?,
        after: [String: JSONValue]?
    ) {
        self.id = id
        self.at = at
        self.actor = actor
        self.action = action
        self.before = before
        self.after = after
    }
}

extension AuditEntry {
    /// Refuses (`invalid_input`) a number of newest entries to read that is below 1.
    public static func requireCount(_ last: Int?) throws {
        if let last, last < 1 {
            throw CollaborationError(.invalidInput, "the number of entries to show must be at least 1, not \(last)")
        }
    }

    /// The newest `last` entries (nil: all) that `read` gives, asked for one more than that to learn whether older
    /// ones remain, with the `before` of the page before them: nil when none remain.
    public static func page(
        last: Int?, isolation: isolated (any _Concurrency.Actor)? = #isolation,
        _ read: (_ last: Int?) async throws -> [AuditEntry]
    ) async throws -> (entries: [AuditEntry], nextBefore: Int64?) {
        var entries = try await read(last.map { $0 + 1 })
        guard let last, entries.count > last else { return (entries, nil) }
        entries.removeFirst()
        return (entries, entries.first?.id)
    }

    /// The refusal for a cursor that names no entry of the log read (`log`: "this couple's log").
    public static func notFound(_ id: Int64, in log: String) -> CollaborationError {
        CollaborationError(.notFound, "no audit entry \(id) in \(log)")
    }
}

/// One of a user's couples, as listed for that user.
public struct UserCouple: Sendable, Hashable, Codable, ListedRow {
    public let coupleID: UUID
    public let coupleName: String
    public let role: RoleName
    public let status: MembershipStatus
    public let joinedAt: Date
    public let expiresAt: Date?

    public init(
        coupleID: UUID, coupleName: String, role: RoleName, status: MembershipStatus, joinedAt: Date,
        expiresAt: Date? = nil
    ) {
        self.coupleID = coupleID
        self.coupleName = coupleName
        self.role = role
        self.status = status
        self.joinedAt = joinedAt
        self.expiresAt = expiresAt
    }

    /// The page of the user's couples after this one, as listed.
    public var cursor: PageCursor<Date> { PageCursor(id: coupleID, key: joinedAt) }
}
