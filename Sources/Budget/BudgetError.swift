import Tenancy

/// Every refusal of a budget operation (a refusal from below the budget, such as the permission checker's or the
/// database mapping's, converts with `BudgetError(_:)`).
public typealias BudgetError = DomainError<BudgetErrorCode>

public enum BudgetErrorCode: String, RefusalCode {
    case notAuthenticated = "not_authenticated"
    case permissionDenied = "permission_denied"
    case notFound = "not_found"
    case alreadyExists = "already_exists"
    case invalidInput = "invalid_input"
    /// The couple holds as many rows of a kind as it may (budget_row_limits).
    case quotaExceeded = "quota_exceeded"
    /// The primary scenario stays until another one is made primary.
    case primaryScenario = "primary_scenario"
    case unavailable = "unavailable"
}

/// `validatedName` with the budget's error.
func budgetName(_ text: String, _ field: String) throws(BudgetError) -> String {
    do { return try validatedName(text, field) } catch { throw BudgetError(error) }
}
