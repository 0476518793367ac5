import Collaboration
import CoreMetrics
import Foundation
import OutboundHTTP
import Secrets
import Storage

/// Sends the outbox's messages, at least once: webhooks per Standard Webhooks 1.0 with the outbox row's id as
/// `webhook-id` for receivers to deduplicate on, and invitation emails through SMTP with it as `Message-ID`. Any
/// number of workers may run on one database (rbac serve runs one, rbac deliver another): each claims due
/// messages with SKIP LOCKED.
public struct OutboxWorker: Sendable {
    /// How long after an attempt fails the next one is due, by attempt; past the last, the message is dead.
    public static let schedule: [Duration] = [
        .seconds(5), .seconds(300), .seconds(1800), .seconds(7200), .seconds(18_000), .seconds(36_000),
        .seconds(36_000),
    ]

    /// Where invitation emails go out, and whom they are from.
    public struct Mail: Sendable {
        let server: OutboundMail
        /// The sender's address at its domain's ASCII spelling, as every recipient's is: what MAIL FROM carries.
        let address: String
        /// The From header: the address, after the name when there is one (`displayName`). As typed, a name or
        /// domain beyond ASCII would need a server that takes UTF-8.
        let from: String

        /// `from`: an address, or a name and an address in angle brackets (`Wedding <no-reply@example.com>`).
        public init(server: OutboundMail, from: String) throws(CollaborationError) {
            // Read by code point: "\r\n" is one Character, equal to neither "\r" nor "\n".
            guard !containsControlCharacter(from) else {
                throw CollaborationError(
                    .invalidInput, "a sender must not hold control characters, which forge headers: \(quoted(from))")
            }
            var (name, address) = (Substring(""), Substring(from))
            if let open = from.lastIndex(of: "<"), from.hasSuffix(">") {
                name = from[..<open]
                address = from[from.index(after: open)..<from.index(before: from.endIndex)]
            }
            do {
                self.address = try EmailAddress(validating: address.trimmingCharacters(in: .whitespaces))
                    .withASCIIDomain
            } catch {
                throw CollaborationError(.invalidInput, "a sender must name an email address: \(error.message)")
            }
            let shown = name.trimmingCharacters(in: .whitespaces)
            self.server = server
            self.from = shown.isEmpty ? self.address : "\(Self.displayName(shown)) <\(self.address)>"
        }

        /// A sender's name as the From header takes it: as `encodedWord` writes it, which leaves plain ASCII as it
        /// is; and such a name that holds what the header reads as something else (`Ann, Bo` names two senders, `<`
        /// begins an address) as a quoted string.
        static func displayName(_ name: String) -> String {
            let encoded = InvitationEmail.encodedWord(name)
            guard encoded == name, name.contains(where: "()<>[]:;@\\,.\"".contains) else { return encoded }
            return "\"" + name.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
        }
    }

    let outbox: PostgresOutbox
    let http: OutboundHTTP
    let key: DeliveryKey
    let mail: Mail?
    /// The public base URL of invitation links.
    let links: URL
    let lease: Duration
    let now: @Sendable () -> Date
    private let deliveries: @Sendable (_ channel: String, _ outcome: String) -> Counter
    private let lag: @Sendable (_ channel: String) -> CoreMetrics.Timer
    private let depth: @Sendable (_ channel: String) -> Gauge
    private let oldest: @Sendable (_ channel: String) -> Gauge

    /// `http` should allow 15 s a request; `lease` is how long a claimed message waits for its worker before
    /// another may take it up (longer than a request may take). Without `mail`, emails wait for a worker that has
    /// it.
    public init(
        outbox: PostgresOutbox, http: OutboundHTTP, key: DeliveryKey, mail: Mail? = nil,
        links: URL = URL(string: "http://localhost:8080")!, lease: Duration = .seconds(60),
        metrics: any MetricsFactory = MetricsSystem.factory, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.outbox = outbox
        self.http = http
        self.key = key
        self.mail = mail
        self.links = links
        self.lease = lease
        self.now = now
        deliveries = {
            Counter(
                label: "rbac_outbox_deliveries_total", dimensions: [("channel", $0), ("outcome", $1)], factory: metrics)
        }
        lag = {
            CoreMetrics.Timer(
                label: "rbac_outbox_delivery_lag_seconds", dimensions: [("channel", $0)], factory: metrics)
        }
        depth = { Gauge(label: "rbac_outbox_queue_depth", dimensions: [("channel", $0)], factory: metrics) }
        oldest = { Gauge(label: "rbac_outbox_oldest_seconds", dimensions: [("channel", $0)], factory: metrics) }
    }

    /// The outcome of one attempt, for the log and the metrics.
    public enum Outcome: String, Sendable {
        case delivered, retry, dead, disabled
    }

    /// Claims and sends what is due, up to `limit` at once (a few: receivers are spared bursts, and what one
    /// worker leaves due, another takes); what each attempt came to.
    @discardableResult
    public func runOnce(limit: Int = 8) async throws -> [Outcome] {
        let claimed = try await outbox.claim(
            limit: limit, lease: lease, channels: mail == nil ? ["webhook"] : PostgresOutbox.channels, key: key)
        return try await withThrowingTaskGroup(of: Outcome.self) { group in
            for message in claimed {
                group.addTask {
                    let outcome: Outcome
                    do {
                        outcome = try await message.channel == "email" ? email(message) : webhook(message)
                    } catch is CancellationError {
                        // Stopped while sending it: due again at once rather than when its lease runs out (the
                        // receiver may have had it; a message goes at least once). In a task of its own, which the
                        // cancellation does not reach: it would cancel the statement too.
                        try? await Task { try await outbox.release(message) }.value
                        throw CancellationError()
                    }
                    deliveries(message.channel, outcome.rawValue).increment()
                    if outcome == .delivered {
                        lag(message.channel).recordNanoseconds(
                            Int64(max(0, now().timeIntervalSince(message.createdAt)) * 1e9))
                    }
                    return outcome
                }
            }
            var outcomes: [Outcome] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
    }

    /// Records the queue's depth and oldest age per channel (`/metrics`). `run` does it once a `gaugeInterval`,
    /// not every round: counting a backlog of thousands after every eight messages made draining it quadratic.
    func recordQueue() async throws {
        // An empty queue has no row: its channel reads 0, not the last depth seen.
        let queue = try await outbox.queue()
        for channel in PostgresOutbox.channels {
            let row = queue.first { $0.channel == channel }
            depth(channel).record(row?.depth ?? 0)
            oldest(channel).record(row?.oldest ?? 0)
        }
    }

    /// How often `run` records the queue's gauges.
    static let gaugeInterval: Duration = .seconds(1)

    /// Sends until cancelled, looking again `idle` after finding nothing due: what a commit adds waits at most
    /// that long (a look costs one indexed read of nothing). While the database cannot be reached, or holds its
    /// secrets under another delivery key, it tries every `retry`; `report` hears once that delivery paused,
    /// with why, and once that it resumed.
    public func run(
        idle: Duration = .milliseconds(200), retry: Duration = .seconds(5),
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) async {
        var paused = false
        var gaugesDue = ContinuousClock.now
        // Asked at the start, so that an instance deployed with the wrong key says so before anything is due;
        // from then on each claim asks.
        var keyChecked = false
        while !Task.isCancelled {
            do {
                if !keyChecked {
                    if try await outbox.keyMatches(key) == false { throw DeliveryKeyMismatch() }
                    keyChecked = true
                }
                if ContinuousClock.now >= gaugesDue {
                    try await recordQueue()
                    gaugesDue = ContinuousClock.now + Self.gaugeInterval
                }
                let outcomes = try await runOnce()
                if paused {
                    report("outbox delivery resumed")
                    paused = false
                }
                if outcomes.isEmpty { try await Task.sleep(for: idle) }
            } catch is CancellationError {
                return
            } catch {
                if !paused { report("outbox delivery paused: \(error)") }
                paused = true
                try? await Task.sleep(for: retry)
            }
        }
    }

    /// The invitation link a message carries, when it carries a sealed token.
    private func link(_ message: PostgresOutbox.Claimed) -> String? {
        PostgresOutbox.token(of: message, key: key).map {
            links.appendingPathComponent("invitations/\($0)").absoluteString
        }
    }

    private func webhook(_ message: PostgresOutbox.Claimed) async throws -> Outcome {
        let secrets = PostgresOutbox.secrets(of: message, key: key).compactMap {
            Data(base64Encoded: String($0.dropFirst("whsec_".count)))
        }
        guard let endpoint = message.endpoint, !secrets.isEmpty else {
            return try await dead(message, "the endpoint's secret does not open under this delivery key")
        }
        // The table's check is looser than `PostgresOutbox.webhookURL`: a URL raw SQL wrote may parse as none.
        guard let url = URL(string: endpoint.url) else {
            return try await dead(message, "the endpoint's URL is not one rbac can call: remove it and add it anew")
        }
        var data = (try? JSONSerialization.jsonObject(with: Data(message.payload.utf8)) as? [String: Any]) ?? [:]
        if let link = link(message) { data["link"] = link }
        let event: [String: Any] = [
            "type": message.eventType, "timestamp": message.createdAt.formatted(.iso8601), "data": data,
        ]
        let body = Array(
            try JSONSerialization.data(withJSONObject: event, options: [.sortedKeys, .withoutEscapingSlashes]))
        let timestamp = Int(now().timeIntervalSince1970)
        let id = message.id.uuidString.lowercased()
        // One signature by each secret that signs, space-separated, as Standard Webhooks has it for rotations: a
        // receiver that holds either one verifies the delivery.
        let signed = Array("\(id).\(timestamp).".utf8) + body
        let signatures = secrets.map {
            "v1," + Data(Digest.hmacSHA256(key: Array($0), message: signed)).base64EncodedString()
        }.joined(separator: " ")
        let response: OutboundHTTP.Response
        do {
            response = try await http.post(
                url, body: body, contentType: "application/json",
                headers: ["webhook-id: \(id)", "webhook-timestamp: \(timestamp)", "webhook-signature: \(signatures)"]
            )
        } catch let error as OutboundHTTP.Failure {
            return try await retry(message, error.description)
        }
        switch response.status {
        case 200..<300:
            try await outbox.delivered(message)
            return .delivered
        case 410:
            try await outbox.disable(endpoint: endpoint.id, error: "the endpoint answered 410 Gone")
            return .disabled
        default:
            return try await retry(
                message, "the endpoint answered \(response.status)", notBefore: Self.retryAfter(response, now: now()))
        }
    }

    private func email(_ message: PostgresOutbox.Claimed) async throws -> Outcome {
        guard let mail else { return try await retry(message, "no mail server") }
        let payload = (try? JSONSerialization.jsonObject(with: Data(message.payload.utf8)) as? [String: Any]) ?? [:]
        guard let to = (payload["email"] as? String).flatMap(EmailAddress.init(rawValue:))?.withASCIIDomain else {
            return try await dead(message, "the message names no address")
        }
        let expires = Date(timeIntervalSince1970: (payload["expires_epoch"] as? NSNumber)?.doubleValue ?? 0)
        guard expires > now() else { return try await dead(message, "the invitation expired before it was sent") }
        guard let link = link(message) else {
            return try await dead(
                message, "no link to send: the invitation was not made through rbac with this delivery key")
        }
        let bytes = InvitationEmail(
            id: message.id, from: mail.from, to: to, coupleName: payload["couple_name"] as? String ?? "a couple",
            inviter: message.inviter ?? InvitationPreview.administrator, role: payload["role"] as? String ?? "",
            expires: expires, link: link
        ).message(at: now())
        do {
            try await mail.server.send(from: mail.address, to: to, message: bytes)
        } catch let error as OutboundMail.Failure {
            return error.permanent
                ? try await dead(message, error.description) : try await retry(message, error.description)
        }
        try await outbox.delivered(message)
        return .delivered
    }

    /// Due again on the schedule, or later when the endpoint asked for that (`notBefore`), but for no longer
    /// than the schedule's longest wait: an endpoint that asks for more would hold a message back for as long as
    /// it likes.
    private func retry(_ message: PostgresOutbox.Claimed, _ error: String, notBefore: Duration? = nil) async throws
        -> Outcome
    {
        guard message.attempts <= Self.schedule.count else { return try await dead(message, error) }
        let scheduled = Self.jittered(Self.schedule[message.attempts - 1])
        let wait = max(scheduled, min(notBefore ?? .zero, Self.schedule.max()!))
        try await outbox.failed(message, error: error, retryIn: wait)
        return .retry
    }

    private func dead(_ message: PostgresOutbox.Claimed, _ error: String) async throws -> Outcome {
        try await outbox.failed(message, error: error, retryIn: nil)
        return .dead
    }

    /// How long an answer's `Retry-After` asks to wait from `now` (RFC 9110, 10.2.3: seconds, or an HTTP date);
    /// nil when it has none, or one that is neither.
    static func retryAfter(_ response: OutboundHTTP.Response, now: Date) -> Duration? {
        guard let value = response.headers["retry-after"]?.trimmingCharacters(in: .whitespaces) else { return nil }
        if value.isDigits { return Int64(value).map { .seconds($0) } }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return format.date(from: value).map { .seconds(max(0, Int64($0.timeIntervalSince(now).rounded(.up)))) }
    }

    /// Within 10% of `delay`, so that messages that failed together are not all retried at one instant.
    static func jittered(_ delay: Duration) -> Duration {
        let seconds = Double(delay.components.seconds)
        return .seconds(Int64((seconds * Double.random(in: 0.9...1.1)).rounded()))
    }
}
