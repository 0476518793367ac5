import Foundation

/// One expectation about the policy, as written in `policies/tests.json`: either that a role does (or does
/// not) hold a permission, or that it may (or may not) give another role. A role may be one of the policy's or a
/// couple's own defined in the file's fixtures.
public struct PolicyTest: Sendable, Decodable {
    public let description: String
    public let role: String
    public let permission: String?
    public let grants: String?
    public let allowed: Bool

    /// Whether the flattened policy, with the fixtures' couple roles, meets this expectation; a test naming
    /// neither a permission nor a role to give, or an unknown role, fails. Giving follows the database's rules:
    /// a policy role gives the roles its `grants` lists; a couple's role is given by a role holding roles.assign
    /// and every permission it grants.
    public func passes(in roles: [RoleDefinition], coupleRoles: [String: Set<Permission>] = [:]) -> Bool {
        let policy = Dictionary(uniqueKeysWithValues: roles.map { ($0.name.rawValue, $0) })
        guard let held = policy[role].map({ Set($0.permissions) }) ?? coupleRoles[role] else { return false }
        if let permission {
            return held.contains { $0.rawValue == permission } == allowed
        }
        if let grants {
            if let given = coupleRoles[grants] {
                return (held.contains(Self.assign) && given.isSubset(of: held)) == allowed
            }
            guard policy[grants] != nil else { return false }
            return (policy[role]?.grants.contains { $0.rawValue == grants } ?? false) == allowed
        }
        return false
    }

    private static let assign = Permission(rawValue: "roles.assign")!
}

/// `policies/tests.json`: the expectations, either a list alone or `{"couple_roles": {...}, "tests": [...]}`,
/// where `couple_roles` defines, as fixtures, roles a couple could define (`{"mom": {"permissions": [...]}}`).
public struct PolicyTestFile: Sendable, Decodable {
    public let coupleRoles: [String: Fixture]
    public let tests: [PolicyTest]

    public struct Fixture: Sendable, Decodable {
        public let description: String?
        public let permissions: [String]
    }

    private enum CodingKeys: String, CodingKey {
        case coupleRoles = "couple_roles"
        case tests
    }

    /// The file at `url`, read as `PolicyDocument.load` reads the policy (`decodePolicyFile`).
    public static func load(from url: URL) throws -> PolicyTestFile {
        try decodePolicyFile(
            PolicyTestFile.self, try Data(contentsOf: url), named: url.lastPathComponent, as: "invalid policy tests")
    }

    public init(from decoder: any Decoder) throws {
        // A list: read as one, so that what is amiss in it is named there, not as a list where an object belongs.
        if (try? decoder.unkeyedContainer()) != nil {
            tests = try [PolicyTest](from: decoder)
            coupleRoles = [:]
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        tests = try container.decode([PolicyTest].self, forKey: .tests)
        coupleRoles = try container.decodeIfPresent([String: Fixture].self, forKey: .coupleRoles) ?? [:]
    }

    /// Each test with whether it passed. A fixture is refused (`invalid_policy`) as the database would refuse
    /// the role: a malformed name, one of the policy's, or a permission no role of the policy grants.
    public func results(in roles: [RoleDefinition]) throws -> [(PolicyTest, Bool)] {
        let registry = Set(roles.flatMap(\.permissions))
        var fixtures: [String: Set<Permission>] = [:]
        for (name, fixture) in coupleRoles {
            guard RoleName(rawValue: name) != nil, !roles.contains(where: { $0.name.rawValue == name }) else {
                throw CollaborationError(
                    .invalidPolicy, "couple role \"\(name)\" must be lower-case letters and no role of the policy")
            }
            let permissions = fixture.permissions.compactMap(Permission.init(rawValue:))
            guard permissions.count == fixture.permissions.count, permissions.allSatisfy(registry.contains) else {
                throw CollaborationError(
                    .invalidPolicy, "couple role \"\(name)\" grants a permission that is not in the policy")
            }
            fixtures[name] = Set(permissions)
        }
        return tests.map { ($0, $0.passes(in: roles, coupleRoles: fixtures)) }
    }
}
