import Foundation

/// Permission questions: may a user do something in a couple, and what may they do.
public actor CollaborationPermissionService {
    private let repository: any CollaborationRepository
    private let metrics: OperationMetrics
    private let checker: PermissionChecker

    public init(repository: any CollaborationRepository, metrics: OperationMetrics = OperationMetrics()) {
        self.repository = repository
        self.metrics = metrics
        checker = PermissionChecker(repository: repository, metrics: metrics)
    }

    /// Whether `user` holds `permission` in `couple`, and the couple revision that answer was read at. An
    /// unknown permission is refused (not answered "no"), so a typo cannot pass for a denial.
    public func check(_ permission: Permission, user: UUID, couple: UUID) async throws -> PermissionCheck {
        try await checker.checkKnown(couple: couple, user: user, permission: permission)
    }

    public func permissions(user: UUID, couple: UUID, as actor: Actor) async throws -> [Permission] {
        try await metrics.measure("permission.permissions") {
            try await repository.permissions(couple: couple, user: user, as: actor)
        }
    }

    public func role(user: UUID, couple: UUID, as actor: Actor) async throws -> RoleName? {
        try await metrics.measure("permission.role") {
            try await repository.role(couple: couple, user: user, as: actor)
        }
    }

    public func canLeave(user: UUID, couple: UUID, as actor: Actor) async throws -> Bool {
        try await metrics.measure("permission.canLeave") {
            try await repository.canLeave(couple: couple, user: user, as: actor)
        }
    }

    public func roles() async throws -> [RoleDefinition] {
        try await metrics.measure("permission.roles") {
            try await repository.roles().sorted { $0.rank < $1.rank }
        }
    }

    /// Every role the couple's members can hold: the policy's, then the couple's own.
    public func roles(of couple: UUID, as actor: Actor) async throws -> [CoupleRole] {
        try await metrics.measure("permission.coupleRoles") {
            try await repository.roles(couple: couple, as: actor)
        }
    }

    public func createRole(
        _ name: RoleName, in couple: UUID, description: String, permissions: [Permission], as actor: Actor
    ) async throws -> CoupleRole {
        try await metrics.measure("permission.createRole") {
            try await repository.createRole(
                couple: couple, name: name, description: try CoupleRole.validateDescription(description),
                permissions: permissions, as: actor)
        }
    }

    public func editRole(
        _ name: RoleName, in couple: UUID, description: String?, permissions: [Permission]?, as actor: Actor
    ) async throws -> CoupleRole {
        try await metrics.measure("permission.editRole") {
            try await repository.editRole(
                couple: couple, name: name, description: try description.map(CoupleRole.validateDescription),
                permissions: permissions, as: actor)
        }
    }

    public func deleteRole(_ name: RoleName, in couple: UUID, reassign: RoleName?, as actor: Actor) async throws {
        try await metrics.measure("permission.deleteRole") {
            try await repository.deleteRole(couple: couple, name: name, reassign: reassign, as: actor)
        }
    }
}
