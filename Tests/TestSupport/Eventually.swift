/// Asks `condition` every `interval` until it holds, for at most `limit`: whether it came to hold. For what
/// happens in its own time on another connection, process or thread. The limit is what the test claims (a notice
/// heard within a second), or far beyond what a set-up needs on a loaded machine: either way `false` is a
/// failure, never a slow run, and a test whose condition never holds fails rather than waits for ever.
public func eventually(
    within limit: Duration, every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try await Task.sleep(for: interval)
    }
    return true
}
