import Collaboration
import Foundation
import Postgres
import Secrets

/// A delivery key other than the one this database's secrets are sealed under (`delivery_key_check`): what it
/// would seal, no worker holding the database's key could open, and what the database holds, it cannot. The
/// instance is misconfigured, not the request: the API answers 503 (`unavailable`).
public struct DeliveryKeyMismatch: CodedError, Equatable, CustomStringConvertible {
    /// Whose key: "this delivery key", "the old delivery key".
    let whose: String

    public init(whose: String = "this delivery key") { self.whose = whose }

    public var codeName: String { CollaborationError.Code.unavailable.rawValue }

    public var message: String {
        "\(whose) is not the one this database's webhook secrets and invitation links are sealed under, so "
            + "nothing was sealed or sent (`rbac delivery-key check` tells; `rbac delivery-key rotate` changes "
            + "the database's, and `reset` replaces one that is lost)"
    }

    public var description: String { message }
}

/// What `PostgresOutbox.rotateKey` re-sealed.
public struct DeliveryKeyRotation: Sendable, Hashable, Codable {
    /// Webhook secrets, the current ones and the old ones that still sign.
    public let webhookSecrets: Int
    /// Invitation links waiting in the outbox.
    public let invitationLinks: Int
    /// Boxes the old key did not open either: sealed under some third key, of no use to any worker.
    public let unopened: Int
}

/// What `PostgresOutbox.resetKey` did.
public struct DeliveryKeyReset: Sendable, Hashable, Codable {
    /// Every webhook endpoint, with its new secret (shown once): each is to be given to its receiver.
    public let webhooks: [Webhook]
    /// Invitation emails given up on, their links lost with the key: the invitations are to be made again.
    public let invitationEmails: Int
    /// Waiting webhooks that go without the invitation link they were to carry.
    public let invitationLinks: Int

    public struct Webhook: Sendable, Hashable, Codable {
        public let id: UUID
        public let url: String
        public let secret: String
    }
}

extension PostgresOutbox {
    /// Whether `key` is the database's: true or false, or nil when nothing has been sealed under any key yet.
    public func keyMatches(_ key: DeliveryKey) async throws -> Bool? {
        let box = try await run { try await $0.query("SELECT check_box FROM delivery_key_check") }.first
        return try box.map { Self.opens(key, try $0.decode("check_box")) }
    }

    /// Taken shared by whatever seals or claims, before it reads the check, and exclusively by a rotation of the
    /// key, each until its transaction ends: a seal or a claim lands wholly before a rotation (which then re-seals
    /// its boxes) or wholly after it (and reads the new check). An advisory lock rather than the check row's: a
    /// row lock writes to the row, and takes a transaction id, on every poll of every idle worker.
    static let sharedKeyLock: PostgresQuery = "SELECT pg_advisory_xact_lock_shared(hashtext('delivery_key'), 0)"
    static let exclusiveKeyLock: PostgresQuery = "SELECT pg_advisory_xact_lock(hashtext('delivery_key'), 0)"

    /// Refuses `key` (`DeliveryKeyMismatch`) unless it is the database's; the first key to seal anything
    /// becomes the database's here. For everything that seals, before it seals, in the transaction that writes
    /// the boxes (`sharedKeyLock`).
    static func requireKey(_ key: DeliveryKey, on connection: PostgresConnection) async throws {
        _ = try await connection.execute(sharedKeyLock)
        let read: PostgresQuery = "SELECT check_box FROM delivery_key_check"
        var check = try await connection.query(read).first
        if check == nil {
            _ = try await connection.execute(
                """
                INSERT INTO delivery_key_check (check_box) VALUES (\(Data(checkBox(key))))
                ON CONFLICT (singleton) DO NOTHING
                """)
            // A statement of its own: its snapshot sees the row another first key inserted while the INSERT waited.
            check = try await connection.query(read).first
        }
        try requireOpens(key, try check?.decode("check_box") ?? Data())
    }

    static func requireOpens(_ key: DeliveryKey, _ box: Data, whose: String = "this delivery key") throws {
        guard opens(key, box) else { throw DeliveryKeyMismatch(whose: whose) }
    }

    /// Whether `key` opens the database's check `box`: whether it is the database's key.
    private static func opens(_ key: DeliveryKey, _ box: Data) -> Bool {
        key.open(Array(box), for: checkContext) != nil
    }

    /// Re-seals every webhook secret and every invitation link the outbox holds under `new`, and makes it the
    /// database's, in one transaction: a worker sees all of them under one key or all under the other, and one
    /// holding `old` pauses from then on, sending nothing; what seals or claims meanwhile waits for it
    /// (`exclusiveKeyLock`). Refused (`DeliveryKeyMismatch`) when `old` is not the database's key; a database that
    /// never had one takes `new`.
    public func rotateKey(from old: DeliveryKey, to new: DeliveryKey) async throws -> DeliveryKeyRotation {
        try await transaction(opening: [Self.exclusiveKeyLock]) { connection in
            let check = try await connection.query("SELECT check_box FROM delivery_key_check").first
            if let check { try Self.requireOpens(old, try check.decode("check_box"), whose: "the old delivery key") }
            var (secrets, unopened) = (0, 0)
            /// `box` sealed under `new`; nil, and counted, when `old` does not open it.
            func resealed(_ box: Data?, for context: String) -> Data? {
                guard let box else { return nil }
                guard let contents = old.open(Array(box), for: context) else {
                    unopened += 1
                    return nil
                }
                return Data(new.seal(contents, for: context))
            }
            let endpoints = try await connection.query(
                // Not FOR UPDATE: an invitation's messages hold their endpoint's key share (the foreign key) while
                // they wait for the lock this holds; NO KEY UPDATE does not wait for them in turn.
                "SELECT id, secret_box, previous_secret_box FROM webhook_endpoints FOR NO KEY UPDATE")
            // One statement for each table, so that the lock every sealing and claim waits for is held briefly.
            // A box `old` does not open stays as it is: an empty one here.
            var (endpointIDs, currentBoxes, previousBoxes) = ([UUID](), [Data](), [Data]())
            for endpoint in endpoints {
                let id: UUID = try endpoint.decode("id")
                let current = resealed(try endpoint.decode("secret_box"), for: Self.secretContext(id))
                let previous = resealed(try endpoint.decode("previous_secret_box"), for: Self.secretContext(id))
                secrets += [current, previous].compactMap { $0 }.count
                endpointIDs.append(id)
                currentBoxes.append(current ?? Data())
                previousBoxes.append(previous ?? Data())
            }
            _ = try await connection.execute(
                """
                UPDATE webhook_endpoints e
                SET secret_box = coalesce(nullif(v.secret, ''), e.secret_box),
                    previous_secret_box = coalesce(nullif(v.previous, ''), e.previous_secret_box)
                FROM unnest(\(endpointIDs)::uuid[], \(currentBoxes)::bytea[], \(previousBoxes)::bytea[])
                    AS v(id, secret, previous)
                WHERE e.id = v.id
                """)
            let messages = try await connection.query(
                "SELECT id, token_box FROM outbox WHERE token_box IS NOT NULL FOR UPDATE")
            var (messageIDs, tokenBoxes) = ([UUID](), [Data]())
            for message in messages {
                let id: UUID = try message.decode("id")
                guard let box = resealed(try message.decode("token_box"), for: Self.tokenContext(id)) else { continue }
                messageIDs.append(id)
                tokenBoxes.append(box)
            }
            _ = try await connection.execute(
                """
                UPDATE outbox o SET token_box = v.box
                FROM unnest(\(messageIDs)::uuid[], \(tokenBoxes)::bytea[]) AS v(id, box)
                WHERE o.id = v.id
                """)
            _ = try await connection.execute(
                """
                INSERT INTO delivery_key_check (check_box) VALUES (\(Data(Self.checkBox(new))))
                ON CONFLICT (singleton) DO UPDATE SET check_box = excluded.check_box, changed_at = now()
                """)
            return DeliveryKeyRotation(webhookSecrets: secrets, invitationLinks: messageIDs.count, unopened: unopened)
        }
    }

    /// Makes `new` the database's key without the old one, which is lost, in one transaction. What the old key
    /// sealed no one can open now, so nothing of it is kept: every webhook endpoint gets a new secret (returned,
    /// for its receiver; the old ones sign nothing more), waiting invitation emails die (`resetError`), and
    /// waiting webhooks go without the link they were to carry. A worker still holding the old key pauses.
    /// Refused (`alreadyExists`), changing nothing, when `new` is the database's key already.
    public func resetKey(to new: DeliveryKey) async throws -> DeliveryKeyReset {
        try await transaction(opening: [Self.exclusiveKeyLock]) { connection in
            let check = try await connection.query("SELECT check_box FROM delivery_key_check").first
            if let check, Self.opens(new, try check.decode("check_box")) {
                throw CollaborationError(
                    .alreadyExists,
                    "this delivery key is the database's already, so nothing was reset (to move to another key, "
                        + "rbac delivery-key rotate keeps every secret and link)")
            }
            // A worker sending under the old key holds it, so it is not lost; killing what that worker sends
            // would record an email as dead that arrives. Claims take the key lock shared: none starts from here.
            let sending = try await connection.query(
                "SELECT count(*)::int8 AS messages, max(next_attempt_at) AS until FROM outbox WHERE \(sql: Self.leased)"
            )[0]
            if let until = try sending.decode("until", as: Date?.self) {
                let count = try sending.decode("messages", as: Int64.self)
                let what = count == 1 ? "a message" : "\(count) messages"
                throw CollaborationError(
                    .inProgress,
                    """
                    a worker holding the database's delivery key is sending \(what), so the key is not lost: rotate \
                    from it (rbac delivery-key rotate); if that worker is gone, reset after \
                    \(until.shownInRefusals), when its lease ends
                    """)
            }
            var (webhooks, boxes) = ([DeliveryKeyReset.Webhook](), [Data]())
            for endpoint in try await connection.query(
                "SELECT id, url FROM webhook_endpoints ORDER BY created_at, id FOR NO KEY UPDATE")
            {
                let id: UUID = try endpoint.decode("id")
                let (secret, box) = Self.newSecret(for: id, key: new)
                webhooks.append(.init(id: id, url: try endpoint.decode("url"), secret: secret))
                boxes.append(box)
            }
            _ = try await connection.execute(
                """
                UPDATE webhook_endpoints e
                SET secret_box = v.box, previous_secret_box = NULL, previous_secret_until = NULL
                FROM unnest(\(webhooks.map(\.id))::uuid[], \(boxes)::bytea[]) AS v(id, box)
                WHERE e.id = v.id
                """)
            let dropped = try await connection.query(
                """
                WITH emails AS (
                    UPDATE outbox SET status = 'dead', token_box = NULL, last_error = \(Self.resetError)
                    WHERE channel = 'email' AND status = 'pending' RETURNING 1),
                links AS (
                    UPDATE outbox SET token_box = NULL
                    WHERE channel <> 'email' AND token_box IS NOT NULL RETURNING 1)
                SELECT (SELECT count(*) FROM emails)::int8 AS emails, (SELECT count(*) FROM links)::int8 AS links
                """)[0]
            _ = try await connection.execute(
                """
                INSERT INTO delivery_key_check (check_box) VALUES (\(Data(Self.checkBox(new))))
                ON CONFLICT (singleton) DO UPDATE SET check_box = excluded.check_box, changed_at = now()
                """)
            return DeliveryKeyReset(
                webhooks: webhooks, invitationEmails: Int(try dropped.decode("emails", as: Int64.self)),
                invitationLinks: Int(try dropped.decode("links", as: Int64.self)))
        }
    }

    /// Why an invitation email died in a reset of the key.
    static let resetError = "its link was sealed under a delivery key that was lost and reset: invite again"

    private static let checkContext = "delivery-key-check"

    private static func checkBox(_ key: DeliveryKey) -> [UInt8] { key.seal(Array("rbac".utf8), for: checkContext) }
}
