import CoreMetrics
import Foundation

/// The answer to "may user U do P in couple C", with the couple revision it was read at.
public struct PermissionCheck: Sendable, Hashable, Encodable {
    public let allowed: Bool
    /// Nil when the couple does not exist.
    public let revision: Int64?

    public init(allowed: Bool, revision: Int64?) {
        self.allowed = allowed
        self.revision = revision
    }
}

/// Answers permission checks for backends, from a cache when one is given and its change feed vouches for it,
/// else from the repository. A check with `minRevision` is answered from a set read at that revision or later.
///
/// Checks never act for anyone, and a check the repository cannot answer throws: it never falls back to "yes".
public final class PermissionChecker: Sendable {
    private let repository: any CollaborationRepository
    private let cache: PermissionCache?
    private let isCacheTrusted: @Sendable () -> Bool
    private let metrics: OperationMetrics
    private let cachedChecks: Counter

    /// `isCacheTrusted` says whether the cache's change feed is live; while it is not, every check reads the
    /// repository and nothing is cached.
    public init(
        repository: any CollaborationRepository, cache: PermissionCache? = nil,
        isCacheTrusted: @escaping @Sendable () -> Bool = { false }, metrics: OperationMetrics = OperationMetrics()
    ) {
        self.repository = repository
        self.cache = cache
        self.isCacheTrusted = isCacheTrusted
        self.metrics = metrics
        cachedChecks = metrics.counter("permission.check", outcome: "cached")
    }

    /// Refuses (`invalid_input`) a permission that no role grants, so that a typo cannot pass for a denial. The
    /// permissions are read from the repository unless the cache holds them; they are kept only while the
    /// change feed is trusted, and a policy change (or a lost feed) drops them with everything else. Using them
    /// without asking the feed is safe: a permission removed meanwhile is then answered from a fresh set (no),
    /// and one added meanwhile is refused for as long as the notice takes to arrive.
    public func requireKnown(_ permissions: some Sequence<Permission>) async throws {
        let known = try await knownPermissions()
        guard let unknown = permissions.first(where: { !known.contains($0) }) else { return }
        let valid = known.map(\.rawValue).sorted().joined(separator: ", ")
        throw CollaborationError(.invalidInput, "unknown permission \"\(unknown)\"; valid permissions: \(valid)")
    }

    private func knownPermissions() async throws -> Set<Permission> {
        if let known = cache?.knownPermissions() { return known }
        let ticket = cache?.ticketForKnownPermissions()
        let known = Set(try await repository.roles().flatMap(\.permissions))
        if let cache, let ticket, isCacheTrusted() { cache.storeKnownPermissions(known, ticket: ticket) }
        return known
    }

    /// `check`, refusing a permission that no role grants (`requireKnown`). The permissions are read only for a
    /// denial: one the user holds is one some role grants. Without a cache, an allowed check is one statement.
    public func checkKnown(couple: UUID, user: UUID, permission: Permission, minRevision: Int64? = nil)
        async throws -> PermissionCheck
    {
        let answer = try await check(couple: couple, user: user, permission: permission, minRevision: minRevision)
        if !answer.allowed { try await requireKnown([permission]) }
        return answer
    }

    /// Whether `user` holds `permission` in `couple`. The permission is not checked against the policy (see
    /// `requireKnown`): one no role grants is simply not held.
    public func check(couple: UUID, user: UUID, permission: Permission, minRevision: Int64? = nil) async throws
        -> PermissionCheck
    {
        let set = try await permissionSet(couple: couple, user: user, minRevision: minRevision)
        return PermissionCheck(allowed: set.permissions.contains(permission), revision: set.revision)
    }

    /// `checkKnown`'s answer when the cache alone can give it now: trusted, holding the set, and for a denial
    /// knowing the permission some role grants. Nil when the repository must be asked (`checkKnown`, which
    /// also gives the errors).
    public func cachedCheck(couple: UUID, user: UUID, permission: Permission, minRevision: Int64? = nil)
        -> PermissionCheck?
    {
        guard let cache, isCacheTrusted(), let set = cache.lookup(couple: couple, user: user, minRevision: minRevision)
        else { return nil }
        let allowed = set.permissions.contains(permission)
        guard allowed || cache.knownPermissions()?.contains(permission) == true else { return nil }
        cachedChecks.increment()
        return PermissionCheck(allowed: allowed, revision: set.revision)
    }

    /// `minRevision` above the couple's revision in the database is refused (`invalid_input`): every revision a
    /// write reports is committed before it is reported, so no read can be behind it, and one that was never
    /// reached cannot be answered "at that revision or later".
    public func permissionSet(couple: UUID, user: UUID, minRevision: Int64? = nil) async throws -> PermissionSet {
        let loaded = try await readSet(couple: couple, user: user, minRevision: minRevision)
        if let minRevision, let revision = loaded.revision, revision < minRevision {
            throw CollaborationError(
                .invalidInput,
                "min_revision \(minRevision) is ahead of the couple's revision \(revision); pass a revision a write returned"
            )
        }
        return loaded
    }

    private func readSet(couple: UUID, user: UUID, minRevision: Int64?) async throws -> PermissionSet {
        guard let cache, isCacheTrusted() else {
            return try await metrics.measure("permission.check", outcome: "database") {
                try await repository.permissionSet(couple: couple, user: user)
            }
        }
        if let cached = cache.lookup(couple: couple, user: user, minRevision: minRevision) {
            cachedChecks.increment()
            return cached
        }
        // Taken while the feed is trusted, the ticket is enough: if the feed is lost during the load, it drops
        // everything when it notices (a new epoch), which either refuses the store or forgets what it stored.
        let ticket = cache.ticket(for: couple)
        let loaded = try await metrics.measure("permission.check", outcome: "database") {
            try await repository.permissionSet(couple: couple, user: user)
        }
        cache.store(loaded, couple: couple, user: user, ticket: ticket)
        return loaded
    }
}

extension PermissionChecker: PermissionChecking {
    /// A permission that is not one (not `area.action`) is not held.
    public func allows(_ permission: String, user: UUID, couple: UUID) async throws -> Bool {
        guard let permission = Permission(rawValue: permission) else { return false }
        return try await check(couple: couple, user: user, permission: permission).allowed
    }
}
