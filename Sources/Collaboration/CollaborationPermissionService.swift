import Foundation

/// Permission questions: may a user do something in a couple, and what may they do.
public actor CollaborationPermissionService {
    private let repository: any CollaborationRepository

    public init(repository: any CollaborationRepository) {
        self.repository = repository
    }

    /// Whether `user` holds `permission` in `couple`. An unknown permission is refused (not answered "no"),
    /// so a typo cannot pass for a denial.
    public func hasPermission(_ permission: Permission, user: UUID, couple: UUID) async throws -> Bool {
        let known = try await repository.roles().flatMap(\.permissions)
        guard known.contains(permission) else {
            let valid = Set(known).map(\.rawValue).sorted().joined(separator: ", ")
            throw CollaborationError(.invalidInput, "unknown permission \"\(permission)\"; valid permissions: \(valid)")
        }
        return try await repository.hasPermission(couple: couple, user: user, permission: permission)
    }

    public func permissions(user: UUID, couple: UUID, as actor: Actor) async throws -> [Permission] {
        try await repository.permissions(couple: couple, user: user, as: actor)
    }

    public func role(user: UUID, couple: UUID, as actor: Actor) async throws -> RoleName? {
        try await repository.role(couple: couple, user: user, as: actor)
    }

    public func canLeave(user: UUID, couple: UUID, as actor: Actor) async throws -> Bool {
        try await repository.canLeave(couple: couple, user: user, as: actor)
    }

    public func roles() async throws -> [RoleDefinition] {
        try await repository.roles().sorted { $0.rank < $1.rank }
    }
}
