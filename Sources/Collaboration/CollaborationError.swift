/// Every refusal of a collaboration operation: a stable code for programs and a message for people.
public struct CollaborationError: Error, Sendable, Equatable, CustomStringConvertible, CodedError {
    public enum Code: String, Sendable, Codable, CaseIterable {
        case notAuthenticated = "not_authenticated"
        case permissionDenied = "permission_denied"
        case roleNotGrantable = "role_not_grantable"
        case notFound = "not_found"
        case alreadyExists = "already_exists"
        case invalidInput = "invalid_input"
        case lastOwner = "last_owner"
        case invitationExpired = "invitation_expired"
        case invitationRevoked = "invitation_revoked"
        case invitationUsed = "invitation_used"
        case invitationEmailMismatch = "invitation_email_mismatch"
        case invalidPolicy = "invalid_policy"
        /// The couple holds as many rows of a kind as it may (budget_row_limits).
        case quotaExceeded = "quota_exceeded"
        /// Too many of something in too short a time (a couple's invitations in an hour).
        case rateLimited = "rate_limited"
        /// A role a couple defined is still held (by members or pending invitations) and so cannot go.
        case roleInUse = "role_in_use"
        case unavailable = "unavailable"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A refusal from elsewhere (the budget, the rules for text) under the collaboration code of the same name,
    /// so that the API and the CLI answer every domain alike; a code with no such name is invalid input.
    public init(_ refusal: any CodedError) {
        self.init(Code(rawValue: refusal.codeName) ?? .invalidInput, refusal.message)
    }

    public var description: String { message }
    public var codeName: String { code.rawValue }
}
