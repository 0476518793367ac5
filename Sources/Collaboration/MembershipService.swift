import Foundation

/// A couple, and who belongs to it with which role.
public actor MembershipService {
    private let repository: any CollaborationRepository
    private let metrics: OperationMetrics

    public init(repository: any CollaborationRepository, metrics: OperationMetrics = OperationMetrics()) {
        self.repository = repository
        self.metrics = metrics
    }

    /// Creates a couple with `owner` as its first owner; an end user may create one only for themself.
    public func createCouple(named name: String, owner: UUID, as actor: Actor) async throws -> Couple {
        try await metrics.measure("couple.create") {
            try await repository.createCouple(name: name, owner: owner, as: actor)
        }
    }

    /// The couple with its invite domains and every member, read together; the actor needs collaborators.view.
    public func couple(_ couple: UUID, as actor: Actor) async throws -> CoupleDetail {
        try await metrics.measure("couple.show") { try await repository.coupleDetail(couple, as: actor) }
    }

    /// Changes a user: the operator may change anyone's address and display name, an end user only their own
    /// display name.
    public func editUser(_ user: UUID, _ edit: UserEdit, as actor: Actor) async throws -> User {
        try await metrics.measure("user.edit") { try await repository.editUser(user, edit, as: actor) }
    }

    /// Deletes a user: the operator may delete anyone, an end user only themself (not while a couple's last
    /// active owner).
    public func deleteUser(_ user: UUID, as actor: Actor) async throws {
        try await metrics.measure("user.delete") { try await repository.deleteUser(user, as: actor) }
    }

    /// Renames a couple; the actor needs couple.edit.
    public func renameCouple(_ couple: UUID, to name: String, as actor: Actor) async throws -> Couple {
        try await metrics.measure("couple.rename") {
            try await repository.renameCouple(couple, to: name, as: actor)
        }
    }

    /// Deletes a couple and everything of it; the actor needs couple.delete. Its audit log stays.
    public func deleteCouple(_ couple: UUID, as actor: Actor) async throws {
        try await metrics.measure("couple.delete") {
            try await repository.deleteCouple(couple, as: actor)
        }
    }

    /// The couple's audit log, oldest first: the entries at or after `since` and older than entry `before`, only
    /// the newest `last` of them when given; the actor needs audit.view.
    public func audit(of couple: UUID, since: Date?, before: Int64?, last: Int?, as actor: Actor) async throws
        -> [AuditEntry]
    {
        try await metrics.measure("couple.audit") {
            try await repository.audit(couple: couple, since: since, before: before, last: last, as: actor)
        }
    }

    /// Every member, in the order they joined.
    public func members(of couple: UUID, as actor: Actor) async throws -> [Member] {
        try await metrics.measure("membership.members") {
            try await everyPage(id: \.cursor) { limit, after in
                try await repository.members(couple: couple, limit: limit, after: after, as: actor)
            }
        }
    }

    /// A page of members in the order they joined, those after `after` (`Member.cursor`); `limit` is 1 to 1000.
    public func members(of couple: UUID, limit: Int, after: PageCursor<Date>?, as actor: Actor) async throws
        -> [Member]
    {
        try await metrics.measure("membership.members") {
            try await repository.members(couple: couple, limit: limit, after: after, as: actor)
        }
    }

    /// Adds the user with `role`, or changes the role they hold, until `expiresAt` (nil: for good; granting
    /// again without one removes an expiry). An unknown role is refused with the valid ones.
    public func grant(_ role: RoleName, to user: UUID, in couple: UUID, until expiresAt: Date? = nil, as actor: Actor)
        async throws -> Membership
    {
        try await metrics.measure("membership.grant") {
            try await repository.grant(couple: couple, user: user, role: role, expiresAt: expiresAt, as: actor)
        }
    }

    public func suspend(_ user: UUID, in couple: UUID, as actor: Actor) async throws -> Membership {
        try await metrics.measure("membership.suspend") {
            try await repository.suspend(couple: couple, user: user, as: actor)
        }
    }

    public func reactivate(_ user: UUID, in couple: UUID, as actor: Actor) async throws -> Membership {
        try await metrics.measure("membership.reactivate") {
            try await repository.reactivate(couple: couple, user: user, as: actor)
        }
    }

    public func remove(_ user: UUID, from couple: UUID, as actor: Actor) async throws -> Membership {
        try await metrics.measure("membership.remove") {
            try await repository.remove(couple: couple, user: user, as: actor)
        }
    }

    public func leave(_ couple: UUID, user: UUID?, as actor: Actor) async throws -> Membership {
        try await metrics.measure("membership.leave") {
            try await repository.leave(couple: couple, user: user, as: actor)
        }
    }

    public func transferOwnership(of couple: UUID, to newOwner: UUID, as actor: Actor) async throws -> Membership {
        try await metrics.measure("membership.transferOwnership") {
            try await repository.transferOwnership(couple: couple, to: newOwner, as: actor)
        }
    }
}
