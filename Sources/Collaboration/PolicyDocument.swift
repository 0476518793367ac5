import Foundation

/// `policies/policy.json` as data: permissions, and roles with their own permissions, the roles they inherit
/// from and the roles they may give. `apply_policy` (sql/functions/policy.sql) applies the same document in the database; this reading is
/// for the in-memory repository and for checking a policy without a database.
public struct PolicyDocument: Sendable, Decodable {
    public struct Role: Sendable, Decodable {
        public let rank: Int
        public let description: String
        public let inherits: [String]?
        public let permissions: [String]?
        public let grants: [String]?

        /// The keys a role's object may hold.
        static let keys = CodingKeys.allCases.map(\.rawValue).sorted()

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case rank, description, inherits, permissions, grants
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            // Read as a number first: JSONDecoder reads 4.5 or 1e20 as an Int's misfit without saying where. The
            // bounds are the database's, as apply_policy takes them.
            guard let rank = Int32(exactly: try container.decode(Double.self, forKey: .rank)) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .rank, in: container,
                    debugDescription: "it must be an integer from \(Int32.min) to \(Int32.max)")
            }
            self.rank = Int(rank)
            description = try container.decode(String.self, forKey: .description)
            inherits = try container.decodeIfPresent([String].self, forKey: .inherits)
            permissions = try container.decodeIfPresent([String].self, forKey: .permissions)
            grants = try container.decodeIfPresent([String].self, forKey: .grants)
        }
    }

    public let permissions: [String: String]
    public let roles: [String: Role]

    /// The document in `url`; one that is not strict JSON is refused, since the database, applying it, would
    /// refuse what Foundation takes (a trailing comma) or take the last of a repeated key's values where this
    /// reading takes the first, and so is one naming a key that nothing reads, as `apply_policy` refuses it:
    /// `inherit` for `inherits` would leave a role without its ancestors' permissions.
    public static func load(from url: URL) throws -> PolicyDocument {
        try decode(try Data(contentsOf: url), named: url.lastPathComponent)
    }

    /// The document `data`, read from the file `fileName`, as `load(from:)` reads it.
    public static func decode(_ data: Data, named fileName: String) throws -> PolicyDocument {
        try decodePolicyFile(PolicyDocument.self, data, named: fileName, as: "invalid policy") { data in
            guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return }
            let roles = object["roles"] as? [String: Any] ?? [:]
            let problems =
                object.keys.filter { !["permissions", "roles"].contains($0) }.map {
                    "the policy names \(quoted($0)), which it does not take; it takes permissions, roles"
                }
                + roles.flatMap { name, role in
                    ((role as? [String: Any])?.keys.filter { !Role.keys.contains($0) } ?? []).map {
                        "role \(quoted(name)) names \(quoted($0)), which a role does not take; it takes "
                            + Role.keys.joined(separator: ", ")
                    }
                }
            guard problems.isEmpty else {
                throw CollaborationError(.invalidPolicy, "invalid policy: " + problems.sorted().joined(separator: "; "))
            }
        }
    }

    /// Each role with its effective permissions (its own and its ancestors'). Throws `invalidPolicy` naming
    /// every unknown permission or role, any inheritance cycle, and roles but the owner that hold couple.transfer.
    public func flattened() throws(CollaborationError) -> [RoleDefinition] {
        var problems: [String] = []
        for (name, role) in roles.sorted(by: { $0.key < $1.key }) {
            for permission in role.permissions ?? [] where permissions[permission] == nil {
                problems.append("role \(quoted(name)) lists unknown permission \(quoted(permission))")
            }
            for other in (role.inherits ?? []) + (role.grants ?? []) where roles[other] == nil {
                problems.append("role \(quoted(name)) names unknown role \(quoted(other))")
            }
        }
        if roles["owner"] == nil { problems.append("the policy must define the \"owner\" role") }
        guard problems.isEmpty else {
            throw CollaborationError(.invalidPolicy, "invalid policy: " + problems.joined(separator: "; "))
        }
        var definitions: [RoleDefinition] = []
        for (name, role) in roles {
            var seen: Set<String> = [name]
            var queue = role.inherits ?? []
            var effective = Set(role.permissions ?? [])
            while let ancestor = queue.popLast() {
                if ancestor == name {
                    throw CollaborationError(
                        .invalidPolicy, "invalid policy: role \(quoted(name)) inherits from itself")
                }
                guard seen.insert(ancestor).inserted, let definition = roles[ancestor] else { continue }
                effective.formUnion(definition.permissions ?? [])
                queue += definition.inherits ?? []
            }
            guard let roleName = RoleName(rawValue: name) else {
                throw CollaborationError(.invalidPolicy, "invalid policy: \(quoted(name)) is not a role name")
            }
            definitions.append(
                RoleDefinition(
                    name: roleName, rank: role.rank, description: role.description,
                    permissions: effective.sorted().compactMap(Permission.init(rawValue:)),
                    grants: (role.grants ?? []).compactMap(RoleName.init(rawValue:))))
        }
        // couple.transfer goes with ownership, as `apply_policy` holds it.
        let transferring = definitions.filter { $0.name != .owner && $0.permissions.contains(.transfer) }
        guard transferring.isEmpty else {
            throw CollaborationError(
                .invalidPolicy,
                "invalid policy: couple.transfer goes with ownership, and only \"owner\" may hold it, not: "
                    + transferring.map(\.name.rawValue).sorted().joined(separator: ", "))
        }
        return definitions.sorted { $0.rank < $1.rank }
    }
}

/// `data`, the file `fileName` of policies/ (`policy.json`, `tests.json`), as `T`: strict JSON, then what `check`
/// refuses, then what does not fit `T`, each refused (`invalid_policy`) with a message that begins with `what` and
/// names the file or the place in it.
func decodePolicyFile<T: Decodable>(
    _ type: T.Type, _ data: Data, named fileName: String, as what: String, check: (Data) throws -> Void = { _ in }
) throws -> T {
    if let problem = StrictJSON.problem(in: data) {
        throw CollaborationError(.invalidPolicy, "\(what): \(fileName) \(problem)")
    }
    try check(data)
    do {
        return try JSONDecoder().decode(T.self, from: data)
    } catch let error as DecodingError {
        throw CollaborationError(.invalidPolicy, "\(what): \(error.misfit(in: fileName))")
    }
}
