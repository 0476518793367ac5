import Collaboration
import Foundation
import Postgres
import Secrets

/// What one sweep recorded: how many memberships and invitations had expired unrecorded.
public struct ExpirySweep: Sendable, Hashable {
    public let memberships: Int
    public let invitations: Int
    /// The expiries it passed over, left for a later sweep: on Citus, the couple's worker could not be reached.
    public let unreached: Int
    /// Those workers (host:port), in the order the sweep found them down.
    public let unreachedWorkers: [String]
}

/// The collaboration repository on PostgreSQL: each operation is one transaction that names the actor the way
/// the SQL functions read it (request.jwt.claims for an end user; rbac.actor_label for the operator) and calls
/// the function that enforces the rules.
public struct PostgresCollaborationRepository: CollaborationRepository {
    private let pool: PostgresConnectionPool
    private let cache: PermissionCache?
    private let permissionSets: PermissionSetLoader
    private let deliveryKey: DeliveryKey?

    /// Membership writes made through this repository drop their couple from `cache` as soon as they commit,
    /// before any notification could: the next check on this instance sees them.
    /// With a delivery key, an invitation's token is sealed into the outbox's messages about it, for the link
    /// they carry; without one they carry none.
    public init(
        pool: PostgresConnectionPool, invalidating cache: PermissionCache? = nil, deliveryKey: DeliveryKey? = nil
    ) {
        self.pool = pool
        self.cache = cache
        self.deliveryKey = deliveryKey
        permissionSets = PermissionSetLoader(pool: pool)
    }

    // MARK: Users and couples

    public func addUser(email: EmailAddress, displayName: String?, identity: UserIdentity?) async throws -> User {
        if let identity { try ExternalIdentity.validate(issuer: identity.issuer, subject: identity.subject) }
        return try await run(as: nil) { connection in
            let rows = try await connection.query(
                """
                WITH added AS (
                    INSERT INTO users (email, display_name) VALUES (\(email.rawValue), \(displayName))
                    RETURNING id, email, display_name),
                identity AS (
                    INSERT INTO user_identities (issuer, subject, user_id)
                    SELECT \(identity?.issuer), \(identity?.subject), id FROM added WHERE \(identity?.issuer)::text IS NOT NULL
                    RETURNING issuer, subject)
                SELECT id, email, display_name, ARRAY(SELECT issuer FROM identity) AS identity_issuers,
                       ARRAY(SELECT subject FROM identity) AS identity_subjects
                FROM added
                """)
            return try Self.user(rows[0])
        }
    }

    /// Identities are linked and unlinked by plain statements, as `addUser` adds one: only the operator may.
    public func editUser(_ user: UUID, _ edit: UserEdit, as actor: Actor) async throws -> User {
        try edit.validate(as: actor)
        let name = edit.displayName.map { $0 ?? "" }
        let rows = try await run(as: actor) { connection in
            let edited = try await connection.query(
                "SELECT \(sql: Self.userColumns) FROM edit_user(\(user), \(edit.email?.rawValue), \(name)) AS users")
            guard edit.linkIdentity != nil || edit.unlinkIdentity != nil else { return edited }
            if let unlinked = edit.unlinkIdentity {
                let removed = try await connection.query(
                    """
                    DELETE FROM user_identities
                    WHERE user_id = \(user) AND issuer = \(unlinked.issuer) AND subject = \(unlinked.subject)
                    RETURNING user_id
                    """)
                guard !removed.isEmpty else { throw UserEdit.notLinked(user) }
            }
            if let linked = edit.linkIdentity {
                // One of the user's already is left as it is; another user's is refused by the primary key.
                try await connection.execute(
                    """
                    INSERT INTO user_identities (issuer, subject, user_id)
                    SELECT \(linked.issuer), \(linked.subject), \(user)
                    WHERE NOT EXISTS (SELECT FROM user_identities
                                      WHERE issuer = \(linked.issuer) AND subject = \(linked.subject) AND user_id = \(user))
                    """)
            }
            return try await connection.query("SELECT \(sql: Self.userColumns) FROM users WHERE id = \(user)")
        }
        return try Self.user(rows[0])
    }

    public func deleteUser(_ user: UUID, as actor: Actor) async throws {
        _ = try await run(as: actor) { connection in try await connection.execute("SELECT delete_user(\(user))") }
    }

    public func user(_ reference: UserReference) async throws -> User {
        let rows = try await run(as: nil) { connection in
            switch reference {
            case .id(let id):
                try await connection.query("SELECT \(sql: Self.userColumns) FROM users WHERE id = \(id)")
            case .email(let email):
                try await connection.query(
                    "SELECT \(sql: Self.userColumns) FROM users WHERE lower(email) = lower(\(email.rawValue))")
            }
        }
        guard let row = rows.first else { throw CollaborationError(.notFound, "user \(reference) does not exist") }
        return try Self.user(row)
    }

    public func users(matching search: String?, limit: Int, after: PageCursor<String>?) async throws -> [User] {
        try requirePageSize(limit)
        try User.validateSearch(search)
        // A LIKE pattern: anywhere, which the trigram indexes (sql/0020) answer when few users match, or for one or
        // two characters at the start, which the text-order indexes (sql/0024) answer. The search's own
        // backslashes, percent signs and underscores stand for themselves.
        let pattern = search.map {
            let literal = $0.replacing("\\", with: "\\\\").replacing("%", with: "\\%").replacing("_", with: "\\_")
            return (User.searchesAnywhere($0) ? "%" : "") + literal + "%"
        }
        return try await run(as: nil) { connection in
            let rows = try await connection.query(
                """
                SELECT \(sql: Self.userColumns) FROM users
                WHERE (\(after?.id)::uuid IS NULL
                       OR lower(email) > lower(coalesce(\(after?.key), (SELECT email FROM users WHERE id = \(after?.id)))))
                  AND (\(pattern)::text IS NULL OR lower(email) LIKE lower(\(pattern))
                       OR lower(display_name) LIKE lower(\(pattern)))
                ORDER BY lower(email) LIMIT \(limit)
                """)
            // An empty page after an unknown user is a mistake to report, not the end of the listing.
            if rows.isEmpty, let after, after.key == nil {
                let known = try await connection.query("SELECT 1 FROM users WHERE id = \(after.id)")
                guard !known.isEmpty else {
                    throw CollaborationError(.notFound, "user \(after.id.uuidString.lowercased()) does not exist")
                }
            }
            return try rows.map(Self.user)
        }
    }

    /// A user's columns, with their identities in the order they were added.
    private static let userColumns: StaticString = """
        id, email, display_name,
        ARRAY(SELECT issuer FROM user_identities i WHERE i.user_id = users.id
              ORDER BY created_at, issuer, subject) AS identity_issuers,
        ARRAY(SELECT subject FROM user_identities i WHERE i.user_id = users.id
              ORDER BY created_at, issuer, subject) AS identity_subjects
        """

    public func signIn(_ identity: ExternalIdentity) async throws -> SignedIn {
        // sign_in drops a name with a control character, as a provider's name is only a default, and an address
        // that is none, saying why when a new user needs one; either with a NUL cannot even be sent, so it is
        // dropped here.
        func sendable(_ text: String?) -> String? { text.flatMap { $0.contains("\0") ? nil : $0 } }
        // Recorded in the operator's log as the service signing someone in.
        return try await run(as: .operator(label: "sign-in")) { connection in
            let row = try await connection.query(
                """
                SELECT user_id, created FROM sign_in(\(identity.issuer), \(identity.subject),
                    \(sendable(identity.email)), \(identity.emailVerified), \(sendable(identity.name)))
                """)[0]
            return SignedIn(user: try row.decode("user_id"), identity: identity, created: try row.decode("created"))
        }
    }

    public func createCouple(name: String, owner: UUID, as actor: Actor) async throws -> Couple {
        try await run(as: actor) { connection in
            try Self.couple(
                try await connection.query(
                    "SELECT id, name, created_at, revision FROM create_couple(\(name), \(owner))")[0])
        }
    }

    public func renameCouple(_ couple: UUID, to name: String, as actor: Actor) async throws -> Couple {
        try await run(as: actor) { connection in
            try Self.couple(
                try await connection.query(
                    "SELECT id, name, created_at, revision FROM rename_couple(\(couple), \(name))")[0])
        }
    }

    public func deleteCouple(_ couple: UUID, as actor: Actor) async throws {
        try await run(as: actor) { _ = try await $0.query("SELECT delete_couple(\(couple))") }
    }

    /// Read in one REPEATABLE READ snapshot: the revision shown is the one its members are at.
    public func coupleDetail(_ id: UUID, as actor: Actor) async throws -> CoupleDetail {
        try await run(as: actor, isolation: .repeatableRead) { connection in
            let rows = try await connection.query(
                "SELECT id, name, created_at, revision, invite_domains FROM couples WHERE id = \(id)")
            guard let row = rows.first else {
                throw CollaborationError(.notFound, "couple \(id.uuidString.lowercased()) does not exist")
            }
            let members = try await everyPage(id: \.cursor) { try await Self.members(id, $0, $1, on: connection) }
            return CoupleDetail(
                couple: try Self.couple(row), inviteDomains: try row.decode("invite_domains"), members: members)
        }
    }

    public func couples(limit: Int, after: PageCursor<Date>?) async throws -> [Couple] {
        try requirePageSize(limit)
        return try await run(as: nil) { connection in
            let rows = try await connection.query(
                """
                SELECT id, name, created_at, revision FROM couples
                WHERE \(after?.id)::uuid IS NULL
                   OR (created_at, id) > (
                       coalesce(\(after?.key), (SELECT created_at FROM couples WHERE id = \(after?.id))), \(after?.id))
                ORDER BY created_at, id LIMIT \(limit)
                """)
            if rows.isEmpty, let after, after.key == nil {
                let known = try await connection.query("SELECT 1 FROM couples WHERE id = \(after.id)")
                guard !known.isEmpty else {
                    throw CollaborationError(.notFound, "couple \(after.id.uuidString.lowercased()) does not exist")
                }
            }
            return try rows.map(Self.couple)
        }
    }

    public func userCouples(_ user: UUID, limit: Int, after: PageCursor<Date>?, as actor: Actor) async throws
        -> [UserCouple]
    {
        try await run(as: actor) { connection in
            try await connection.query(
                """
                SELECT couple_id, couple_name, role, status, joined_at, expires_at
                FROM user_couples(\(user), \(Int32(clamping: limit)), \(after?.id), \(after?.key))
                """
            ).map { row in
                UserCouple(
                    coupleID: try row.decode("couple_id"), coupleName: try row.decode("couple_name"),
                    role: try Self.roleName(row.decode("role")), status: try Self.status(row.decode("status")),
                    joinedAt: try row.decode("joined_at"), expiresAt: try row.decode("expires_at"))
            }
        }
    }

    // MARK: Permissions

    /// The hot path of checks: sets asked for while others load are read together, by one statement.
    public func permissionSet(couple: UUID, user: UUID) async throws -> PermissionSet {
        try await permissionSets.load(couple: couple, user: user)
    }

    public func permissions(couple: UUID, user: UUID, as actor: Actor) async throws -> [Permission] {
        try await run(as: actor) { connection in
            let names: [String] = try await connection.query(
                "SELECT user_permissions(\(couple), \(user)) AS permissions")[0].decode("permissions")
            return names.compactMap(Permission.init(rawValue:))
        }
    }

    public func role(couple: UUID, user: UUID, as actor: Actor) async throws -> RoleName? {
        try await run(as: actor) { connection in
            let name: String? = try await connection.query("SELECT user_role(\(couple), \(user)) AS role")[0]
                .decode("role")
            return name.flatMap(RoleName.init(rawValue:))
        }
    }

    public func canLeave(couple: UUID, user: UUID, as actor: Actor) async throws -> Bool {
        try await run(as: actor) { connection in
            try await connection.query("SELECT can_leave_collaboration(\(couple), \(user)) AS allowed")[0]
                .decode("allowed")
        }
    }

    public func roles() async throws -> [RoleDefinition] {
        try await run(as: nil) { connection in
            try await connection.query(
                """
                SELECT r.name, r.rank, r.description,
                       coalesce((SELECT array_agg(permission ORDER BY permission) FROM role_permissions WHERE role = r.name), '{}') AS permissions,
                       coalesce((SELECT array_agg(g.grantable_role ORDER BY gr.rank) FROM role_grants g
                                 JOIN roles gr ON gr.name = g.grantable_role WHERE g.role = r.name), '{}') AS grants
                FROM roles r ORDER BY r.rank
                """
            ).map { row in
                RoleDefinition(
                    name: try Self.roleName(row.decode("name")), rank: try row.decode("rank", as: Int.self),
                    description: try row.decode("description"),
                    permissions: try row.decode("permissions", as: [String].self).compactMap(
                        Permission.init(rawValue:)),
                    grants: try row.decode("grants", as: [String].self).compactMap(RoleName.init(rawValue:)))
            }
        }
    }

    public func roles(couple: UUID, as actor: Actor) async throws -> [CoupleRole] {
        try await run(as: actor) { connection in
            try await connection.query("SELECT * FROM couple_roles(\(couple))").map(Self.coupleRole)
        }
    }

    public func createRole(
        couple: UUID, name: RoleName, description: String, permissions: [Permission], as actor: Actor
    ) async throws -> CoupleRole {
        try await changingRoles(of: couple, as: actor) { connection in
            try await Self.coupleRole(
                connection.query(
                    """
                    SELECT * FROM create_couple_role(
                        \(couple), \(name.rawValue), \(description), \(permissions.map(\.rawValue)))
                    """)[0])
        }
    }

    public func editRole(
        couple: UUID, name: RoleName, description: String?, permissions: [Permission]?, as actor: Actor
    ) async throws -> CoupleRole {
        try await changingRoles(of: couple, as: actor) { connection in
            try await Self.coupleRole(
                connection.query(
                    """
                    SELECT * FROM edit_couple_role(
                        \(couple), \(name.rawValue), \(description), \(permissions?.map(\.rawValue)))
                    """)[0])
        }
    }

    public func deleteRole(couple: UUID, name: RoleName, reassign: RoleName?, as actor: Actor) async throws {
        try await changingRoles(of: couple, as: actor) { connection in
            _ = try await connection.query(
                "SELECT delete_couple_role(\(couple), \(name.rawValue), \(reassign?.rawValue))")
        }
    }

    /// Runs a change to the couple's roles, which may change what its members hold; once it has committed, the
    /// couple's cached permissions are dropped, as after a membership change.
    private func changingRoles<T: Sendable>(
        of couple: UUID, as actor: Actor, _ write: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let (result, revision) = try await run(as: actor) { connection in
            (try await write(connection), try await Self.revision(of: couple, on: connection))
        }
        cache?.invalidate(couple: couple, revision: revision)
        return result
    }

    // MARK: Memberships

    public func members(couple: UUID, limit: Int, after: PageCursor<Date>?, as actor: Actor) async throws
        -> [Member]
    {
        try await run(as: actor) { try await Self.members(couple, limit, after, on: $0) }
    }

    private static func members(
        _ couple: UUID, _ limit: Int, _ after: PageCursor<Date>?, on connection: PostgresConnection
    ) async throws -> [Member] {
        try await connection.query(
            """
            SELECT user_id, email, display_name, role, status, joined_at, expires_at
            FROM couple_members(\(couple), \(Int32(clamping: limit)), \(after?.id), \(after?.key))
            """
        ).map { row in
            Member(
                user: User(
                    id: try row.decode("user_id"), email: try row.decode("email"),
                    displayName: try row.decode("display_name")),
                role: try roleName(row.decode("role")), status: try status(row.decode("status")),
                joinedAt: try row.decode("joined_at"), expiresAt: try row.decode("expires_at"))
        }
    }

    public func grant(couple: UUID, user: UUID, role: RoleName, expiresAt: Date?, as actor: Actor) async throws
        -> Membership
    {
        try await membership(
            as: actor, "SELECT * FROM grant_role(\(couple), \(user), \(role.rawValue), \(expiresAt))")
    }

    public func suspend(couple: UUID, user: UUID, as actor: Actor) async throws -> Membership {
        try await membership(as: actor, "SELECT * FROM suspend_member(\(couple), \(user))")
    }

    public func reactivate(couple: UUID, user: UUID, as actor: Actor) async throws -> Membership {
        try await membership(as: actor, "SELECT * FROM reactivate_member(\(couple), \(user))")
    }

    public func remove(couple: UUID, user: UUID, as actor: Actor) async throws -> Membership {
        try await membership(as: actor, "SELECT * FROM remove_member(\(couple), \(user))")
    }

    public func leave(couple: UUID, user: UUID?, as actor: Actor) async throws -> Membership {
        try await membership(as: actor, "SELECT * FROM leave_couple(\(couple), \(user))")
    }

    public func transferOwnership(couple: UUID, to newOwner: UUID, as actor: Actor) async throws -> Membership {
        try await membership(as: actor, "SELECT * FROM transfer_ownership(\(couple), \(newOwner))")
    }

    /// A write that returns the membership row it left.
    private func membership(as actor: Actor, _ query: PostgresQuery) async throws -> Membership {
        try await changingMembership(as: actor) { connection in try await Self.membership(connection.query(query)[0]) }
    }

    /// Runs a membership write and reads the revision it brought its couple to, in one transaction; once it
    /// has committed, the couple's cached permissions are dropped.
    private func changingMembership(
        as actor: Actor, through identity: ExternalIdentity? = nil,
        _ write: (PostgresConnection) async throws -> Membership
    ) async throws -> Membership {
        let membership = try await run(as: actor, through: identity) { connection in
            var membership = try await write(connection)
            membership.revision = try await Self.revision(of: membership.coupleID, on: connection)
            return membership
        }
        cache?.invalidate(couple: membership.coupleID, revision: membership.revision)
        return membership
    }

    private static func revision(of couple: UUID, on connection: PostgresConnection) async throws -> Int64 {
        try await connection.query("SELECT revision FROM couples WHERE id = \(couple)").first?.decode("revision") ?? 0
    }

    // MARK: Invitations

    public func createInvitation(
        couple: UUID, token: SecretToken, role: RoleName, email: EmailAddress?, expiresIn: Duration,
        membershipExpiresAt: Date?, as actor: Actor
    ) async throws -> Invitation {
        let seconds = Int(expiresIn.components.seconds)
        return try await run(as: actor) { connection in
            let created = try await connection.query(
                """
                SELECT invitation_id FROM create_invitation(
                    \(couple), \(Data(token.hash)), \(role.rawValue), \(email?.rawValue),
                    make_interval(secs => \(seconds)), \(membershipExpiresAt))
                """)
            let invitation: UUID = try created[0].decode("invitation_id")
            try await sealToken(token, of: invitation, on: connection)
            return try await Self.readBack(invitation, of: couple, on: connection)
        }
    }

    public func resendInvitation(
        couple: UUID, invitation: UUID, token: SecretToken, expiresIn: Duration, as actor: Actor
    ) async throws -> Invitation {
        let seconds = Int(expiresIn.components.seconds)
        return try await run(as: actor) { connection in
            let created = try await connection.query(
                """
                SELECT invitation_id FROM resend_invitation(
                    \(couple), \(invitation), \(Data(token.hash)), make_interval(secs => \(seconds)))
                """)
            let reissued: UUID = try created[0].decode("invitation_id")
            try await sealToken(token, of: reissued, on: connection)
            return try await Self.readBack(reissued, of: couple, on: connection)
        }
    }

    /// Seals the new invitation's token into each message the outbox just queued about it, each box bound to its
    /// row's id, in the invitation's transaction: a worker never sees a message of it without its box. Those are
    /// pending, and found among the pending ones (outbox_due), not among every message the outbox keeps. Under a
    /// key that is not the database's, the invitation is refused (`DeliveryKeyMismatch`): no worker could open
    /// its link, and its email would never go.
    private func sealToken(_ token: SecretToken, of invitation: UUID, on connection: PostgresConnection) async throws {
        guard let deliveryKey else { return }
        let rows = try await connection.query(
            """
            SELECT id FROM outbox
            WHERE status = 'pending' AND event_type = 'invitation.created'
              AND payload ->> 'invitation_id' = \(invitation.uuidString.lowercased())
            """)
        if !rows.isEmpty { try await PostgresOutbox.requireKey(deliveryKey, on: connection) }
        for row in rows {
            let id: UUID = try row.decode("id")
            let box = Data(deliveryKey.seal(Array(token.rawValue.utf8), for: PostgresOutbox.tokenContext(id)))
            _ = try await connection.execute("UPDATE outbox SET token_box = \(box) WHERE id = \(id)")
        }
    }

    /// Sets the email domains a couple may invite (empty: any); the operator's. The domains as stored.
    public func setInviteDomains(couple: UUID, domains: [String]) async throws -> [String] {
        try await run(as: nil) { connection in
            try await connection.query("SELECT set_invite_domains(\(couple), \(domains)) AS domains")[0]
                .decode("domains")
        }
    }

    /// How many invitations a couple may make in an hour; with `set`, sets it first (the operator's).
    public func invitationLimit(set limit: Int? = nil) async throws -> Int {
        try await setting("per_couple_per_hour", of: "invitation_settings", set: limit)
    }

    /// The number of couples owned from which a user creates no more themselves; with `set`, sets it first (the
    /// operator's).
    public func coupleLimit(set limit: Int? = nil) async throws -> Int {
        try await setting("owned_per_user", of: "couple_settings", set: limit)
    }

    /// A limit of the operator's, kept in the one row of `table`; with `value`, set first (the table's CHECK
    /// refuses one out of range).
    private func setting(_ column: String, of table: String, set value: Int?) async throws -> Int {
        try await run(as: nil) { connection in
            if let value {
                _ = try await connection.execute(
                    "UPDATE \(identifier: table) SET \(identifier: column) = \(Int32(clamping: value))")
            }
            return Int(
                try await connection.query("SELECT \(identifier: column) AS value FROM \(identifier: table)")[0]
                    .decode("value", as: Int32.self))
        }
    }

    /// The invitation just written, in the same transaction.
    private static func readBack(_ invitation: UUID, of couple: UUID, on connection: PostgresConnection)
        async throws -> Invitation
    {
        guard let row = try await connection.query("SELECT * FROM couple_invitation(\(couple), \(invitation))").first
        else { throw CollaborationError(.notFound, "the new invitation could not be read back") }
        return try Self.invitation(row, of: couple)
    }

    public func invitationPreview(tokenHash: [UInt8]) async throws -> InvitationPreview? {
        try await run(as: nil) { connection in
            try await connection.query(
                """
                SELECT couple_id, couple_name, role, inviter, email_hint, expires_at, status, role_description,
                       membership_expires_at
                FROM invitation_preview(\(Data(tokenHash)))
                """
            ).first.map { row in
                InvitationPreview(
                    coupleID: try row.decode("couple_id"), coupleName: try row.decode("couple_name"),
                    role: try Self.roleName(row.decode("role")), inviter: try row.decode("inviter"),
                    emailHint: try row.decode("email_hint"), expiresAt: try row.decode("expires_at"),
                    status: try Self.invitationStatus(row.decode("status")),
                    roleDescription: try row.decode("role_description"),
                    membershipExpiresAt: try row.decode("membership_expires_at"))
            }
        }
    }

    public func acceptInvitation(tokenHash: [UInt8], user: UUID?, as actor: Actor) async throws -> Membership {
        try await changingMembership(as: actor) { connection in
            try await Self.accept(tokenHash, user: user, on: connection)
        }
    }

    public func acceptInvitation(tokenHash: [UInt8], signedIn: SignedIn) async throws -> Membership {
        // The claims a provider's token carries: accept_invitation reads the identity's verified address.
        try await changingMembership(as: .user(signedIn.user), through: signedIn.identity) { connection in
            try await Self.accept(tokenHash, user: nil, on: connection)
        }
    }

    /// Accepts, then reads the membership that made (a statement does not see rows the functions it calls
    /// write).
    private static func accept(_ tokenHash: [UInt8], user: UUID?, on connection: PostgresConnection) async throws
        -> Membership
    {
        let accepted = try await connection.query(
            "SELECT couple_id, user_id FROM accept_invitation(\(Data(tokenHash)), \(user))")[0]
        let couple: UUID = try accepted.decode("couple_id")
        let member: UUID = try accepted.decode("user_id")
        return try await membership(
            connection.query("SELECT * FROM memberships WHERE couple_id = \(couple) AND user_id = \(member)")[0])
    }

    public func revokeInvitation(couple: UUID, invitation: UUID, as actor: Actor) async throws {
        try await run(as: actor) { connection in
            _ = try await connection.query("SELECT revoke_invitation(\(couple), \(invitation))")
        }
    }

    public func invitations(
        couple: UUID, status: InvitationStatus?, limit: Int, after: PageCursor<Date>?, as actor: Actor
    ) async throws -> [Invitation] {
        try await run(as: actor) { connection in
            try await connection.query(
                """
                SELECT * FROM couple_invitations(
                    \(couple), \(status?.rawValue), \(Int32(clamping: limit)), \(after?.id), \(after?.key))
                """
            ).map { try Self.invitation($0, of: couple) }
        }
    }

    // MARK: Expiries

    /// Records in the audit logs and the outbox the memberships and invitations that expired unrecorded
    /// (`public.sweep_expired`), `limit` of each to a statement, until one records fewer: what expires meanwhile
    /// waits for the next sweep. The operator's; expiry itself needs no sweep. `progress` hears the count so far
    /// after each statement that leaves more to do, and a cancelled task (serve shutting down) stops between
    /// them. `unreached` and its workers are the last statement's, which passed over every waiting expiry unless
    /// cancelled.
    public func sweepExpired(limit: Int = 1000, progress: (ExpirySweep) -> Void = { _ in }) async throws
        -> ExpirySweep
    {
        var total = ExpirySweep(memberships: 0, invitations: 0, unreached: 0, unreachedWorkers: [])
        repeat {
            let round = try await run(as: nil) { connection in
                let row = try await connection.query(
                    """
                    SELECT memberships_expired, invitations_expired, expiries_unreached, workers_unreached
                    FROM sweep_expired(\(Int32(clamping: limit)))
                    """)[0]
                return ExpirySweep(
                    memberships: Int(try row.decode("memberships_expired", as: Int32.self)),
                    invitations: Int(try row.decode("invitations_expired", as: Int32.self)),
                    unreached: Int(try row.decode("expiries_unreached", as: Int32.self)),
                    unreachedWorkers: try row.decode("workers_unreached"))
            }
            total = ExpirySweep(
                memberships: total.memberships + round.memberships,
                invitations: total.invitations + round.invitations, unreached: round.unreached,
                unreachedWorkers: round.unreachedWorkers)
            guard round.memberships == limit || round.invitations == limit else { break }
            progress(total)
        } while !Task.isCancelled
        return total
    }

    // MARK: Audit

    public func audit(couple: UUID, since: Date?, before: Int64?, last: Int?, as actor: Actor) async throws
        -> [AuditEntry]
    {
        try AuditEntry.requireCount(last)
        return try await run(as: actor) { connection in
            if case .user(let user) = actor {
                let check: PostgresQuery = "SELECT user_has_permission(\(couple), \(user), 'audit.view') AS allowed"
                guard try await connection.query(check)[0].decode("allowed", as: Bool.self) else {
                    throw CollaborationError(
                        .permissionDenied, "permission denied: reading the audit log needs audit.view")
                }
            }
            // The cursor as the log orders it: by time, then id (on Citus the ids of entries written on different
            // nodes come from different ranges). Without one, past every entry.
            var cursor = (at: Date.distantFuture, id: Int64.max)
            if let before {
                let rows = try await connection.query(
                    "SELECT at FROM audit_log WHERE couple_id = \(couple) AND id = \(before)")
                guard let row = rows.first else { throw AuditEntry.notFound(before, in: "this couple's log") }
                cursor = (try row.decode("at"), before)
            }
            // Newest first, so that only the last entries are read (LIMIT NULL reads them all); then in order.
            return try await connection.query(
                """
                SELECT * FROM (
                    SELECT a.id, a.at, coalesce(u.email, a.actor_label) AS actor, a.action,
                           a.before, a.after
                    FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id
                    WHERE a.couple_id = \(couple) AND a.at >= coalesce(\(since), '-infinity')
                      AND (a.at, a.id) < (\(cursor.at), \(cursor.id))
                    ORDER BY a.at DESC, a.id DESC LIMIT \(last)
                ) entries ORDER BY at, id
                """
            ).map(Self.auditEntry)
        }
    }

    /// The operator's audit log (operator_audit_log), oldest first: changes to the policy, the service keys, the row
    /// limits and the users, which belong to no couple. Readable by operators only (`rbac_operator`). `before`,
    /// an entry's id, reads only the entries older than it, as `audit(couple:...)` does.
    public func operatorAudit(since: Date?, before: Int64?, last: Int?) async throws -> [AuditEntry] {
        try AuditEntry.requireCount(last)
        return try await run(as: nil) { connection in
            try await Self.requireOperatorEntry(before, on: connection)
            // The log lives on one node, so its ids alone give its order.
            return try await connection.query(
                """
                SELECT * FROM (
                    SELECT id, at, actor_label AS actor, action, before, after
                    FROM operator_audit_log WHERE at >= coalesce(\(since), '-infinity') AND id < \(before ?? .max)
                    ORDER BY id DESC LIMIT \(last)
                ) entries ORDER BY id
                """
            ).map(Self.auditEntry)
        }
    }

    /// The operator's audit log read forward, a page at a time: at most `limit` entries after entry `after` (nil:
    /// from the first), of those `operatorAudit(since:before:last:)` would give, oldest first. The log gains an
    /// entry for every user made, so all of it is read this way rather than in one piece.
    public func operatorAudit(since: Date?, before: Int64?, after: Int64?, limit: Int) async throws -> [AuditEntry] {
        try requirePageSize(limit)
        return try await run(as: nil) { connection in
            try await Self.requireOperatorEntry(before, on: connection)
            return try await connection.query(
                """
                SELECT id, at, actor_label AS actor, action, before, after
                FROM operator_audit_log
                WHERE at >= coalesce(\(since), '-infinity') AND id < \(before ?? .max) AND id > \(after ?? 0)
                ORDER BY id LIMIT \(limit)
                """
            ).map(Self.auditEntry)
        }
    }

    /// Refuses a `before` cursor that names no entry of the operator's log.
    private static func requireOperatorEntry(_ id: Int64?, on connection: PostgresConnection) async throws {
        if let id, try await connection.query("SELECT 1 FROM operator_audit_log WHERE id = \(id)").isEmpty {
            throw AuditEntry.notFound(id, in: "the operator's log")
        }
    }

    private static func auditEntry(_ row: PostgresRow) throws -> AuditEntry {
        func fields(_ column: String) throws -> [String: JSONValue]? {
            try row.decode(column, as: PostgresJSON?.self)?.decode()
        }
        return AuditEntry(
            id: try row.decode("id"), at: try row.decode("at"), actor: try row.decode("actor"),
            action: try row.decode("action"), before: try fields("before"), after: try fields("after"))
    }

    // MARK: Running as an actor

    /// Runs `body` in a transaction that acts for `actor` (named by `identity`, the end user's sign-in, when
    /// given), mapping the functions' refusals to `CollaborationError`. With no actor (the connection's own
    /// rights, for operator-only work), `body` runs outside a transaction, and so must be one statement: it is
    /// atomic alone, and needs no BEGIN and COMMIT.
    private func run<T: Sendable>(
        as actor: Actor?, through identity: ExternalIdentity? = nil,
        isolation: PostgresConnection.IsolationLevel = .readCommitted, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            guard let actor else { return try await pool.withConnection(body) }
            let acting = try identity.map { try Acting.statements($0, on: pool) } ?? Acting.statements(actor, on: pool)
            return try await pool.withTransaction(isolation: isolation, opening: acting, body)
        } catch let error as PostgresError {
            throw domainError(error)
        }
    }

    // MARK: Decoding

    private static func user(_ row: PostgresRow) throws -> User {
        let issuers: [String] = try row.decode("identity_issuers")
        let subjects: [String] = try row.decode("identity_subjects")
        return User(
            id: try row.decode("id"), email: try row.decode("email"), displayName: try row.decode("display_name"),
            identities: zip(issuers, subjects).map { UserIdentity(issuer: $0, subject: $1) })
    }

    private static func couple(_ row: PostgresRow) throws -> Couple {
        Couple(
            id: try row.decode("id"), name: try row.decode("name"), createdAt: try row.decode("created_at"),
            revision: try row.decode("revision"))
    }

    /// A row of couple_invitations or couple_invitation, which return the same columns.
    private static func invitation(_ row: PostgresRow, of couple: UUID) throws -> Invitation {
        Invitation(
            id: try row.decode("invitation_id"), coupleID: couple,
            role: try roleName(row.decode("role")), email: try row.decode("email"),
            inviter: try row.decode("inviter", as: String?.self) ?? "operator", createdAt: try row.decode("created_at"),
            expiresAt: try row.decode("expires_at"), status: try invitationStatus(row.decode("status")),
            acceptedBy: try row.decode("accepted_by"), membershipExpiresAt: try row.decode("membership_expires_at"))
    }

    /// A row of couple_roles (and of the functions that author roles, which return the same columns).
    private static func coupleRole(_ row: PostgresRow) throws -> CoupleRole {
        CoupleRole(
            name: try roleName(row.decode("name")), description: try row.decode("description"),
            permissions: try row.decode("permissions", as: [String].self).compactMap(Permission.init(rawValue:)),
            coupleDefined: try row.decode("couple_defined"))
    }

    /// A row of memberships; the revision is the caller's to read.
    private static func membership(_ row: PostgresRow) throws -> Membership {
        Membership(
            coupleID: try row.decode("couple_id"), userID: try row.decode("user_id"),
            role: try roleName(row.decode("role")), status: try status(row.decode("status")), revision: 0,
            expiresAt: try row.decode("expires_at"))
    }

    private static func roleName(_ text: String) throws -> RoleName {
        guard let role = RoleName(rawValue: text) else {
            throw PostgresError(.decoding, message: "the database holds a malformed role name")
        }
        return role
    }

    private static func status(_ text: String) throws -> MembershipStatus {
        guard let status = MembershipStatus(rawValue: text) else {
            throw PostgresError(.decoding, message: "the database holds an unknown membership status")
        }
        return status
    }

    private static func invitationStatus(_ text: String) throws -> InvitationStatus {
        guard let status = InvitationStatus(rawValue: text) else {
            throw PostgresError(.decoding, message: "the database holds an unknown invitation status")
        }
        return status
    }
}
