import Collaboration
import Postgres
import Synchronization

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
