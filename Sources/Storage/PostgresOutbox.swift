import Collaboration
import Foundation
import Postgres
import Secrets

/// A receiver of events, as listed: never its secret.
public struct WebhookEndpoint: Sendable, Hashable, Codable {
    public let id: UUID
    public let url: String
    /// The event types it receives; empty for every one.
    public let eventTypes: [String]
    public let createdAt: Date
    public let disabledAt: Date?
    /// Until when the secret it had before its last rotation signs beside the current one; nil when none does.
    public let previousSecretUntil: Date?
}

/// An endpoint as `rbac webhooks list` shows it: its fields, and how many of its messages wait and died (until
/// the sweep deletes them), which tells of an endpoint that fails.
public struct ListedWebhook: Sendable, Hashable, Encodable {
    public let endpoint: WebhookEndpoint
    public let waiting: Int
    public let dead: Int

    enum CodingKeys: CodingKey { case waiting, dead }

    /// The endpoint's fields, and beside them `waiting` and `dead`.
    public func encode(to encoder: any Encoder) throws {
        try endpoint.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(waiting, forKey: .waiting)
        try container.encode(dead, forKey: .dead)
    }
}

/// A message in the outbox, as listed: never its payload's secrets (it carries none).
public struct OutboxMessage: Sendable, Hashable, Codable {
    public let id: UUID
    public let eventType: String
    public let coupleID: UUID?
    public let channel: String
    public let endpointID: UUID?
    public let createdAt: Date
    public let attempts: Int
    public let nextAttemptAt: Date
    public let status: String
    public let lastError: String?
    public let deliveredAt: Date?
}

extension OutboxMessage: ListedRow {
    public var cursor: PageCursor<Date> { PageCursor(id: id, key: createdAt) }
}

/// How many settled messages a pruning of the outbox deleted.
public struct OutboxPruning: Sendable, Hashable, Codable {
    public let sent: Int
    public let dead: Int
}

/// What `PostgresOutbox.retryAll` put back in the queue, and what it left as it was, by why (`retry`'s refusals).
public struct OutboxRetries: Sendable, Hashable, Codable {
    public let retried: Int
    /// For a webhook that answered 410 Gone, sent nothing more until it is enabled again.
    public let webhookGone: Int
    /// Invitation emails whose link is gone.
    public let linkGone: Int
    /// Being sent by a worker.
    public let beingSent: Int
}

/// The outbox and the webhook endpoints in PostgreSQL (`sql/0004_outbox.sql`, `sql/functions/outbox.sql`).
/// Webhook secrets are sealed under the delivery key before they reach the database.
public struct PostgresOutbox: Sendable {
    let pool: PostgresConnectionPool

    public init(pool: PostgresConnectionPool) { self.pool = pool }

    /// The events the outbox carries: those the database writes, and `ping`'s.
    public static let eventTypes = [
        "couple.created", "couple.renamed", "couple.deleted", "role.created", "role.updated", "role.deleted",
        "invitation.created", "invitation.accepted", "invitation.revoked", "invitation.expired",
        "membership.created", "membership.updated", "membership.removed", "membership.expired",
        "ownership.transferred", "user.created", "user.updated", "user.deleted", "webhook.ping",
    ]
    public static let statuses = ["pending", "sent", "dead"]
    public static let channels = ["webhook", "email"]

    // MARK: Webhook endpoints

    /// Adds an endpoint for `eventTypes` (empty: every event; one named twice is kept once); its signing secret,
    /// shown once.
    public func addWebhook(url: String, eventTypes: [String], key: DeliveryKey) async throws -> (
        WebhookEndpoint, String
    ) {
        let url = try Self.webhookURL(url)
        let eventTypes = try Self.distinct(eventTypes: eventTypes)
        let id = UUID()
        let (secret, box) = Self.newSecret(for: id, key: key)
        let endpoint = try await transaction {
            try await Self.requireKey(key, on: $0)
            return try await $0.query(
                """
                INSERT INTO webhook_endpoints (id, url, event_types, secret_box)
                VALUES (\(id), \(url), \(eventTypes), \(box))
                RETURNING \(sql: Self.endpointColumns)
                """)
        }
        return (try Self.endpoint(endpoint[0]), secret)
    }

    /// Changes an endpoint's URL, or the events it receives (empty: every event), or sends it events again after
    /// it answered 410 Gone; its secret stays. Messages already waiting for it go to its URL as it now is.
    public func editWebhook(_ id: UUID, url: String?, eventTypes: [String]?, enable: Bool) async throws
        -> WebhookEndpoint
    {
        let url = try url.map(Self.webhookURL)
        let eventTypes = try eventTypes.map(Self.distinct(eventTypes:))
        let rows = try await run {
            try await $0.query(
                """
                UPDATE webhook_endpoints
                SET url = coalesce(\(url), url), event_types = coalesce(\(eventTypes)::text[], event_types),
                    disabled_at = CASE WHEN \(enable)::boolean THEN NULL ELSE disabled_at END
                WHERE id = \(id)
                RETURNING \(sql: Self.endpointColumns)
                """)
        }
        guard let row = rows.first else { throw Self.unknownEndpoint(id) }
        return try Self.endpoint(row)
    }

    /// Every endpoint, oldest first, with its queue as one snapshot shows both.
    public func webhooks() async throws -> [ListedWebhook] {
        try await run {
            try await $0.query(
                """
                SELECT \(sql: Self.endpointColumns), coalesce(q.waiting, 0) AS waiting, coalesce(q.dead, 0) AS dead
                FROM webhook_endpoints
                LEFT JOIN (SELECT endpoint_id, count(*) FILTER (WHERE status = 'pending') AS waiting,
                                  count(*) FILTER (WHERE status = 'dead') AS dead
                           FROM outbox WHERE status IN ('pending', 'dead') AND endpoint_id IS NOT NULL
                           GROUP BY endpoint_id) q ON q.endpoint_id = id
                ORDER BY created_at, id
                """)
        }.map {
            ListedWebhook(
                endpoint: try Self.endpoint($0), waiting: Int(try $0.decode("waiting", as: Int64.self)),
                dead: Int(try $0.decode("dead", as: Int64.self)))
        }
    }

    /// Removes an endpoint, with the messages still waiting for it.
    public func removeWebhook(_ id: UUID) async throws -> WebhookEndpoint {
        let rows = try await run {
            try await $0.query("DELETE FROM webhook_endpoints WHERE id = \(id) RETURNING \(sql: Self.endpointColumns)")
        }
        guard let row = rows.first else { throw Self.unknownEndpoint(id) }
        return try Self.endpoint(row)
    }

    /// A new secret for the endpoint, shown once. The old one signs beside it for `keepingOld`, so that the
    /// receiver can move to the new one without refusing a delivery in between; from then on, or at once for
    /// zero (a secret that leaked), it signs nothing. A secret older than the old one signs nothing either.
    public func rotateSecret(_ id: UUID, key: DeliveryKey, keepingOld: Duration = .zero) async throws -> (
        WebhookEndpoint, String
    ) {
        let (secret, box) = Self.newSecret(for: id, key: key)
        let seconds = keepingOld.components.seconds
        let rows = try await transaction {
            try await Self.requireKey(key, on: $0)
            return try await $0.query(
                """
                UPDATE webhook_endpoints SET secret_box = \(box),
                    previous_secret_box = CASE WHEN \(seconds)::float8 > 0 THEN secret_box END,
                    previous_secret_until = CASE WHEN \(seconds)::float8 > 0
                        THEN now() + make_interval(secs => \(seconds)::float8) END
                WHERE id = \(id)
                RETURNING \(sql: Self.endpointColumns)
                """)
        }
        guard let row = rows.first else { throw Self.unknownEndpoint(id) }
        return (try Self.endpoint(row), secret)
    }

    /// Queues a `webhook.ping` for endpoint `id` alone, whatever events it takes: the receiver's set-up (it is
    /// reached, it verifies the signature, it answers 2xx) checked end to end before a real event depends on it.
    /// Not for an endpoint that answered 410 Gone, which is sent nothing.
    public func ping(_ id: UUID) async throws -> OutboxMessage {
        let rows = try await transaction { connection in
            // Locked as `retry` locks it: a 410 answered meanwhile is seen here, or finds the ping waiting and
            // kills it.
            let endpoint = try await connection.query(
                "SELECT disabled_at FROM webhook_endpoints WHERE id = \(id) FOR SHARE"
            ).first
            guard let endpoint else { throw Self.unknownEndpoint(id) }
            if try endpoint.decode("disabled_at", as: Date?.self) != nil {
                throw CollaborationError(.notFound, "cannot ping \(Self.gone(id))")
            }
            return try await connection.query(
                """
                INSERT INTO outbox (event_type, payload, channel, endpoint_id)
                VALUES ('webhook.ping', jsonb_build_object('webhook_id', \(id)::uuid), 'webhook', \(id))
                RETURNING \(sql: Self.messageColumns)
                """)
        }
        return try Self.message(rows[0])
    }

    // MARK: Messages

    /// `limit` messages, newest first, after the place `after` names (at the message's own when it carries
    /// none); of `status`, of couple `couple`, of event type `event` and to endpoint `webhook` only when given.
    public func messages(
        status: String?, couple: UUID? = nil, event: String? = nil, webhook: UUID? = nil, limit: Int,
        after: PageCursor<Date>? = nil
    ) async throws -> [OutboxMessage] {
        try Self.validate(status: status, event: event)
        return try await run { connection in
            let rows = try await connection.query(
                """
                WITH place AS (
                    SELECT coalesce(\(after?.key), (SELECT created_at FROM outbox WHERE id = \(after?.id))) AS at)
                SELECT \(sql: Self.messageColumns) FROM outbox, place
                WHERE (\(status)::text IS NULL OR status = \(status)) AND (\(couple)::uuid IS NULL OR couple_id = \(couple))
                  AND (\(event)::text IS NULL OR event_type = \(event))
                  AND (\(webhook)::uuid IS NULL OR endpoint_id = \(webhook))
                  AND (\(after?.id)::uuid IS NULL OR created_at < place.at
                       OR (created_at = place.at AND id > \(after?.id)))
                ORDER BY created_at DESC, id LIMIT \(limit)
                """)
            if rows.isEmpty, let after, after.key == nil {
                let known = try await connection.query("SELECT 1 FROM outbox WHERE id = \(after.id)")
                guard !known.isEmpty else { throw Self.unknownMessage(after.id) }
            }
            return rows
        }.map(Self.message)
    }

    /// Message `id` as it now is.
    public func message(_ id: UUID) async throws -> OutboxMessage {
        let rows = try await run {
            try await $0.query("SELECT \(sql: Self.messageColumns) FROM outbox WHERE id = \(id)")
        }
        guard let row = rows.first else { throw Self.unknownMessage(id) }
        return try Self.message(row)
    }

    /// Puts a message back in the queue, due now, with its attempts counted afresh; not one for an endpoint that
    /// answered 410 Gone, to which nothing more is sent until it is enabled again, nor an invitation email that has
    /// lost its link, nor one a worker is sending right then (made due, another worker would send it beside the
    /// first).
    public func retry(_ id: UUID) async throws -> OutboxMessage {
        let shown = id.uuidString.lowercased()
        let rows = try await transaction { connection in
            let put = try await Self.putBack(on: connection, message: id)
            if let webhook = put.goneWebhook {
                throw CollaborationError(.notFound, "message \(shown) is for \(Self.gone(webhook))")
            }
            if put.counts.linkGone > 0 {
                throw CollaborationError(
                    .notFound,
                    """
                    message \(shown) is an invitation email whose link is gone (the email was given up on, or the \
                    invitation accepted, revoked, expired or deleted): invite again
                    """)
            }
            if let until = put.leasedUntil {
                throw CollaborationError(
                    .inProgress,
                    """
                    message \(shown) is being sent by a worker, which has until \(until.shownInRefusals) to answer: \
                    retry it after that if it has not gone
                    """)
            }
            guard put.counts.retried > 0 else {
                throw CollaborationError(
                    .notFound, "no message \(shown) waiting or dead (a sent one is not sent again)")
            }
            return try await connection.query("SELECT \(sql: Self.messageColumns) FROM outbox WHERE id = \(id)")
        }
        return try Self.message(rows[0])
    }

    /// Puts back in the queue, due now, every message waiting or dead (`status`: only those) of `couple`,
    /// `event` and `webhook` that `retry` would, at once: after an endpoint was down past the retry schedule,
    /// the many messages that died meanwhile. Counts the others by why `retry` would refuse them.
    public func retryAll(status: String?, couple: UUID?, event: String?, webhook: UUID?) async throws -> OutboxRetries {
        try Self.validate(retrying: status, event: event)
        return try await transaction {
            try await Self.putBack(on: $0, status: status, couple: couple, event: event, webhook: webhook).counts
        }
    }

    /// What `putBack` put back and left, by why; and for the one message `retry` asks about, the endpoint that
    /// answered 410 Gone, or when the worker sending it must have answered by.
    private struct PutBack {
        let counts: OutboxRetries
        let goneWebhook: UUID?
        let leasedUntil: Date?
    }

    /// Puts back the messages waiting or dead of `message`, `status`, `couple`, `event` and `webhook` (all when
    /// nil), but those for an endpoint that answered 410 Gone, those a worker is sending, and the invitation emails
    /// without a link: it goes from one when it dies, or its invitation is accepted, revoked, expired or deleted
    /// (rbac.erase_sealed_token), and without one it would only die again.
    private static func putBack(
        on connection: PostgresConnection, message: UUID? = nil, status: String? = nil, couple: UUID? = nil,
        event: String? = nil, webhook: UUID? = nil
    ) async throws -> PutBack {
        // The endpoints are locked before the messages, FOR SHARE, which `disable` waits for: a 410 answered
        // meanwhile is seen here, or finds the message waiting and kills it. The messages are locked as a claim
        // locks them: a claim landing first is seen here, one landing after finds them due. Each in one order, so
        // that two of these do not deadlock.
        let endpoints = try await connection.query(
            """
            SELECT id FROM webhook_endpoints
            WHERE (\(webhook)::uuid IS NULL OR id = \(webhook))
              AND (\(message)::uuid IS NULL OR id = (SELECT endpoint_id FROM outbox WHERE id = \(message)))
            ORDER BY id FOR SHARE
            """)
        if let webhook, endpoints.isEmpty { throw unknownEndpoint(webhook) }
        let row = try await connection.query(
            """
            WITH matching AS (
                SELECT o.id, o.endpoint_id, o.channel = 'email' AND o.token_box IS NULL AS link_gone,
                       e.disabled_at IS NOT NULL AS webhook_gone,
                       CASE WHEN \(sql: leased) THEN o.next_attempt_at END AS leased_until
                FROM outbox o LEFT JOIN webhook_endpoints e ON e.id = o.endpoint_id
                WHERE o.status IN ('pending', 'dead') AND (\(message)::uuid IS NULL OR o.id = \(message))
                  AND (\(status)::text IS NULL OR o.status = \(status))
                  AND (\(couple)::uuid IS NULL OR o.couple_id = \(couple))
                  AND (\(event)::text IS NULL OR o.event_type = \(event))
                  AND (\(webhook)::uuid IS NULL OR o.endpoint_id = \(webhook))
                ORDER BY o.id FOR UPDATE OF o),
            retried AS (
                UPDATE outbox o SET status = 'pending', next_attempt_at = now(), attempts = 0
                FROM matching m
                WHERE o.id = m.id AND NOT (m.webhook_gone OR m.link_gone OR m.leased_until IS NOT NULL)
                RETURNING 1)
            SELECT (SELECT count(*) FROM retried) AS retried,
                   count(*) FILTER (WHERE webhook_gone) AS webhook_gone,
                   count(*) FILTER (WHERE link_gone) AS link_gone,
                   count(*) FILTER (WHERE leased_until IS NOT NULL AND NOT webhook_gone AND NOT link_gone)
                       AS being_sent,
                   (array_agg(endpoint_id) FILTER (WHERE webhook_gone))[1] AS gone_webhook,
                   max(leased_until) AS leased_until
            FROM matching
            """)[0]
        func count(_ column: String) throws -> Int { Int(try row.decode(column, as: Int64.self)) }
        return PutBack(
            counts: OutboxRetries(
                retried: try count("retried"), webhookGone: try count("webhook_gone"),
                linkGone: try count("link_gone"), beingSent: try count("being_sent")),
            goneWebhook: try row.decode("gone_webhook"), leasedUntil: try row.decode("leased_until"))
    }

    // MARK: The worker's side

    /// A message claimed for delivery, with where it goes.
    public struct Claimed: Sendable {
        public let id: UUID
        public let eventType: String
        public let channel: String
        /// The payload as JSON text.
        public let payload: String
        public let createdAt: Date
        public let attempts: Int
        /// This claim's token: the outcome is recorded only while it is the message's latest claim.
        public let claim: UUID
        /// A webhook's endpoint: its id, URL and sealed secrets, the current one and the one before it while
        /// that still signs.
        public let endpoint: (id: UUID, url: String, secretBoxes: [[UInt8]])?
        /// The invitation's token, sealed, for the link the message carries.
        public let tokenBox: [UInt8]?
        /// For an invitation email, whom the invitation is from, read as it is sent (`rbac.inviter_shown`).
        public let inviter: String?
    }

    /// Claims up to `limit` due messages of `channels`: they count an attempt and are not due again for `lease`,
    /// so another worker skips them now (SKIP LOCKED) and takes them up again only if this one dies before
    /// answering. A worker whose `key` is not the database's claims nothing (`DeliveryKeyMismatch`): it could
    /// open no secret or link of what it claimed, and would send each message to its death. The claim reads the
    /// check beside the boxes, holding `sharedKeyLock` from before either: a rotation of the key lands wholly
    /// before the claim or wholly after it.
    public func claim(limit: Int, lease: Duration, channels: [String] = ["webhook"], key: DeliveryKey) async throws
        -> [Claimed]
    {
        let seconds = lease.components.seconds
        return try await transaction(opening: [Self.sharedKeyLock]) { connection in
            let rows = try await connection.query(
                """
                WITH due AS (
                    SELECT id FROM outbox
                    WHERE status = 'pending' AND next_attempt_at <= now() AND channel = ANY (\(channels))
                    ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                UPDATE outbox o SET attempts = o.attempts + 1, claim = gen_random_uuid(),
                    next_attempt_at = now() + make_interval(secs => \(seconds)::float8)
                FROM due WHERE o.id = due.id
                RETURNING o.id, o.event_type, o.channel, o.payload::text AS payload, o.created_at, o.attempts,
                          o.claim, o.token_box, o.endpoint_id,
                          (SELECT url FROM webhook_endpoints WHERE id = o.endpoint_id) AS url,
                          (SELECT secret_box FROM webhook_endpoints WHERE id = o.endpoint_id) AS secret_box,
                          (SELECT previous_secret_box FROM webhook_endpoints
                           WHERE id = o.endpoint_id AND previous_secret_until > now()) AS previous_secret_box,
                          -- Compared as text: a payload that raw SQL wrote wrong must not fail every claim.
                          CASE WHEN o.channel = 'email' THEN rbac.inviter_shown(
                              (SELECT i.invited_by FROM invitations i
                               WHERE i.couple_id = o.couple_id AND i.id::text = o.payload ->> 'invitation_id'))
                          END AS inviter,
                          (SELECT check_box FROM delivery_key_check) AS key_check
                """)
            // Refused, the claim is undone, its attempts never counted. With nothing sealed under any key yet, the
            // first to send makes its key the database's.
            if let row = rows.first {
                if let check = try row.decode("key_check", as: Data?.self) {
                    try Self.requireOpens(key, check)
                } else {
                    try await Self.requireKey(key, on: connection)
                }
            }
            return try rows.map { row in
                let endpoint: UUID? = try row.decode("endpoint_id")
                return Claimed(
                    id: try row.decode("id"), eventType: try row.decode("event_type"),
                    channel: try row.decode("channel"),
                    payload: try row.decode("payload"), createdAt: try row.decode("created_at"),
                    attempts: Int(try row.decode("attempts", as: Int32.self)), claim: try row.decode("claim"),
                    endpoint: try endpoint.map {
                        let boxes = [
                            try row.decode("secret_box", as: Data?.self),
                            try row.decode("previous_secret_box", as: Data?.self),
                        ]
                        return ($0, try row.decode("url"), boxes.compactMap { $0.map(Array.init) })
                    },
                    tokenBox: try row.decode("token_box", as: Data?.self).map(Array.init),
                    inviter: try row.decode("inviter"))
            }
        }
    }

    /// A message a worker is sending: claimed, and its lease not over. A failed attempt ends its claim, so a
    /// message waiting out a backoff is no worker's.
    static let leased: StaticString = "status = 'pending' AND claim IS NOT NULL AND next_attempt_at > now()"

    /// Records a delivery. Like `failed`, only while `message`'s claim is the latest (the message waiting, under
    /// that claim's token): a worker answering after its lease ran out, when another may have taken the message
    /// up and sent it, records nothing over what that one records.
    public func delivered(_ message: Claimed) async throws {
        _ = try await run {
            try await $0.execute(
                """
                UPDATE outbox SET status = 'sent', delivered_at = now(), last_error = NULL, token_box = NULL
                WHERE id = \(message.id) AND status = 'pending' AND claim = \(message.claim)
                """)
        }
    }

    /// Records a failed attempt: due again after `retryIn`, or dead when nil; as `delivered`, only while
    /// `message`'s claim is the latest. The claim ends: waiting out its backoff, the message is no worker's (and
    /// `retry` may make it due).
    public func failed(_ message: Claimed, error: String, retryIn: Duration?) async throws {
        let lastError = error.storedPrefix(1000)
        let seconds = retryIn.map { $0.components.seconds }
        _ = try await run {
            try await $0.execute(
                """
                UPDATE outbox SET last_error = \(lastError),
                    status = CASE WHEN \(seconds)::float8 IS NULL THEN 'dead' ELSE 'pending' END,
                    token_box = CASE WHEN \(seconds)::float8 IS NULL THEN NULL ELSE token_box END,
                    claim = NULL, next_attempt_at = now() + make_interval(secs => coalesce(\(seconds)::float8, 0))
                WHERE id = \(message.id) AND status = 'pending' AND claim = \(message.claim)
                """)
        }
    }

    /// Gives back a message whose sending its worker stopped (serve or deliver stopping): due again at once, the
    /// attempt not counted, as nothing failed; as `delivered`, only while `message`'s claim is the latest.
    public func release(_ message: Claimed) async throws {
        _ = try await run {
            try await $0.execute(
                """
                UPDATE outbox SET claim = NULL, attempts = attempts - 1, next_attempt_at = now()
                WHERE id = \(message.id) AND status = 'pending' AND claim = \(message.claim)
                """)
        }
    }

    /// An endpoint that answered 410 Gone: it gets nothing more; its waiting messages are dead.
    public func disable(endpoint: UUID, error: String) async throws {
        let message = error.storedPrefix(1000)
        try await pool.withTransaction { connection in
            // FOR UPDATE, which the KEY SHARE lock of a transaction writing an event for the endpoint
            // (rbac.enqueue_event) holds off and the UPDATE's own lock does not: every such transaction has ended
            // before the messages are read below, and one writing after waits, then finds the endpoint disabled.
            _ = try await connection.execute("SELECT FROM webhook_endpoints WHERE id = \(endpoint) FOR UPDATE")
            _ = try await connection.execute("UPDATE webhook_endpoints SET disabled_at = now() WHERE id = \(endpoint)")
            _ = try await connection.execute(
                """
                UPDATE outbox SET status = 'dead', last_error = \(message), token_box = NULL
                WHERE endpoint_id = \(endpoint) AND status = 'pending'
                """)
        }
    }

    /// Deletes the sent messages delivered more than `keepSent` ago and the dead ones whose last attempt was due
    /// more than `keepDead` ago, `batch` of each to a statement, until none is left; a waiting message is never
    /// deleted. One being retried right then is passed over (SKIP LOCKED), and one retried since its batch began
    /// is read again and kept. Returns how many of each went; `progress` hears the count so far after each batch
    /// that leaves more to do.
    public func prune(
        keepSent: Duration, keepDead: Duration, batch: Int = 1000, progress: (OutboxPruning) -> Void = { _ in }
    ) async throws -> OutboxPruning {
        let (sent, dead) = (keepSent.components.seconds, keepDead.components.seconds)
        var total = OutboxPruning(sent: 0, dead: 0)
        // A cancelled task (serve shutting down) stops between batches, leaving the rest to the next sweep.
        repeat {
            let row = try await run { connection in
                try await connection.query(
                    """
                    WITH sent AS (
                        DELETE FROM outbox WHERE id IN (
                            SELECT id FROM outbox
                            WHERE status = 'sent' AND delivered_at < now() - make_interval(secs => \(sent)::float8)
                            ORDER BY delivered_at LIMIT \(batch) FOR UPDATE SKIP LOCKED)
                        RETURNING 1),
                    dead AS (
                        DELETE FROM outbox WHERE id IN (
                            SELECT id FROM outbox
                            WHERE status = 'dead' AND next_attempt_at < now() - make_interval(secs => \(dead)::float8)
                            ORDER BY next_attempt_at LIMIT \(batch) FOR UPDATE SKIP LOCKED)
                        RETURNING 1)
                    SELECT (SELECT count(*) FROM sent) AS sent, (SELECT count(*) FROM dead) AS dead
                    """)[0]
            }
            let sentNow = Int(try row.decode("sent", as: Int64.self))
            let deadNow = Int(try row.decode("dead", as: Int64.self))
            total = OutboxPruning(sent: total.sent + sentNow, dead: total.dead + deadNow)
            guard sentNow == batch || deadNow == batch else { break }
            progress(total)
        } while !Task.isCancelled
        return total
    }

    /// Per channel: how many messages wait, and how long the oldest has (seconds).
    public func queue() async throws -> [(channel: String, depth: Int, oldest: Int64)] {
        try await run {
            try await $0.query(
                """
                SELECT channel, count(*) AS depth,
                       extract(epoch FROM now() - min(created_at))::bigint AS oldest
                FROM outbox WHERE status = 'pending' GROUP BY channel
                """)
        }.map { (try $0.decode("channel"), Int(try $0.decode("depth", as: Int64.self)), try $0.decode("oldest")) }
    }

    /// The secrets that sign a claimed message, unsealed: its endpoint's current one first, then the one before
    /// it while that still signs; empty when the current one does not open under this key.
    public static func secrets(of claimed: Claimed, key: DeliveryKey) -> [String] {
        guard let endpoint = claimed.endpoint,
            let current = endpoint.secretBoxes.first.flatMap({ key.open($0, for: secretContext(endpoint.id)) })
        else { return [] }
        let previous = endpoint.secretBoxes.dropFirst().compactMap { key.open($0, for: secretContext(endpoint.id)) }
        return ([current] + previous).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The invitation token a claimed message carries, unsealed; nil when it carries none.
    public static func token(of claimed: Claimed, key: DeliveryKey) -> String? {
        claimed.tokenBox.flatMap { key.open($0, for: tokenContext(claimed.id)) }
            .map { String(decoding: $0, as: UTF8.self) }
    }

    // MARK: Helpers

    static func secretContext(_ id: UUID) -> String { "webhook-secret:\(id.uuidString.lowercased())" }

    /// What an outbox message's sealed token is bound to: its row.
    static func tokenContext(_ id: UUID) -> String { "outbox-token:\(id.uuidString.lowercased())" }

    /// A new secret for endpoint `id` (`whsec_` and 32 random bytes in base64, as Standard Webhooks writes
    /// secrets), and the box it is stored in, sealed under `key` and bound to the endpoint.
    static func newSecret(for id: UUID, key: DeliveryKey) -> (secret: String, box: Data) {
        let secret = "whsec_" + Data(SecureRandom.bytes(count: 32)).base64EncodedString()
        return (secret, Data(key.seal(Array(secret.utf8), for: secretContext(id))))
    }

    /// `text` as an endpoint's URL is stored and called, or why it cannot be one. It must be an https URL with a
    /// host, at most 2000 characters of printable ASCII (RFC 3986: other characters percent-encoded, an
    /// international domain in its xn-- form, which is what the request sends anyway), with no user or password,
    /// no #fragment, a host and port a connection can reach (`serverRefusal`), and two hexadecimal digits after
    /// each %. The scheme, which is case-insensitive, is stored in lower case, as the table's check wants it.
    public static func webhookURL(_ text: String) throws(CollaborationError) -> String {
        let length = text.storedLength
        guard length <= 2000 else {
            throw CollaborationError(.invalidInput, "a webhook URL must be at most 2000 characters, not \(length)")
        }
        // Neither text that is no URL nor one that holds a password is quoted back: either may hold one. A
        // stored endpoint's URL is listed and written to the audit log as it is; deliveries prove themselves by
        // their signature instead.
        if let offset = text.unicodeScalars.firstIndex(where: { !(0x21...0x7E).contains($0.value) }) {
            let position = text.unicodeScalars.distance(from: text.unicodeScalars.startIndex, to: offset) + 1
            throw CollaborationError(
                .invalidInput,
                "a webhook URL must be printable ASCII without spaces, and character \(position) is not: "
                    + "percent-encode it, or give an international domain in its xn-- form")
        }
        guard let parsed = URLComponents(string: text) else {
            throw CollaborationError(.invalidInput, "a webhook URL must be an https URL; this text is not a URL")
        }
        guard parsed.user == nil, parsed.password == nil else {
            throw CollaborationError(
                .invalidInput, "a webhook URL must not carry a user or password: it is listed and audited as it is")
        }
        guard parsed.scheme?.lowercased() == "https", parsed.host?.isEmpty == false, parsed.fragment == nil else {
            throw CollaborationError(
                .invalidInput, "a webhook URL must be an https URL with a host and no #fragment, not \(quoted(text))")
        }
        if let refusal = parsed.serverRefusal("a webhook URL") { throw CollaborationError(.invalidInput, refusal) }
        // libcurl sends a % without its two digits as it is, and a server refuses or misreads it; each message
        // would be retried for more than a day before it died.
        if let percent = text.firstMatch(of: /%(?![0-9A-Fa-f]{2})/) {
            throw CollaborationError(
                .invalidInput,
                "a webhook URL must follow each % with two hexadecimal digits (%25 for a % itself), and character "
                    + "\(text.distance(from: text.startIndex, to: percent.range.lowerBound) + 1) does not")
        }
        // An https URL with a host begins with its scheme and "//", whatever their case.
        return "https://" + text.dropFirst("https://".count)
    }

    /// Refuses a status or an event type the outbox does not know, naming those it does.
    public static func validate(status: String?, event: String?) throws(CollaborationError) {
        if let status, !statuses.contains(status) {
            throw CollaborationError(
                .invalidInput, "unknown status \(quoted(status)); valid: \(statuses.joined(separator: ", "))")
        }
        try validate(eventTypes: event.map { [$0] } ?? [])
    }

    /// `validate(status:event:)` for what `retryAll` puts back: a sent message is not sent again.
    public static func validate(retrying status: String?, event: String?) throws(CollaborationError) {
        try validate(status: status, event: event)
        guard status != "sent" else {
            throw CollaborationError(.invalidInput, "a sent message is not sent again: the status is pending or dead")
        }
    }

    /// Refuses an event type the outbox does not know, naming those it does.
    public static func validate(eventTypes: [String]) throws(CollaborationError) {
        for type in eventTypes where !Self.eventTypes.contains(type) {
            throw CollaborationError(
                .invalidInput, "unknown event \(quoted(type)); valid: \(Self.eventTypes.joined(separator: ", "))")
        }
    }

    /// The event types, each once, in the order first given; refused as `validate` refuses them.
    private static func distinct(eventTypes: [String]) throws(CollaborationError) -> [String] {
        try validate(eventTypes: eventTypes)
        var named = Set<String>()
        return eventTypes.filter { named.insert($0).inserted }
    }

    /// Endpoint `id`, which answered 410 Gone, as a refusal names it.
    private static func gone(_ id: UUID) -> String {
        let webhook = id.uuidString.lowercased()
        return """
            webhook \(webhook), which answered 410 Gone and is sent nothing more until \
            `rbac webhooks edit \(webhook) --enable`
            """
    }

    private static func unknownMessage(_ id: UUID) -> CollaborationError {
        CollaborationError(.notFound, "no message \(id.uuidString.lowercased()) in the outbox")
    }

    private static func unknownEndpoint(_ id: UUID) -> CollaborationError {
        CollaborationError(.notFound, "webhook \(id.uuidString.lowercased()) does not exist")
    }

    private static let endpointColumns: StaticString = """
        id, url, event_types, created_at, disabled_at,
        CASE WHEN previous_secret_until > now() THEN previous_secret_until END AS previous_secret_until
        """

    private static func endpoint(_ row: PostgresRow) throws -> WebhookEndpoint {
        WebhookEndpoint(
            id: try row.decode("id"), url: try row.decode("url"), eventTypes: try row.decode("event_types"),
            createdAt: try row.decode("created_at"), disabledAt: try row.decode("disabled_at"),
            previousSecretUntil: try row.decode("previous_secret_until"))
    }

    private static let messageColumns: StaticString = """
        id, event_type, couple_id, channel, endpoint_id, created_at, attempts, next_attempt_at, status, last_error,
        delivered_at
        """

    private static func message(_ row: PostgresRow) throws -> OutboxMessage {
        OutboxMessage(
            id: try row.decode("id"), eventType: try row.decode("event_type"), coupleID: try row.decode("couple_id"),
            channel: try row.decode("channel"), endpointID: try row.decode("endpoint_id"),
            createdAt: try row.decode("created_at"), attempts: Int(try row.decode("attempts", as: Int32.self)),
            nextAttemptAt: try row.decode("next_attempt_at"), status: try row.decode("status"),
            lastError: try row.decode("last_error"), deliveredAt: try row.decode("delivered_at"))
    }

    func run<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        do { return try await pool.withConnection(body) } catch let error as PostgresError { throw domainError(error) }
    }

    /// `run` in one transaction, which `opening` begins: for what checks the delivery key and then seals or claims.
    func transaction<T: Sendable>(opening: [PostgresQuery] = [], _ body: (PostgresConnection) async throws -> T)
        async throws -> T
    {
        try await run { try await $0.withTransaction(opening: opening, body) }
    }
}
