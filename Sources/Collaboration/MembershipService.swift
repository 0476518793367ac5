import Foundation

/// Who belongs to a couple and with which role.
public actor MembershipService {
    private let repository: any CollaborationRepository
    private let metrics: OperationMetrics

    public init(repository: any CollaborationRepository, metrics: OperationMetrics = OperationMetrics()) {
        self.repository = repository
        self.metrics = metrics
    }

    /// Every member, in user id order.
    public func members(of couple: UUID, as actor: Actor) async throws -> [Member] {
        try await metrics.measure("membership.members") {
            try await everyPage(id: \.user.id) { limit, after in
                try await repository.members(couple: couple, limit: limit, after: after, as: actor)
            }
        }
    }

    /// A page of members in user id order, those after `after`; `limit` is 1 to 1000.
    public func members(of couple: UUID, limit: Int, after: UUID?, as actor: Actor) async throws -> [Member] {
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
