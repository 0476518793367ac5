import Foundation

/// Counts failed invitation-token attempts per client address in a sliding window, so guessing tokens is
/// throttled (429) without slowing anyone who presents a valid token.
public actor FailedAttemptLimiter {
    private let limit: Int
    private let window: TimeInterval
    private let now: @Sendable () -> Date
    private var failures: [String: [Date]] = [:]

    public init(limit: Int = 10, window: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.limit = limit
        self.window = window
        self.now = now
    }

    /// Whether `client` has used up its failures for now.
    public func isBlocked(_ client: String) -> Bool {
        prune(client)
        return (failures[client]?.count ?? 0) >= limit
    }

    public func recordFailure(_ client: String) {
        prune(client)
        failures[client, default: []].append(now())
        if failures.count > 100_000 { failures = failures.filter { !$0.value.isEmpty } }
    }

    private func prune(_ client: String) {
        let cutoff = now().addingTimeInterval(-window)
        failures[client]?.removeAll { $0 < cutoff }
        if failures[client]?.isEmpty == true { failures[client] = nil }
    }
}
