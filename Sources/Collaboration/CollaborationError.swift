import Foundation

/// Every refusal of a collaboration operation (a refusal from elsewhere, such as the budget's or the rules for
/// text, converts with `CollaborationError(_:)`).
public typealias CollaborationError = DomainError<CollaborationErrorCode>

public enum CollaborationErrorCode: String, RefusalCode, Codable {
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
    /// A role is still held (by members or invitations) and so cannot go: a couple's own, or one a policy
    /// drops; or a policy's new role has the name of a couple's own.
    case roleInUse = "role_in_use"
    /// The budget's: the primary scenario stays until another one is made primary.
    case primaryScenario = "primary_scenario"
    /// Something is under way that the operation would undo or repeat (an outbox message a worker is sending).
    case inProgress = "in_progress"
    case unavailable = "unavailable"
}

extension DomainError where Code == CollaborationErrorCode {
    /// `role` is neither the policy's nor one the couple defined: the database's words (rbac.require_role).
    public static func unknownRole(_ role: String, valid: [RoleName]) -> Self {
        CollaborationError(
            .invalidInput, "unknown role \"\(role)\"; valid roles: \(valid.map(\.rawValue).joined(separator: ", "))")
    }
}

extension Date {
    /// The instant as refusals show it to people, as the SQL functions do (`rbac.shown_time`):
    /// 2026-12-11 03:30:45 UTC.
    public var shownInRefusals: String {
        formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false).dateTimeSeparator(.space))
            + " UTC"
    }
}
