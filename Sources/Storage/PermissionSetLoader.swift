import Collaboration
import Foundation
import Postgres
import Synchronization

/// Loads permission sets for checks the cache cannot answer: the sets asked for while others load are read
/// together, by one statement (`user_roles`), on one leased connection from one batch to the next.
final class PermissionSetLoader: Sendable {
    private let batches: BatchedLoader<CoupleUser, PermissionSet>

    init(pool: PostgresConnectionPool) {
        let roles = RolePermissions()
        let coupleRoles = CoupleRolePermissions()
        batches = BatchedLoader(concurrency: Self.permissionSetLoads, maxBatch: 1_000) { batches in
            do {
                try await pool.withConnection { connection in
                    // On the connection's thread, from one batch to the next. After each batch the connection is
                    // checked as the pool checks an idle one before a lease: if the server dropped it, the drain
                    // ends before taking another batch, and the next drain leases another connection.
                    try await connection.withSession { session in
                        while let pairs = batches.next() {
                            batches.answer(
                                Result {
                                    try Self.permissionSets(
                                        pairs, session: session, roles: roles, coupleRoles: coupleRoles)
                                })
                            guard session.isSound else { return }
                        }
                    }
                }
            } catch let error as PostgresError {
                throw domainError(reading: error)
            }
        }
    }

    func load(couple: UUID, user: UUID) async throws -> PermissionSet {
        try await batches.value(for: CoupleUser(couple: couple, user: user))
    }

    struct CoupleUser: Sendable {
        let couple: UUID
        let user: UUID
    }

    /// How many drains of permission sets run at once, each on a connection of its own, reading one batch at a
    /// time. One: under load, batches grow rather than statements (docs/decisions/0004).
    static let permissionSetLoads = 1

    /// One prepared statement, no transaction around it (BEGIN and COMMIT would triple the round trips): the
    /// function reads every pair's revision and role from one snapshot, with the policy revision, and the roles
    /// map to their permissions as `roles` knows them at that revision (read once per policy change).
    private static func permissionSets(
        _ pairs: [CoupleUser], session: PostgresConnection.Session, roles: RolePermissions,
        coupleRoles: CoupleRolePermissions
    ) throws -> [PermissionSet] {
        let read: PostgresQuery = """
            SELECT revision, role, policy_revision, expires_at, couple_role_permissions
            FROM user_roles(\(pairs.map(\.couple)), \(pairs.map(\.user)))
            """
        do {
            // A policy change that lands between the two reads leaves no permissions at the roles' revision: the
            // roles are read again, at the new one.
            for _ in 0..<Self.policyChangeAttempts {
                let rows = try session.query(read.prepared(as: "user_roles"))
                guard rows.count == pairs.count else {
                    throw PostgresError(
                        .decoding, message: "user_roles returned \(rows.count) rows for \(pairs.count) pairs")
                }
                let members = try rows.map(Member.init)
                let policyRevision: Int64 = try rows[0].decode("policy_revision")
                guard members.contains(where: { $0.role != nil && $0.coupleRolePermissions == nil }) else {
                    return members.map {
                        $0.permissionSet(policyRevision: policyRevision, granted: [:], coupleRoles: coupleRoles)
                    }
                }
                guard let granted = try roles.at(policyRevision: policyRevision, session: session) else { continue }
                return members.map {
                    $0.permissionSet(policyRevision: policyRevision, granted: granted, coupleRoles: coupleRoles)
                }
            }
            throw CollaborationError(
                .unavailable,
                "what roles grant changed \(Self.policyChangeAttempts) times while a check read it; try again")
        } catch let error as PostgresError {
            throw domainError(reading: error)
        }
    }

    /// How often a load reads the roles before giving up on a policy that keeps changing under it.
    static let policyChangeAttempts = 5

    /// A row of user_roles.
    private struct Member {
        let revision: Int64?
        let role: String?
        let expiresAt: Date?
        /// For a role the couple defined, what it grants (read with the couple's revision), space-separated; nil
        /// for the policy's, and for a couple's role that grants nothing (which the policy's map has no entry
        /// for, so it maps to nothing all the same).
        let coupleRolePermissions: String?

        init(_ row: PostgresRow) throws {
            revision = try row.decode("revision")
            role = try row.decode("role")
            expiresAt = try row.decode("expires_at")
            coupleRolePermissions = try row.decode("couple_role_permissions")
        }

        /// `granted`: what each role of the policy grants at `policyRevision`.
        func permissionSet(
            policyRevision: Int64, granted: [String: Set<Permission>], coupleRoles: CoupleRolePermissions
        ) -> PermissionSet {
            let permissions =
                coupleRolePermissions.map(coupleRoles.set) ?? role.flatMap { granted[$0] } ?? []
            return PermissionSet(
                permissions: permissions, revision: revision, role: role, policyRevision: policyRevision,
                expiresAt: expiresAt)
        }
    }
}

/// What each role grants, as last read from the database (`role_permission_sets`, sql/functions/permissions.sql), with the policy
/// revision it was read at. Permission-set loads read members' roles and map them through it; they use it only
/// at the policy revision their own read returned, so it needs no invalidation: a policy change shows as a new
/// revision, and the next load reads the roles' permissions again.
final class RolePermissions: Sendable {
    private struct Snapshot {
        let policyRevision: Int64
        let permissions: [String: Set<Permission>]
    }

    private let latest = Mutex<Snapshot?>(nil)

    /// The permissions of each role at `policyRevision`, read through `session` unless already known. Nil when
    /// the database is past that revision by now: the caller's roles must be read again.
    func at(policyRevision: Int64, session: PostgresConnection.Session) throws -> [String: Set<Permission>]? {
        if let known = latest.withLock({ $0 }), known.policyRevision == policyRevision { return known.permissions }
        let rows = try session.query(
            PostgresQuery("SELECT policy_revision, role, permissions FROM role_permission_sets()").prepared(
                as: "role_permission_sets"))
        guard let read: Int64 = try rows.first?.decode("policy_revision") else { return nil }
        var permissions: [String: Set<Permission>] = [:]
        for row in rows {
            let names: [String] = try row.decode("permissions")
            permissions[try row.decode("role")] = Set(names.compactMap(Permission.init(rawValue:)))
        }
        // Revisions only grow; a slower read of an older policy does not replace a newer one.
        latest.withLock { latest in
            if read > latest?.policyRevision ?? .min {
                latest = Snapshot(policyRevision: read, permissions: permissions)
            }
        }
        return read == policyRevision ? permissions : nil
    }
}

/// One copy of each distinct permission set of couples' roles, by its text (`user_roles`): couples define
/// roles alike, and a set is parsed once and shared by every cached entry that holds it rather than copied into
/// each. At most `capacity` sets are kept; past it, all are dropped and parsed again as they come.
final class CoupleRolePermissions: Sendable {
    private let sets = Mutex<[String: Set<Permission>]>([:])
    static let capacity = 4_096

    /// The set `text` names (sorted names, space-separated).
    func set(_ text: String) -> Set<Permission> {
        if let known = sets.withLock({ $0[text] }) { return known }
        let parsed = Set(text.split(separator: " ").compactMap { Permission(rawValue: String($0)) })
        sets.withLock { sets in
            if sets.count >= Self.capacity { sets.removeAll(keepingCapacity: true) }
            sets[text] = parsed
        }
        return parsed
    }
}
