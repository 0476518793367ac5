import Tenancy

/// Every refusal of a budget operation: a stable code for programs (the same names the collaboration errors
/// use, so that the API and the CLI answer both alike) and a message for people.
public struct BudgetError: Error, Sendable, Equatable, CustomStringConvertible, CodedError {
    public enum Code: String, Sendable, CaseIterable {
        case notAuthenticated = "not_authenticated"
        case permissionDenied = "permission_denied"
        case notFound = "not_found"
        case alreadyExists = "already_exists"
        case invalidInput = "invalid_input"
        /// The couple holds as many rows of a kind as it may (budget_row_limits).
        case quotaExceeded = "quota_exceeded"
        case unavailable = "unavailable"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A refusal from below the budget (the permission checker, the rules for names, the database mapping) as
    /// the budget's own; a code the budget has no use for is invalid input.
    public init(_ error: any CodedError) {
        self.init(Code(rawValue: error.codeName) ?? .invalidInput, error.message)
    }

    public var description: String { message }
    public var codeName: String { code.rawValue }
}

/// `validatedName` with the budget's error.
func budgetName(_ text: String, _ field: String) throws(BudgetError) -> String {
    do { return try validatedName(text, field) } catch { throw BudgetError(error) }
}
