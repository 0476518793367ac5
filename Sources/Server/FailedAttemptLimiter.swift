import Foundation

/// Counts failed invitation-token attempts per client in a sliding window, so guessing tokens is throttled (429)
/// without slowing anyone who presents a valid token.
///
/// A client is an IPv4 address or an IPv6 /64: a subscriber is given at least a /64 and can send from any address
/// in it, so counting addresses would give each guess a fresh count. The table holds at most `capacity` clients.
/// When it is full of clients still within their window, a newcomer's failure is refused rather than counted:
/// forgetting someone's count would let them guess again, and a refusal costs a valid token nothing.
public actor FailedAttemptLimiter {
    private let limit: Int
    private let window: TimeInterval
    private let capacity: Int
    private let now: @Sendable () -> Date
    /// Each client's failures within the window, oldest first; never an empty list.
    private var failures: [String: [Date]] = [:]
    /// When the full table may next be searched for clients whose failures have all passed. A search reads every
    /// client, so a table kept full by newcomers is searched a few times a window, not once per newcomer.
    private var nextSweep = Date.distantPast

    public init(
        limit: Int = 10, window: TimeInterval = 60, capacity: Int = 100_000,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.limit = limit
        self.window = window
        self.capacity = capacity
        self.now = now
    }

    /// Whether `client` (an address) may not fail again for now.
    public func isBlocked(_ client: String) -> Bool {
        let key = Self.key(client)
        let recent = recentFailures(key)
        return recent.count >= limit || (recent.isEmpty && !hasRoom())
    }

    /// Counts a failed attempt by `client` (an address): false, and nothing counted, when it is blocked.
    public func countFailure(_ client: String) -> Bool {
        let key = Self.key(client)
        let recent = recentFailures(key)
        guard recent.count < limit, !recent.isEmpty || hasRoom() else { return false }
        failures[key] = recent + [now()]
        return true
    }

    /// How many clients the table holds.
    var clients: Int { failures.count }

    /// `client`'s failures within the window; a client with none is forgotten.
    private func recentFailures(_ key: String) -> [Date] {
        guard let dates = failures[key] else { return [] }
        let cutoff = now().addingTimeInterval(-window)
        let recent = Array(dates.drop { $0 < cutoff })
        failures[key] = recent.isEmpty ? nil : recent
        return recent
    }

    /// Whether one more client fits, after forgetting those whose failures have all passed if the table is full.
    private func hasRoom() -> Bool {
        guard failures.count >= capacity else { return true }
        let now = self.now()
        guard now >= nextSweep else { return false }
        let cutoff = now.addingTimeInterval(-window)
        failures = failures.filter { $0.value.last! >= cutoff }
        nextSweep = now.addingTimeInterval(window / 10)
        return failures.count < capacity
    }

    /// The client an address belongs to: an IPv4 address (also when written IPv4-mapped), an IPv6 address's /64.
    static func key(_ address: String) -> String {
        guard let bytes = AddressRanges.bytes(of: address) else { return address }
        guard bytes.count == 16 else { return AddressRanges.text(of: bytes) }
        return AddressRanges.text(of: Array(bytes[..<8]) + Array(repeating: 0, count: 8)) + "/64"
    }
}
