import Budget
import Collaboration
import Testing

/// The two kinds of repository that suites of rules run on: the in-memory one (fast, for domain tests) and the
/// PostgreSQL one, so that the two cannot drift apart.
enum Backend: String, CaseIterable, CustomTestStringConvertible {
    case memory, postgres
    var testDescription: String { rawValue }
}

/// Expects `body` to be refused with `code`; returns the refusal for further checks.
@discardableResult
func expectRefusal(
    _ code: CollaborationError.Code, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> CollaborationError? {
    await expectRefused(code, body, sourceLocation)
}

@discardableResult
func expectBudgetRefusal(
    _ code: BudgetError.Code, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> BudgetError? {
    await expectRefused(code, body, sourceLocation)
}

private func expectRefused<Code: RefusalCode>(
    _ code: Code, _ body: () async throws -> Void, _ sourceLocation: SourceLocation
) async -> DomainError<Code>? {
    do {
        try await body()
        Issue.record("expected a refusal with \(code), but it succeeded", sourceLocation: sourceLocation)
    } catch let error as DomainError<Code> {
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected a \(DomainError<Code>.self) \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
