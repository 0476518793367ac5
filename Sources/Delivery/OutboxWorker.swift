import CoreMetrics
import Foundation
import OutboundHTTP
import Secrets
import Storage

/// Sends the outbox's messages: webhooks per Standard Webhooks 1.0, at least once, each with the outbox row's id
/// as `webhook-id` for receivers to deduplicate on. Any number of workers may run on one database (rbac serve
/// runs one, rbac deliver another): each claims due messages with SKIP LOCKED.
public struct OutboxWorker: Sendable {
    /// How long after an attempt fails the next one is due, by attempt; past the last, the message is dead.
    public static let schedule: [Duration] = [
        .seconds(5), .seconds(300), .seconds(1800), .seconds(7200), .seconds(18_000), .seconds(36_000),
        .seconds(36_000),
    ]

    let outbox: PostgresOutbox
    let http: OutboundHTTP
    let key: DeliveryKey
    let lease: Duration
    let now: @Sendable () -> Date
    private let deliveries: @Sendable (_ outcome: String) -> Counter
    private let lag: CoreMetrics.Timer
    private let depth: @Sendable (_ channel: String) -> Gauge
    private let oldest: @Sendable (_ channel: String) -> Gauge

    /// `http` should allow 15 s a request; `lease` is how long a claimed message waits for its worker before
    /// another may take it up (longer than a request may take).
    public init(
        outbox: PostgresOutbox, http: OutboundHTTP, key: DeliveryKey, lease: Duration = .seconds(60),
        metrics: any MetricsFactory = MetricsSystem.factory, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.outbox = outbox
        self.http = http
        self.key = key
        self.lease = lease
        self.now = now
        deliveries = {
            Counter(
                label: "rbac_outbox_deliveries_total", dimensions: [("channel", "webhook"), ("outcome", $0)],
                factory: metrics)
        }
        lag = CoreMetrics.Timer(
            label: "rbac_outbox_delivery_lag_seconds", dimensions: [("channel", "webhook")], factory: metrics)
        depth = { Gauge(label: "rbac_outbox_queue_depth", dimensions: [("channel", $0)], factory: metrics) }
        oldest = { Gauge(label: "rbac_outbox_oldest_seconds", dimensions: [("channel", $0)], factory: metrics) }
    }

    /// The outcome of one attempt, for the log and the metrics.
    public enum Outcome: String, Sendable {
        case delivered, retry, dead, disabled
        case noSecret = "no_secret"
    }

    /// Claims and sends what is due, up to `limit` at once; what each attempt came to.
    @discardableResult
    public func runOnce(limit: Int = 32) async throws -> [Outcome] {
        let claimed = try await outbox.claim(limit: limit, lease: lease)
        let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for message in claimed { group.addTask { try await send(message) } }
            var outcomes: [Outcome] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        // An empty queue has no row: its channel reads 0, not the last depth seen.
        let queue = try await outbox.queue()
        for channel in ["webhook"] {
            let row = queue.first { $0.channel == channel }
            depth(channel).record(row?.depth ?? 0)
            oldest(channel).record(row?.oldest ?? 0)
        }
        return outcomes
    }

    /// Sends until cancelled, waiting `idle` whenever nothing was due; `report` hears of failures to reach the
    /// database.
    public func run(idle: Duration = .seconds(1), report: @escaping @Sendable (String) -> Void = { _ in }) async {
        while !Task.isCancelled {
            do {
                if try await runOnce().isEmpty { try await Task.sleep(for: idle) }
            } catch is CancellationError {
                return
            } catch {
                report("outbox delivery paused: \(error)")
                try? await Task.sleep(for: idle)
            }
        }
    }

    private func send(_ message: PostgresOutbox.Claimed) async throws -> Outcome {
        guard let secret = PostgresOutbox.secret(of: message, key: key),
            let secretBytes = Data(base64Encoded: String(secret.dropFirst("whsec_".count)))
        else {
            try await outbox.failed(
                message.id, error: "the endpoint's secret does not open under this delivery key", retryIn: nil)
            return record(.noSecret)
        }
        let timestamp = Int(now().timeIntervalSince1970)
        let body = Array(
            #"{"type":\#(Self.jsonString(message.eventType)),"timestamp":"\#(message.createdAt.formatted(.iso8601))","data":\#(message.payload)}"#
                .utf8)
        let id = message.id.uuidString.lowercased()
        let signed = Array("\(id).\(timestamp).".utf8) + body
        let signature = Data(Digest.hmacSHA256(key: Array(secretBytes), message: signed)).base64EncodedString()
        let status: Int
        do {
            status = try await http.post(
                URL(string: message.url)!, body: body, contentType: "application/json",
                headers: ["webhook-id: \(id)", "webhook-timestamp: \(timestamp)", "webhook-signature: v1,\(signature)"]
            ).status
        } catch {
            return try await retry(message, "\(error)")
        }
        switch status {
        case 200..<300:
            try await outbox.delivered(message.id)
            lag.recordNanoseconds(Int64(max(0, now().timeIntervalSince(message.createdAt)) * 1e9))
            return record(.delivered)
        case 410:
            try await outbox.disable(endpoint: message.endpointID, error: "the endpoint answered 410 Gone")
            return record(.disabled)
        default:
            return try await retry(message, "the endpoint answered \(status)")
        }
    }

    private func retry(_ message: PostgresOutbox.Claimed, _ error: String) async throws -> Outcome {
        let delay = message.attempts <= Self.schedule.count ? Self.jittered(Self.schedule[message.attempts - 1]) : nil
        try await outbox.failed(message.id, error: error, retryIn: delay)
        return record(delay == nil ? .dead : .retry)
    }

    private func record(_ outcome: Outcome) -> Outcome {
        deliveries(outcome.rawValue).increment()
        return outcome
    }

    /// Within 10% of `delay`, so that messages that failed together are not all retried at one instant.
    static func jittered(_ delay: Duration) -> Duration {
        let seconds = Double(delay.components.seconds)
        return .seconds(Int64((seconds * Double.random(in: 0.9...1.1)).rounded()))
    }

    private static func jsonString(_ text: String) -> String {
        String(decoding: (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8), as: UTF8.self)
    }
}
