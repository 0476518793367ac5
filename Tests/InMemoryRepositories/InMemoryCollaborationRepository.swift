import Collaboration
import Foundation
import Secrets
import Tenancy

/// The collaboration rules over in-memory state, for fast tests of the services. It enforces what the SQL
/// functions enforce (permissions, grantable roles, last owner, single-use invitations, email binding, the
/// limits on couples' roles, on a couple's invitations an hour and, at its default, on the couples a user
/// creates); actor isolation stands in for the database's locks. The domains a couple may invite are the
/// database's alone.
public actor InMemoryCollaborationRepository: CollaborationRepository {
    private let roleDefinitions: [RoleName: RoleDefinition]
    private var usersByID: [UUID: User] = [:]
    private var identities: [UserIdentity: (user: UUID, email: EmailAddress?, emailVerified: Bool)] = [:]
    private var couplesByID: [UUID: Couple] = [:]
    private var memberships: [UUID: [UUID: (membership: Membership, joinedAt: Date)]] = [:]
    private var invitationsByHash: [[UInt8]: StoredInvitation] = [:]
    private var auditLog: [UUID: [AuditEntry]] = [:]
    /// The roles each couple defined, by name.
    private var coupleRoles: [UUID: [RoleName: CoupleRole]] = [:]
    private var nextAuditID: Int64 = 1
    private var invitationsPerHour = Invitation.perCouplePerHourByDefault
    private let now: @Sendable () -> Date

    private struct StoredInvitation {
        var invitation: Invitation
        var invitedBy: UUID?
        var acceptedAt: Date?
        var revokedAt: Date?

        func status(at now: Date) -> InvitationStatus {
            if acceptedAt != nil { return .accepted }
            if revokedAt != nil { return .revoked }
            return invitation.expiresAt <= now ? .expired : .pending
        }
    }

    public init(roles: [RoleDefinition], now: @escaping @Sendable () -> Date = { Date() }) {
        self.roleDefinitions = Dictionary(uniqueKeysWithValues: roles.map { ($0.name, $0) })
        self.now = now
    }

    // MARK: Users and couples

    public func addUser(email: EmailAddress, displayName: String?, identity: UserIdentity?) throws -> User {
        guard !usersByID.values.contains(where: { $0.email.lowercased() == email.rawValue.lowercased() }) else {
            throw CollaborationError(.alreadyExists, "a user with this email address already exists")
        }
        if let identity {
            try ExternalIdentity.validate(issuer: identity.issuer, subject: identity.subject)
            guard identities[identity] == nil else {
                throw CollaborationError(.alreadyExists, "this identity already belongs to a user")
            }
        }
        let user = User(
            id: UUID(), email: email.rawValue, displayName: displayName, identities: identity.map { [$0] } ?? [])
        usersByID[user.id] = user
        if let identity { identities[identity] = (user.id, nil, false) }
        return user
    }

    public func user(_ reference: UserReference) throws -> User {
        let found: User? =
            switch reference {
            case .id(let id): usersByID[id]
            case .email(let email): usersByID.values.first { $0.email.lowercased() == email.rawValue.lowercased() }
            }
        guard let found else { throw CollaborationError(.notFound, "user \(reference) does not exist") }
        return found
    }

    public func editUser(_ user: UUID, _ edit: UserEdit, as actor: Actor) throws -> User {
        try edit.validate(as: actor)
        if case .user(let id) = actor {
            guard id == user else {
                throw CollaborationError(.permissionDenied, "permission denied: users can edit only themselves")
            }
            guard edit.email == nil else {
                throw CollaborationError(
                    .permissionDenied, "permission denied: only the operator changes a user's email address")
            }
        }
        guard let found = usersByID[user] else { throw CollaborationError(.notFound, "user \(user) does not exist") }
        if let email = edit.email?.rawValue.lowercased(),
            usersByID.values.contains(where: { $0.id != user && $0.email.lowercased() == email })
        {
            throw CollaborationError(.alreadyExists, "a user with this email address already exists")
        }
        // Unlinked first, then linked, as PostgreSQL runs them; stored only once nothing is refused.
        var (linked, index) = (found.identities, identities)
        if let unlinked = edit.unlinkIdentity {
            guard index.removeValue(forKey: unlinked)?.user == user else { throw UserEdit.notLinked(user) }
            linked.removeAll { $0 == unlinked }
        }
        if let identity = edit.linkIdentity, index[identity]?.user != user {
            guard index[identity] == nil else {
                throw CollaborationError(.alreadyExists, "this identity already belongs to a user")
            }
            linked.append(identity)
            index[identity] = (user, nil, false)
        }
        let edited = User(
            id: user, email: edit.email?.rawValue ?? found.email, displayName: edit.displayName ?? found.displayName,
            identities: linked)
        identities = index
        usersByID[user] = edited
        // As the users_new_address trigger: invitations of their couples to their new address are of no use now.
        if edited.email.lowercased() != found.email.lowercased() {
            for (couple, members) in memberships where members[user] != nil {
                revokeInvitations(to: user, in: couple, as: actor)
            }
        }
        return edited
    }

    public func deleteUser(_ user: UUID, as actor: Actor) throws {
        if case .user(let id) = actor, id != user {
            throw CollaborationError(.permissionDenied, "permission denied: users can delete only themselves")
        }
        try requireUser(user)
        let couples = memberships.filter { $0.value[user] != nil }.map(\.key)
        // All or nothing: no couple loses its last owner, or nothing is removed.
        if let kept = couples.first(where: { activeOwners($0) == [user] }) {
            throw CollaborationError(
                .lastOwner, "couple \"\(couplesByID[kept]?.name ?? "?")\" must keep at least one owner")
        }
        for couple in couples { _ = try delete(couple, user, as: actor) }
        identities = identities.filter { $0.value.user != user }
        for (hash, stored) in invitationsByHash {
            if stored.invitedBy == user { invitationsByHash[hash]?.invitedBy = nil }
            // What they accepted names neither them nor the address it was sent to, as delete_user leaves it.
            let invitation = stored.invitation
            if invitation.acceptedBy == user {
                invitationsByHash[hash]?.invitation = Invitation(
                    id: invitation.id, coupleID: invitation.coupleID, role: invitation.role, email: nil,
                    inviter: invitation.inviter, createdAt: invitation.createdAt, expiresAt: invitation.expiresAt,
                    status: invitation.status, acceptedBy: nil, membershipExpiresAt: invitation.membershipExpiresAt)
            }
        }
        usersByID[user] = nil
    }

    public func signIn(_ identity: ExternalIdentity) throws -> SignedIn {
        let key = UserIdentity(issuer: identity.issuer, subject: identity.subject)
        let address = identity.email.flatMap(EmailAddress.init(rawValue:))
        if let known = identities[key] {
            identities[key] = (known.user, address, identity.emailVerified)
            return SignedIn(user: known.user, identity: identity, created: false)
        }
        if identity.issuer.isEmpty, let id = UUID(parsing: identity.subject), usersByID[id] != nil {
            return SignedIn(user: id, identity: identity, created: false)
        }
        guard let email = address else {
            throw CollaborationError(
                .invalidInput, "the identity provider gave no usable email address, which a new user needs")
        }
        let existing = usersByID.values.first { $0.email.lowercased() == email.rawValue.lowercased() }
        if existing != nil, !identity.emailVerified {
            throw CollaborationError(
                .alreadyExists, "a user with this email address exists; sign in with a provider that verified it")
        }
        let user = existing ?? User(id: UUID(), email: email.rawValue, displayName: identity.name)
        usersByID[user.id] = User(
            id: user.id, email: user.email, displayName: user.displayName, identities: user.identities + [key])
        identities[key] = (user.id, address, identity.emailVerified)
        return SignedIn(user: user.id, identity: identity, created: existing == nil)
    }

    public func users(matching search: String?, limit: Int, after: PageCursor<String>?) throws -> [User] {
        try requirePageSize(limit)
        try User.validateSearch(search)
        let users = usersByID.values.sorted { $0.email.lowercased() < $1.email.lowercased() }
        let following = try Self.orderedPage(
            users, id: \.id, key: \.email, after: after, limit: users.count,
            follows: { user, email, _ in user.email.lowercased() > email.lowercased() },
            missing: { "user \($0.uuidString.lowercased()) does not exist" })
        return Array(following.filter { user in search.map(user.matches) ?? true }.prefix(limit))
    }

    public func createCouple(name: String, owner: UUID, as actor: Actor) throws -> Couple {
        if case .user(let id) = actor, id != owner {
            throw CollaborationError(
                .permissionDenied, "permission denied: users can create couples only with themselves as owner")
        }
        try requireUser(owner)
        let name = try Couple.validateName(name)
        // Ownerships of any status count; the operator's creations are not held to the limit.
        let owned = memberships.values.filter { $0[owner]?.membership.role == .owner }.count
        if case .user = actor, owned >= Couple.ownedPerUserByDefault {
            throw CollaborationError(
                .quotaExceeded,
                "user \(owner.uuidString.lowercased()) owns \(owned) couples, and a user creates couples only while "
                    + "owning fewer than \(Couple.ownedPerUserByDefault); delete one no longer needed, or ask the "
                    + "operator to raise the limit (rbac couples limit)")
        }
        let couple = Couple(id: UUID(), name: name, createdAt: now(), revision: 0)
        couplesByID[couple.id] = couple
        try write(couple.id, as: actor, action: "membership.insert") {
            $0[owner] = (
                Membership(coupleID: couple.id, userID: owner, role: .owner, status: .active, revision: 0), now()
            )
        }
        return couplesByID[couple.id]!
    }

    public func renameCouple(_ couple: UUID, to name: String, as actor: Actor) throws -> Couple {
        _ = try requirePermission(couple, "couple.edit", actor)
        couplesByID[couple]?.name = try Couple.validateName(name)
        record(couple, actor, "couple.update")
        return try self.couple(couple)
    }

    public func deleteCouple(_ couple: UUID, as actor: Actor) throws {
        _ = try requirePermission(couple, "couple.delete", actor)
        couplesByID[couple] = nil
        memberships[couple] = nil
        coupleRoles[couple] = nil
        invitationsByHash = invitationsByHash.filter { $0.value.invitation.coupleID != couple }
        record(couple, actor, "couple.delete")
    }

    private func couple(_ id: UUID) throws -> Couple {
        guard let couple = couplesByID[id] else {
            throw CollaborationError(.notFound, "couple \(id.uuidString.lowercased()) does not exist")
        }
        return couple
    }

    public func couples(limit: Int, after: PageCursor<Date>?) throws -> [Couple] {
        try requirePageSize(limit)
        return try Self.oldestFirst(Array(couplesByID.values), id: \.id, at: \.createdAt, after: after, limit: limit) {
            "couple \($0.uuidString.lowercased()) does not exist"
        }
    }

    public func userCouples(_ user: UUID, limit: Int, after: PageCursor<Date>?, as actor: Actor) throws
        -> [UserCouple]
    {
        if case .user(let id) = actor, id != user {
            throw CollaborationError(.permissionDenied, "permission denied: users can list only their own couples")
        }
        try requirePageSize(limit)
        let couples = memberships.compactMap { couple, members -> UserCouple? in
            guard let entry = members[user], let name = couplesByID[couple]?.name else { return nil }
            return UserCouple(
                coupleID: couple, coupleName: name, role: entry.membership.role, status: listedStatus(entry.membership),
                joinedAt: entry.joinedAt, expiresAt: entry.membership.expiresAt)
        }
        return try Self.oldestFirst(couples, id: \.coupleID, at: \.joinedAt, after: after, limit: limit) {
            "user \(user.uuidString.lowercased()) is no member of couple \($0.uuidString.lowercased()) to page after"
        }
    }

    // MARK: Permissions

    public func permissionSet(couple: UUID, user: UUID) -> PermissionSet {
        guard let member = memberships[couple]?[user]?.membership, isInForce(member) else {
            return PermissionSet(permissions: [], revision: couplesByID[couple]?.revision)
        }
        return PermissionSet(
            permissions: Set(permissions(of: member.role, in: couple) ?? []), revision: couplesByID[couple]?.revision,
            role: member.role.rawValue, expiresAt: member.expiresAt)
    }

    private func hasPermission(couple: UUID, user: UUID, permission: Permission) -> Bool {
        permissionSet(couple: couple, user: user).permissions.contains(permission)
    }

    public func permissions(couple: UUID, user: UUID, as actor: Actor) throws -> [Permission] {
        try requireMemberView(couple, user, actor)
        return permissionSet(couple: couple, user: user).permissions.sorted { $0.rawValue < $1.rawValue }
    }

    public func role(couple: UUID, user: UUID, as actor: Actor) throws -> RoleName? {
        try requireMemberView(couple, user, actor)
        return memberships[couple]?[user]?.membership.role
    }

    public func canLeave(couple: UUID, user: UUID, as actor: Actor) throws -> Bool {
        try requireMemberView(couple, user, actor)
        guard let member = memberships[couple]?[user]?.membership else { return false }
        return !isActiveOwner(member) || activeOwners(couple).count > 1
    }

    public func roles() -> [RoleDefinition] {
        roleDefinitions.values.sorted { $0.rank < $1.rank }
    }

    public func roles(couple: UUID, as actor: Actor) throws -> [CoupleRole] {
        _ = try requirePermission(couple, "collaborators.view", actor)
        return roles().map {
            CoupleRole(
                name: $0.name, description: $0.description,
                permissions: $0.permissions.sorted { $0.rawValue < $1.rawValue },
                coupleDefined: false)
        } + (coupleRoles[couple] ?? [:]).values.sorted { $0.name.rawValue < $1.name.rawValue }
    }

    public func createRole(
        couple: UUID, name: RoleName, description: String, permissions: [Permission], as actor: Actor
    ) throws -> CoupleRole {
        let acting = try requirePermission(couple, "roles.manage", actor)
        let granted = try requireRegistered(permissions)
        try requireHoldsAll(couple, acting, granted, "author the \(name) role")
        guard roleDefinitions[name] == nil else {
            throw CollaborationError(.alreadyExists, "\"\(name)\" is a role of the policy; choose another name")
        }
        guard coupleRoles[couple]?[name] == nil else {
            throw CollaborationError(.alreadyExists, "couple \(couple) already has a role named \"\(name)\"")
        }
        guard coupleRoles[couple, default: [:]].count < CoupleRole.mostPerCouple else {
            throw CollaborationError(
                .quotaExceeded,
                "couple \(couple) defines \(CoupleRole.mostPerCouple) roles, the most a couple may; "
                    + "delete a role it no longer needs first")
        }
        let role = CoupleRole(name: name, description: description, permissions: granted, coupleDefined: true)
        coupleRoles[couple, default: [:]][name] = role
        couplesByID[couple]?.revision += 1
        record(couple, actor, "couple_role.insert")
        return role
    }

    public func editRole(
        couple: UUID, name: RoleName, description: String?, permissions: [Permission]?, as actor: Actor
    ) throws -> CoupleRole {
        let acting = try requirePermission(couple, "roles.manage", actor)
        guard let role = coupleRoles[couple]?[name] else {
            throw CollaborationError(.notFound, "couple \(couple) has no role of its own named \"\(name)\"")
        }
        let granted = try permissions.map(requireRegistered) ?? role.permissions
        if permissions != nil {
            try requireHoldsAll(couple, acting, granted, "make \(name) grant that")
            let held = (memberships[couple] ?? [:]).values.contains { $0.membership.role == name }
            if let acting, held,
                !hasPermission(couple: couple, user: acting, permission: Permission(rawValue: "roles.assign")!)
            {
                throw CollaborationError(
                    .roleNotGrantable, "the \(name) role is held; changing what it grants needs roles.assign")
            }
        }
        let edited = CoupleRole(
            name: name, description: description ?? role.description, permissions: granted, coupleDefined: true)
        coupleRoles[couple]?[name] = edited
        couplesByID[couple]?.revision += 1
        record(couple, actor, "couple_role.update")
        return edited
    }

    public func deleteRole(couple: UUID, name: RoleName, reassign: RoleName?, as actor: Actor) throws {
        let acting = try requirePermission(couple, "roles.manage", actor)
        guard coupleRoles[couple]?[name] != nil else {
            throw CollaborationError(.notFound, "couple \(couple) has no role of its own named \"\(name)\"")
        }
        let holders = (memberships[couple] ?? [:]).values.map(\.membership).filter { $0.role == name }
        let pending = invitationsByHash.filter {
            $0.value.invitation.coupleID == couple && $0.value.invitation.role == name
                && $0.value.status(at: now()) == .pending
        }.keys
        if let reassign {
            guard permissions(of: reassign, in: couple) != nil else {
                throw CollaborationError.unknownRole(reassign.rawValue, valid: roles().map(\.name))
            }
            guard reassign != name else {
                throw CollaborationError(
                    .invalidInput,
                    "members of \(name) cannot move to the role being deleted; name another role to move them to")
            }
            guard reassign != .owner else {
                throw CollaborationError(
                    .invalidInput, "members of \(name) cannot move to owner; ownership moves with transfer_ownership")
            }
            try requireGrantable(couple, acting, name)
            try requireGrantable(couple, acting, reassign)
            for holder in holders { _ = try change(couple, holder.userID, as: actor) { $0.role = reassign } }
            for hash in pending { invitationsByHash[hash]?.invitation.role = reassign }
        } else if !holders.isEmpty || !pending.isEmpty {
            throw CollaborationError(
                .roleInUse,
                "the \(name) role is held by \(holders.count + pending.count) member(s) or pending invitation(s)")
        }
        coupleRoles[couple]?[name] = nil
        couplesByID[couple]?.revision += 1
        record(couple, actor, "couple_role.delete")
    }

    // MARK: Memberships

    public func members(couple: UUID, limit: Int, after: PageCursor<Date>?, as actor: Actor) throws -> [Member] {
        _ = try requirePermission(couple, "collaborators.view", actor)
        try requirePageSize(limit)
        return try Self.oldestFirst(members(of: couple), id: \.user.id, at: \.joinedAt, after: after, limit: limit) {
            "user \($0.uuidString.lowercased()) is no member of couple \(couple.uuidString.lowercased()) to page after"
        }
    }

    /// The domains a couple may invite are not kept here: none, which is any.
    public func coupleDetail(_ couple: UUID, as actor: Actor) async throws -> CoupleDetail {
        _ = try requirePermission(couple, "collaborators.view", actor)
        return CoupleDetail(
            couple: try self.couple(couple), inviteDomains: [],
            members: try await everyPage(id: \.cursor) { try members(couple: couple, limit: $0, after: $1, as: actor) })
    }

    private func members(of couple: UUID) -> [Member] {
        (memberships[couple] ?? [:]).values.map { entry in
            Member(
                user: usersByID[entry.membership.userID]!, role: entry.membership.role,
                status: listedStatus(entry.membership), joinedAt: entry.joinedAt, expiresAt: entry.membership.expiresAt)
        }
    }

    public func grant(couple: UUID, user: UUID, role: RoleName, expiresAt: Date?, as actor: Actor) throws
        -> Membership
    {
        let acting = try requirePermission(couple, "roles.assign", actor)
        try requireRole(role, in: couple)
        try requireExpiry(role, expiresAt)
        try requireUser(user)
        try requireGrantable(couple, acting, role)
        if let existing = memberships[couple]?[user]?.membership {
            try requireGrantable(couple, acting, existing.role)
            return try change(couple, user, as: actor) {
                $0.role = role
                $0.expiresAt = expiresAt
            }
        }
        return try insertMember(couple, user, role: role, expiresAt: expiresAt, as: actor)
    }

    public func suspend(couple: UUID, user: UUID, as actor: Actor) throws -> Membership {
        try requireManageable(couple, user, actor)
        return try change(couple, user, as: actor) { $0.status = .suspended }
    }

    public func reactivate(couple: UUID, user: UUID, as actor: Actor) throws -> Membership {
        try requireManageable(couple, user, actor)
        return try change(couple, user, as: actor) { $0.status = .active }
    }

    public func remove(couple: UUID, user: UUID, as actor: Actor) throws -> Membership {
        try requireManageable(couple, user, actor)
        return try delete(couple, user, as: actor)
    }

    public func leave(couple: UUID, user: UUID?, as actor: Actor) throws -> Membership {
        _ = try self.couple(couple)
        let leaver = try subject(
            user, of: actor, unnamed: "name the member who leaves", denied: "members can leave only for themselves")
        return try delete(couple, leaver, as: actor)
    }

    /// Whom a call that acts for one user acts for, as `rbac.subject_user` says: the user the operator names
    /// (refused as `unnamed` when none), or the acting user, who may name only themself (refused as `denied`).
    private func subject(_ user: UUID?, of actor: Actor, unnamed: String, denied: String) throws -> UUID {
        switch actor {
        case .operator:
            guard let user else { throw CollaborationError(.invalidInput, unnamed) }
            return user
        case .user(let id):
            guard user == nil || user == id else {
                throw CollaborationError(.permissionDenied, "permission denied: \(denied)")
            }
            return id
        }
    }

    public func transferOwnership(couple: UUID, to newOwner: UUID, as actor: Actor) throws -> Membership {
        // Only the owner role holds couple.transfer here (`PolicyDocument.flattened`, `requireRegistered`).
        let acting = try requirePermission(couple, "couple.transfer", actor)
        guard let target = memberships[couple]?[newOwner]?.membership else {
            throw CollaborationError(.notFound, "user \(newOwner) is not a member of couple \(couple)")
        }
        guard target.status == .active else {
            throw CollaborationError(.invalidInput, "user \(newOwner) is suspended; reactivate them first")
        }
        guard isInForce(target) else {
            throw CollaborationError(
                .invalidInput, "the membership of user \(newOwner) expired; grant them a role first")
        }
        guard acting != newOwner else {
            throw CollaborationError(.invalidInput, "user \(newOwner) already owns the couple")
        }
        let result = try change(couple, newOwner, as: actor) {
            $0.role = .owner
            $0.expiresAt = nil
        }
        let previous = memberships[couple]!.values.map(\.membership).filter {
            $0.role == .owner && $0.userID != newOwner && (acting == nil || $0.userID == acting)
        }
        for owner in previous {
            _ = try change(couple, owner.userID, as: actor) { $0.role = RoleName(rawValue: "partner")! }
        }
        return result
    }

    // MARK: Invitations

    public func createInvitation(
        couple: UUID, token: SecretToken, role: RoleName, email: EmailAddress?, expiresIn: Duration,
        membershipExpiresAt: Date?, as actor: Actor
    ) throws -> Invitation {
        let tokenHash = token.hash
        let acting = try requirePermission(couple, "collaborators.invite", actor)
        guard tokenHash.count == 32 else {
            throw CollaborationError(.invalidInput, "the token hash must be the 32-byte SHA-256 of the token")
        }
        try requireRole(role, in: couple)
        try requireExpiry(role, membershipExpiresAt)
        try requireGrantable(couple, acting, role)
        guard expiresIn >= .seconds(60), expiresIn <= .seconds(365 * 24 * 3600) else {
            throw CollaborationError(.invalidInput, "an invitation must expire between 1 minute and 365 days from now")
        }
        let created = now()
        try requireInvitationAllowed(couple, at: created)
        if let email, let member = try? user(.email(email)), memberships[couple]?[member.id] != nil {
            throw CollaborationError(.alreadyExists, "\(email.rawValue) is already a member of this couple")
        }
        let inviter = shownName(acting) ?? "\(actor)"
        let invitation = Invitation(
            id: UUID(), coupleID: couple, role: role, email: email?.rawValue, inviter: inviter, createdAt: created,
            expiresAt: created.addingTimeInterval(TimeInterval(expiresIn.components.seconds)), status: .pending,
            acceptedBy: nil, membershipExpiresAt: membershipExpiresAt)
        invitationsByHash[tokenHash] = StoredInvitation(invitation: invitation, invitedBy: acting)
        record(couple, actor, "invitation.insert")
        return invitation
    }

    /// How many invitations a couple may make in an hour; with `set`, sets it first (the operator's), as
    /// `PostgresCollaborationRepository.invitationLimit` does.
    public func invitationLimit(set limit: Int? = nil) throws -> Int {
        if let limit {
            guard (1...100_000).contains(limit) else {
                throw CollaborationError(.invalidInput, "a couple's invitations an hour must be from 1 to 100000")
            }
            invitationsPerHour = limit
        }
        return invitationsPerHour
    }

    /// As rbac.require_invitation_allowed: at the limit, the next may be made when the limit-th newest of the hour
    /// leaves it, on a whole second.
    private func requireInvitationAllowed(_ couple: UUID, at now: Date) throws {
        let limit = invitationsPerHour
        let hour: TimeInterval = 3600
        let recent = invitationsByHash.values.map(\.invitation).filter {
            $0.coupleID == couple && $0.createdAt > now.addingTimeInterval(-hour)
        }.map(\.createdAt).sorted(by: >)
        guard recent.count >= limit else { return }
        let next = Date(timeIntervalSince1970: (recent[limit - 1].timeIntervalSince1970 + hour).rounded(.up))
        throw CollaborationError(
            .rateLimited,
            "couple \(couple.uuidString.lowercased()) has made \(limit) invitations in the last hour, the most "
                + "allowed; the next may be made at \(next.shownInRefusals); the operator sets the limit: rbac "
                + "invitations limit --per-hour N", retryAt: next)
    }

    public func invitationPreview(tokenHash: [UInt8]) -> InvitationPreview? {
        guard let stored = invitationsByHash[tokenHash], let couple = couplesByID[stored.invitation.coupleID] else {
            return nil
        }
        // As invitation_preview: revoked, as accepting would answer, when its inviter may no longer give it.
        let status = stored.status(at: now())
        return InvitationPreview(
            coupleID: couple.id, coupleName: couple.name, role: stored.invitation.role,
            // As rbac.inviter_shown: the operator's label is for the logs, not for invitees.
            inviter: shownName(stored.invitedBy) ?? InvitationPreview.administrator,
            emailHint: stored.invitation.email.map(EmailAddress.masked),
            expiresAt: stored.invitation.expiresAt,
            status: status == .pending && !inviterMayGive(stored) ? .revoked : status,
            roleDescription: roleDefinitions[stored.invitation.role]?.description
                ?? coupleRoles[couple.id]?[stored.invitation.role]?.description,
            membershipExpiresAt: stored.invitation.membershipExpiresAt)
    }

    public func acceptInvitation(tokenHash: [UInt8], signedIn: SignedIn) throws -> Membership {
        let identity = identities[UserIdentity(issuer: signedIn.identity.issuer, subject: signedIn.identity.subject)]
        return try accept(tokenHash, by: signedIn.user, as: .user(signedIn.user)) { invited, account in
            guard let identity else { return invited.lowercased() == account.email.lowercased() }
            return identity.emailVerified && identity.email?.rawValue.lowercased() == invited.lowercased()
        }
    }

    public func acceptInvitation(tokenHash: [UInt8], user: UUID?, as actor: Actor) throws -> Membership {
        let accepter = try subject(
            user, of: actor, unnamed: "name the user who accepts",
            denied: "users accept invitations only for themselves")
        return try accept(tokenHash, by: accepter, as: actor) { $0.lowercased() == $1.email.lowercased() }
    }

    /// As rbac.inviter_may_give: whether the member who made an invitation could make it now (the operator's
    /// have no inviter, and hold).
    private func inviterMayGive(_ stored: StoredInvitation) -> Bool {
        guard let inviter = stored.invitedBy else { return true }
        let invitation = stored.invitation
        return hasPermission(
            couple: invitation.coupleID, user: inviter, permission: Permission(rawValue: "collaborators.invite")!)
            && (try? requireGrantable(invitation.coupleID, inviter, invitation.role)) != nil
    }

    /// Accepts for `accepter`; `proves` says whether the accepter proves the address an invitation is bound to.
    private func accept(
        _ tokenHash: [UInt8], by accepter: UUID, as actor: Actor, proves: (String, User) -> Bool
    ) throws -> Membership {
        guard let account = usersByID[accepter] else {
            throw CollaborationError(.notFound, "user \(accepter) does not exist")
        }
        guard var stored = invitationsByHash[tokenHash] else {
            throw CollaborationError(.notFound, "invitation not found")
        }
        switch stored.status(at: now()) {
        case .accepted: throw CollaborationError(.invitationUsed, "this invitation was already accepted")
        case .revoked: throw CollaborationError(.invitationRevoked, "this invitation was revoked")
        case .expired:
            throw CollaborationError(
                .invitationExpired, "this invitation expired at \(stored.invitation.expiresAt.shownInRefusals)")
        case .pending: break
        }
        let invitation = stored.invitation
        guard inviterMayGive(stored) else {
            throw CollaborationError(
                .invitationRevoked,
                "this invitation no longer holds: the member who made it may no longer give the "
                    + "\(invitation.role) role")
        }
        if let email = invitation.email, !proves(email, account) {
            throw CollaborationError(.invitationEmailMismatch, "this invitation is for another email address")
        }
        guard memberships[invitation.coupleID]?[accepter] == nil else {
            throw CollaborationError(.alreadyExists, "user \(accepter) is already a member of this couple")
        }
        if let ends = invitation.membershipExpiresAt, ends <= now() {
            throw CollaborationError(
                .invitationExpired, "the access this invitation offers ended at \(ends.shownInRefusals)")
        }
        stored.acceptedAt = now()
        stored.invitation = Invitation(
            id: invitation.id, coupleID: invitation.coupleID, role: invitation.role, email: invitation.email,
            inviter: invitation.inviter, createdAt: invitation.createdAt, expiresAt: invitation.expiresAt,
            status: .accepted, acceptedBy: accepter, membershipExpiresAt: invitation.membershipExpiresAt)
        invitationsByHash[tokenHash] = stored
        record(invitation.coupleID, actor, "invitation.update")
        return try insertMember(
            invitation.coupleID, accepter, role: invitation.role, expiresAt: invitation.membershipExpiresAt, as: actor)
    }

    public func revokeInvitation(couple: UUID, invitation: UUID, as actor: Actor) throws {
        _ = try requirePermission(couple, "collaborators.invite", actor)
        guard
            let (hash, stored) = invitationsByHash.first(where: {
                $0.value.invitation.id == invitation && $0.value.invitation.coupleID == couple
            })
        else { throw CollaborationError(.notFound, "invitation not found") }
        switch stored.status(at: now()) {
        case .accepted: throw CollaborationError(.invitationUsed, "this invitation was already accepted")
        case .revoked: throw CollaborationError(.invitationRevoked, "this invitation was revoked")
        case .pending, .expired: break
        }
        invitationsByHash[hash]?.revokedAt = now()
        record(couple, actor, "invitation.update")
    }

    public func resendInvitation(
        couple: UUID, invitation: UUID, token: SecretToken, expiresIn: Duration, as actor: Actor
    ) throws -> Invitation {
        // As the SQL function's transaction: put everything back when the new invitation is refused.
        let (savedInvitations, savedAudit, savedAuditID) = (invitationsByHash, auditLog, nextAuditID)
        do {
            try revokeInvitation(couple: couple, invitation: invitation, as: actor)
            let old = invitationsByHash.values.first { $0.invitation.id == invitation }!.invitation
            return try createInvitation(
                couple: couple, token: token, role: old.role,
                email: old.email.flatMap(EmailAddress.init(rawValue:)),
                expiresIn: expiresIn, membershipExpiresAt: old.membershipExpiresAt, as: actor)
        } catch {
            (invitationsByHash, auditLog, nextAuditID) = (savedInvitations, savedAudit, savedAuditID)
            throw error
        }
    }

    public func invitations(
        couple: UUID, status: InvitationStatus?, limit: Int, after: PageCursor<Date>?, as actor: Actor
    ) throws -> [Invitation] {
        _ = try requirePermission(couple, "collaborators.invite", actor)
        try requirePageSize(limit)
        let at = now()
        let invitations = invitationsByHash.values.filter { $0.invitation.coupleID == couple }
            .map { stored in
                let invitation = stored.invitation
                return Invitation(
                    id: invitation.id, coupleID: couple, role: invitation.role, email: invitation.email,
                    inviter: invitation.inviter, createdAt: invitation.createdAt, expiresAt: invitation.expiresAt,
                    status: stored.status(at: at), acceptedBy: invitation.acceptedBy,
                    membershipExpiresAt: invitation.membershipExpiresAt)
            }
        // The place of the invitation `after` names is looked up among all of them, whatever their status.
        let place = after.map { after in
            PageCursor(id: after.id, key: after.key ?? invitations.first { $0.id == after.id }?.createdAt)
        }
        return try Self.oldestFirst(
            invitations.filter { status == nil || $0.status == status }, id: \.id, at: \.createdAt, after: place,
            limit: limit
        ) { "no invitation \($0.uuidString.lowercased()) of couple \(couple.uuidString.lowercased()) to page after" }
    }

    public func audit(couple: UUID, since: Date?, before: Int64?, last: Int?, as actor: Actor) throws
        -> [AuditEntry]
    {
        try AuditEntry.requireCount(last)
        _ = try requirePermission(couple, "audit.view", actor)
        var log = auditLog[couple] ?? []
        if let before {
            guard let cursor = log.firstIndex(where: { $0.id == before }) else {
                throw AuditEntry.notFound(before, in: "this couple's log")
            }
            log = Array(log[..<cursor])
        }
        return log.filter { since == nil || $0.at >= since! }.suffix(last ?? .max)
    }

    // MARK: Rules

    /// Active and not past its expiry: a membership that grants what its role does.
    private func isInForce(_ membership: Membership) -> Bool {
        membership.status == .active && (membership.expiresAt.map { $0 > now() } ?? true)
    }

    private func listedStatus(_ membership: Membership) -> MembershipStatus {
        membership.expiresAt.map { $0 <= now() } == true ? .expired : membership.status
    }

    /// What `role` grants in `couple`: the policy's role, or the couple's own; nil when it is neither.
    private func permissions(of role: RoleName, in couple: UUID) -> [Permission]? {
        roleDefinitions[role]?.permissions ?? coupleRoles[couple]?[role]?.permissions
    }

    private func requireRole(_ role: RoleName, in couple: UUID) throws {
        guard permissions(of: role, in: couple) != nil else {
            throw CollaborationError.unknownRole(role.rawValue, valid: roles().map(\.name))
        }
    }

    private func requireExpiry(_ role: RoleName, _ expiresAt: Date?) throws {
        guard let expiresAt else { return }
        guard role != .owner else {
            throw CollaborationError(
                .invalidInput, "an owner's membership cannot expire; give another role an expiry, or none")
        }
        guard expiresAt > now() else {
            throw CollaborationError(.invalidInput, "the expiry \(expiresAt.shownInRefusals) is not in the future")
        }
    }

    /// The permissions, sorted and without repeats, after checking each is one some role of the policy grants and
    /// a couple's role may grant (not couple.transfer, which goes with ownership), as `rbac.known_permissions`.
    private func requireRegistered(_ permissions: [Permission]) throws -> [Permission] {
        let known = Set(roleDefinitions.values.flatMap(\.permissions))
        if let unknown = permissions.first(where: { !known.contains($0) }) {
            throw CollaborationError(.invalidInput, "unknown permission \"\(unknown)\"")
        }
        if permissions.contains(.transfer) {
            throw CollaborationError(
                .invalidInput,
                "couple.transfer goes with ownership: a couple's role cannot grant it; make the member an owner "
                    + "instead (the owner role), or hand the couple over to them")
        }
        return Set(permissions).sorted { $0.rawValue < $1.rawValue }
    }

    private func requireHoldsAll(_ couple: UUID, _ acting: UUID?, _ permissions: [Permission], _ what: String) throws {
        guard let acting else { return }
        let held = permissionSet(couple: couple, user: acting).permissions
        let missing = permissions.filter { !held.contains($0) }
        guard missing.isEmpty else {
            throw CollaborationError(
                .roleNotGrantable,
                "you cannot \(what) without holding \(missing.map(\.rawValue).joined(separator: ", "))")
        }
    }

    /// A keyset page of items in the order given: those that `follows` the place `after` names, at its key, else
    /// at the key of the item with its id, which must exist (else the refusal `missing` words for that id).
    private static func orderedPage<Item, Key>(
        _ items: [Item], id: (Item) -> UUID, key: (Item) -> Key, after: PageCursor<Key>?, limit: Int,
        follows: (Item, Key, UUID) -> Bool, missing: (UUID) -> String
    ) throws -> [Item] {
        guard let after else { return Array(items.prefix(limit)) }
        guard let following = after.following(in: items, id: id, key: key, follows: follows) else {
            throw CollaborationError(.notFound, missing(after.id))
        }
        return Array(following.prefix(limit))
    }

    /// `orderedPage` of items oldest first, at `at`, then by id (uuids in PostgreSQL's byte order).
    private static func oldestFirst<Item>(
        _ items: [Item], id: KeyPath<Item, UUID>, at: KeyPath<Item, Date>, after: PageCursor<Date>?, limit: Int,
        missing: (UUID) -> String
    ) throws -> [Item] {
        func place(_ item: Item) -> (Date, String) { (item[keyPath: at], item[keyPath: id].uuidString) }
        return try orderedPage(
            items.sorted { place($0) < place($1) }, id: { $0[keyPath: id] }, key: { $0[keyPath: at] }, after: after,
            limit: limit, follows: { item, time, last in place(item) > (time, last.uuidString) }, missing: missing)
    }

    /// A user's name, else their address, as others are shown them; nil for no user, or one gone.
    private func shownName(_ id: UUID?) -> String? {
        id.flatMap { usersByID[$0] }.map { $0.displayName ?? $0.email }
    }

    private func requireUser(_ id: UUID) throws {
        guard usersByID[id] != nil else { throw CollaborationError(.notFound, "user \(id) does not exist") }
    }

    /// The acting user after checking `permission` (nil for the operator).
    private func requirePermission(_ couple: UUID, _ permission: String, _ actor: Actor) throws -> UUID? {
        _ = try self.couple(couple)
        guard case .user(let id) = actor else { return nil }
        guard hasPermission(couple: couple, user: id, permission: Permission(rawValue: permission)!) else {
            throw CollaborationError(
                .permissionDenied, "permission denied: this needs \(permission) in couple \(couple)")
        }
        return id
    }

    private func requireMemberView(_ couple: UUID, _ user: UUID, _ actor: Actor) throws {
        _ = try self.couple(couple)
        guard case .user(let id) = actor, id != user else { return }
        guard let member = memberships[couple]?[id]?.membership, isInForce(member) else {
            throw CollaborationError(
                .permissionDenied, "permission denied: only members of couple \(couple) can see its members")
        }
    }

    private func requireGrantable(_ couple: UUID, _ acting: UUID?, _ role: RoleName) throws {
        guard let acting else { return }
        if let own = coupleRoles[couple]?[role] {
            guard hasPermission(couple: couple, user: acting, permission: Permission(rawValue: "roles.assign")!) else {
                throw CollaborationError(.roleNotGrantable, "giving the couple's own role \(role) needs roles.assign")
            }
            return try requireHoldsAll(couple, acting, own.permissions, "give the \(role) role")
        }
        let actingRole = memberships[couple]?[acting]?.membership.role
        guard let actingRole, roleDefinitions[actingRole]?.grants.contains(role) == true else {
            let giver = actingRole.map { "a member with the \($0) role" } ?? "a non-member"
            throw CollaborationError(.roleNotGrantable, "\(giver) cannot give the \(role) role")
        }
    }

    private func requireManageable(_ couple: UUID, _ user: UUID, _ actor: Actor) throws {
        let acting = try requirePermission(couple, "collaborators.manage", actor)
        guard let member = memberships[couple]?[user]?.membership else {
            throw CollaborationError(.notFound, "user \(user) is not a member of couple \(couple)")
        }
        try requireGrantable(couple, acting, member.role)
    }

    private func isActiveOwner(_ membership: Membership) -> Bool {
        membership.role == .owner && membership.status == .active
    }

    private func activeOwners(_ couple: UUID) -> [UUID] {
        (memberships[couple] ?? [:]).values.map(\.membership).filter(isActiveOwner).map(\.userID)
    }

    private func change(_ couple: UUID, _ user: UUID, as actor: Actor, _ update: (inout Membership) -> Void) throws
        -> Membership
    {
        guard var member = memberships[couple]?[user] else {
            throw CollaborationError(.notFound, "user \(user) is not a member of couple \(couple)")
        }
        let before = member.membership
        update(&member.membership)
        // As in the database: a change that changes nothing writes nothing, not even a revision.
        guard member.membership != before else { return before }
        try write(couple, as: actor, action: "membership.update") { $0[user] = member }
        return memberships[couple]![user]!.membership
    }

    /// Makes `user` an active member and, as rbac.memberships_guard does, revokes their pending invitations to the
    /// couple.
    private func insertMember(_ couple: UUID, _ user: UUID, role: RoleName, expiresAt: Date?, as actor: Actor) throws
        -> Membership
    {
        try write(couple, as: actor, action: "membership.insert") {
            $0[user] = (
                Membership(
                    coupleID: couple, userID: user, role: role, status: .active, revision: 0, expiresAt: expiresAt),
                now()
            )
        }
        revokeInvitations(to: user, in: couple, as: actor)
        return memberships[couple]![user]!.membership
    }

    /// Revokes the couple's pending invitations bound to the address of `user`, a member: those could only fail
    /// them now.
    private func revokeInvitations(to user: UUID, in couple: UUID, as actor: Actor) {
        let address = usersByID[user]?.email.lowercased()
        for (hash, stored) in invitationsByHash
        where stored.invitation.coupleID == couple && stored.invitation.email?.lowercased() == address
            && stored.status(at: now()) == .pending
        {
            invitationsByHash[hash]?.revokedAt = now()
            record(couple, actor, "invitation.update")
        }
    }

    private func delete(_ couple: UUID, _ user: UUID, as actor: Actor) throws -> Membership {
        guard var member = memberships[couple]?[user]?.membership else {
            throw CollaborationError(.notFound, "user \(user) is not a member of couple \(couple)")
        }
        try write(couple, as: actor, action: "membership.delete") { $0[user] = nil }
        member.revision = couplesByID[couple]?.revision ?? member.revision
        // As rbac.memberships_guard: the pending invitations they made go with them.
        for (hash, stored) in invitationsByHash
        where stored.invitation.coupleID == couple && stored.invitedBy == user && stored.status(at: now()) == .pending {
            invitationsByHash[hash]?.revokedAt = now()
            record(couple, actor, "invitation.update")
        }
        return member
    }

    /// Applies a change to one couple's memberships if it keeps an active owner (the last-owner rule), advances
    /// the couple's revision and records the change.
    private func write(
        _ couple: UUID, as actor: Actor, action: String,
        _ change: (inout [UUID: (membership: Membership, joinedAt: Date)]) -> Void
    ) throws {
        var updated = memberships[couple] ?? [:]
        let hadOwner = !activeOwners(couple).isEmpty
        change(&updated)
        if hadOwner && !updated.values.contains(where: { isActiveOwner($0.membership) }) {
            throw CollaborationError(
                .lastOwner, "couple \"\(couplesByID[couple]?.name ?? "?")\" must keep at least one owner")
        }
        couplesByID[couple]?.revision += 1
        // Memberships carry the revision of the latest write, as the database's writes report it.
        let revision = couplesByID[couple]?.revision ?? 0
        for user in updated.keys { updated[user]?.membership.revision = revision }
        memberships[couple] = updated
        record(couple, actor, action)
    }

    private func record(_ couple: UUID, _ actor: Actor, _ action: String) {
        let label: String =
            switch actor {
            case .operator(let label): "operator:\(label)"
            case .user(let id): "user:\(id.uuidString.lowercased())"
            }
        auditLog[couple, default: []].append(
            AuditEntry(id: nextAuditID, at: now(), actor: label, action: action, before: nil, after: nil))
        nextAuditID += 1
    }
}
