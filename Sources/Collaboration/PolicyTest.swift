/// One expectation about the policy, as written in `policies/tests.json`: either that a role does (or does
/// not) hold a permission, or that it may (or may not) give another role.
public struct PolicyTest: Sendable, Decodable {
    public let description: String
    public let role: String
    public let permission: String?
    public let grants: String?
    public let allowed: Bool

    /// Whether the flattened policy meets this expectation; a test naming neither a permission nor a role to
    /// give, or an unknown role, fails.
    public func passes(in roles: [RoleDefinition]) -> Bool {
        guard let definition = roles.first(where: { $0.name.rawValue == role }) else { return false }
        if let permission {
            return definition.permissions.contains { $0.rawValue == permission } == allowed
        }
        if let grants {
            return definition.grants.contains { $0.rawValue == grants } == allowed
        }
        return false
    }
}
